"""docker-compose.yml: valid for Debian's docker-compose, wired together, in step with the code.

(docker-compose.scale.yml, the scaled deployment, is tested in tests/test_compose_scale.py;
both use the helpers and ``.env.example`` of tests/compose_files.py.)

``docker-compose config`` validates and resolves the file without a Docker engine (the
``docker-compose`` Debian package, installed by ``make test``). The structure checks run on
the resolved file, with the defaults and with ``.env.example``, which must resolve the same.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from memory_chain.config import MemorySettings
from tests.compose_files import (
    COMPOSE_FILES,
    ENV_EXAMPLE,
    ENV_PREFIX,
    ROOT,
    VARIABLE,
    api_policy,
    compose_config,
    compose_variables,
    ports,
    volumes,
)
from tests.webui.open_webui import pinned_version

DOCKERFILE = ROOT / "Dockerfile"
SETTING_NAME = re.compile(rf"\b{re.escape(ENV_PREFIX)}\w+")
SERVICES = {"api", "ollama", "qdrant", "open-webui"}


def _env_example() -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in ENV_EXAMPLE.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The compose file as ``docker-compose config`` resolves it with every default."""
    empty = tmp_path_factory.mktemp("compose") / "empty.env"
    empty.write_text("")
    code, out, err = compose_config(empty)
    assert code == 0, f"docker-compose config failed:\n{err}"
    config: dict[str, Any] = yaml.safe_load(out)
    return config


def test_config_is_valid_and_env_example_resolves_the_same(resolved: dict[str, Any]) -> None:
    code, out, err = compose_config(ENV_EXAMPLE)
    assert code == 0, f"docker-compose config with .env.example failed:\n{err}"
    assert yaml.safe_load(out) == resolved


def test_every_variable_has_one_default_listed_in_env_example() -> None:
    variables = compose_variables()
    example = _env_example()
    defaults: dict[str, set[str | None]] = {}
    for path in COMPOSE_FILES:
        for match in VARIABLE.finditer(path.read_text()):
            defaults.setdefault(match["name"], set()).add(match["default"])
    for name, seen in defaults.items():
        assert len(seen) == 1, f"${{{name}}} has several defaults in the compose files: {seen}"
        assert None not in seen, f"${{{name}}} has no default in the compose files"
    assert set(example) == set(variables)
    for name, default in variables.items():
        assert example[name] == default, name


