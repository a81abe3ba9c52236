"""Files users run directly: the README's first commands and CI agree with the Makefile."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_starts_with_the_two_commands() -> None:
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    commands = [line for line in lines[:8] if line.startswith(("make ", "    make "))]
    assert [command.strip() for command in commands] == ["make serve", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
