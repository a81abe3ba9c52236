"""The compose files and the helpers their tests share (tests/test_compose.py for
docker-compose.yml, tests/test_compose_scale.py for docker-compose.scale.yml).

``compose_config`` runs ``docker-compose config``, which validates and resolves a compose file
without a Docker engine (the ``docker-compose`` Debian package, installed by ``make test``);
``ports``, ``volumes`` and ``api_policy`` read a resolved file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from memory_chain.config import MemorySettings
from memory_chain.web_policy import WebPolicy
from tests.needs import missing

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
COMPOSE_SCALE = ROOT / "docker-compose.scale.yml"
COMPOSE_FILES = (COMPOSE, COMPOSE_SCALE)
ENV_EXAMPLE = ROOT / ".env.example"
# ${NAME} or ${NAME:-default}; compose's own $$ escapes are not variables.
VARIABLE = re.compile(r"(?<!\$)\$\{(?P<name>\w+)(?::-(?P<default>[^}]*))?\}")
ENV_PREFIX = str(MemorySettings.model_config.get("env_prefix", ""))


def _docker_compose() -> str:
    path = shutil.which("docker-compose")
    if path is None:
        reason = (
            "docker-compose is not installed: run `make test` or `bash scripts/setup.sh --test`, "
            "which install Debian's docker-compose"
        )
        missing(reason)
    return path


def compose_variables() -> dict[str, str | None]:
    """Every variable of the compose files, with its default."""
    return {
        match["name"]: match["default"]
        for path in COMPOSE_FILES
        for match in VARIABLE.finditer(path.read_text())
    }


def compose_config(env_file: Path, compose: Path = COMPOSE) -> tuple[int, str, str]:
    """``docker-compose config`` in an environment without the file's variables."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in compose_variables() and not name.startswith((ENV_PREFIX, "COMPOSE_"))
    }
    done = subprocess.run(
        [_docker_compose(), "--env-file", str(env_file), "-f", str(compose), "config"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def ports(service: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    """(host ip, published, target) of a resolved service (short or long syntax)."""
    found: list[tuple[str | None, str, str]] = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            found.append((port.get("host_ip"), str(port["published"]), str(port["target"])))
        else:
            parts = str(port).split("/")[0].split(":")
            host_ip = parts[0] if len(parts) == 3 else None
            found.append((host_ip, parts[-2], parts[-1]))
    return found


def volumes(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> named volume."""
    mounts: dict[str, str] = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            mounts[volume["target"]] = volume["source"]
        else:
            source, target = str(volume).split(":")[:2]
            mounts[target] = source
    return mounts


def api_policy(services: dict[str, Any]) -> WebPolicy:
    """What the API trusts with the environment the compose file gives it."""
    env = services["api"]["environment"]
    return WebPolicy.from_settings(
        MemorySettings(trusted_hosts=env["MEMORY_CHAIN_TRUSTED_HOSTS"], server_host="0.0.0.0")
    )