def test_services_ports_and_volumes(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    assert set(services) >= SERVICES
    for name, service in services.items():
        for source in volumes(service).values():
            assert source in resolved["volumes"], f"{name}: {source} is not a named volume"

    api = services["api"]
    port = str(MemorySettings.model_fields["server_port"].default)
    assert api["build"]["context"] == str(ROOT)
    assert api["environment"]["MEMORY_CHAIN_SERVER_PORT"] == port
    assert ports(api) == [("127.0.0.1", port, port)]
    data_dir = re.search(r"MEMORY_CHAIN_DATA_DIR=(\S+)", DOCKERFILE.read_text())
    assert data_dir is not None, "the Dockerfile sets MEMORY_CHAIN_DATA_DIR"
    assert data_dir[1] in volumes(api), "the SQL data (data_dir) is in a volume"
    assert "/qdrant/storage" in volumes(services["qdrant"])
    assert "/root/.ollama" in volumes(services["ollama"])
    assert "/app/backend/data" in volumes(services["open-webui"])
    assert [target for _, _, target in ports(services["open-webui"])] == ["8080"]


def test_health_checks_and_start_order(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    for name in SERVICES:
        assert services[name]["healthcheck"]["test"], name
    assert "MEMORY_CHAIN_SERVER_PORT" in " ".join(services["api"]["healthcheck"]["test"])
    assert services["api"]["depends_on"] == {
        "qdrant": {"condition": "service_healthy"},
        "ollama": {"condition": "service_healthy"},
        "ollama-pull": {"condition": "service_completed_successfully"},
    }
    assert services["open-webui"]["depends_on"] == {"api": {"condition": "service_healthy"}}


def test_api_reaches_qdrant_and_ollama_and_pulls_its_models(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    env = services["api"]["environment"]
    assert urlsplit(env["MEMORY_CHAIN_QDRANT_URL"]).hostname == "qdrant"
    assert urlsplit(env["MEMORY_CHAIN_OLLAMA_BASE_URL"]).netloc == "ollama:11434"
    fields = MemorySettings.model_fields
    assert env["MEMORY_CHAIN_OLLAMA_CHAT_MODEL"] == fields["ollama_chat_model"].default
    assert env["MEMORY_CHAIN_OLLAMA_SUMMARY_MODEL"] == fields["ollama_summary_model"].default

    pull = services["ollama-pull"]
    assert pull["restart"] == "no"
    assert pull["depends_on"] == {"ollama": {"condition": "service_healthy"}}
    assert pull["environment"]["OLLAMA_HOST"] == env["MEMORY_CHAIN_OLLAMA_BASE_URL"]
    assert pull["environment"]["CHAT_MODEL"] == env["MEMORY_CHAIN_OLLAMA_CHAT_MODEL"]
    assert pull["environment"]["SUMMARY_MODEL"] == env["MEMORY_CHAIN_OLLAMA_SUMMARY_MODEL"]
    script = " ".join(pull["entrypoint"] + pull["command"])
    assert "ollama pull" in script
    assert "CHAT_MODEL" in script
    assert "SUMMARY_MODEL" in script


def test_open_webui_talks_to_the_api(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    env = services["open-webui"]["environment"]
    port = services["api"]["environment"]["MEMORY_CHAIN_SERVER_PORT"]
    assert env["OPENAI_API_BASE_URL"] == f"http://api:{port}/v1"
    assert env["OPENAI_API_KEY"]
    assert str(env["ENABLE_FORWARD_USER_INFO_HEADERS"]).lower() == "true"
    assert str(env["ENABLE_OLLAMA_API"]).lower() == "false"  # every chat goes through memory
    assert str(env["BYPASS_MODEL_ACCESS_CONTROL"]).lower() == "true"  # users may chat too
    # The compose file runs the Open WebUI release that tests/webui tests.
    assert services["open-webui"]["image"].endswith(":v" + pinned_version())


def test_every_memory_chain_name_is_a_setting() -> None:
    valid = {ENV_PREFIX + name.upper() for name in MemorySettings.model_fields}
    for path in (*COMPOSE_FILES, DOCKERFILE, ENV_EXAMPLE):
        used = set(SETTING_NAME.findall(path.read_text()))
        assert used, path.name
        assert used <= valid, f"{path.name}: not MemorySettings fields: {used - valid}"


def test_the_api_answers_the_names_it_is_reached_by(
    resolved: dict[str, Any], tmp_path: Path
) -> None:
    port = resolved["services"]["api"]["environment"]["MEMORY_CHAIN_SERVER_PORT"]
    policy = api_policy(resolved["services"])
    webui = resolved["services"]["open-webui"]["environment"]["OPENAI_API_BASE_URL"]
    assert policy.host_allowed(urlsplit(webui).netloc)  # Open WebUI, server to server
    assert policy.host_allowed(f"127.0.0.1:{port}")  # the health check, this machine's browser
    assert policy.host_allowed(f"localhost:{port}")
    assert not policy.host_allowed(f"attacker.example:{port}")
    assert not policy.any_host
    # API_TRUSTED_HOSTS adds the names browsers elsewhere use.
    env_file = tmp_path / "hosts.env"
    env_file.write_text("API_TRUSTED_HOSTS=memory.example.com,192.168.1.20\n")
    code, out, err = compose_config(env_file)
    assert code == 0, err
    named = api_policy(yaml.safe_load(out)["services"])
    assert named.host_allowed(f"memory.example.com:{port}")
    assert named.host_allowed(f"192.168.1.20:{port}")
    assert named.host_allowed(urlsplit(webui).netloc)
