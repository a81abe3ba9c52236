"""Files users run directly: docker-compose.yml and the Makefile agree with the code."""

from __future__ import annotations

from pathlib import Path

import yaml

from memory_chain.config import MemorySettings

ROOT = Path(__file__).resolve().parent.parent


def test_compose_environment_names_are_settings() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert {"api", "qdrant", "ollama"} <= set(compose["services"])
    fields = {name.upper() for name in MemorySettings.model_fields}
    for service in compose["services"].values():
        for name in service.get("environment", {}):
            if name.startswith("MEMORY_CHAIN_"):
                assert name.removeprefix("MEMORY_CHAIN_") in fields, name
    api = compose["services"]["api"]
    port = str(MemorySettings.model_fields["server_port"].default)
    assert api["environment"]["MEMORY_CHAIN_SERVER_PORT"] == port
    assert api["ports"] == [f"{port}:{port}"]
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            assert volume.split(":")[0] in compose["volumes"]


def test_readme_starts_with_the_two_commands() -> None:
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    commands = [line for line in lines[:8] if line.startswith(("make ", "    make "))]
    assert [command.strip() for command in commands] == ["make serve", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
