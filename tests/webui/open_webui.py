"""A real Open WebUI (PyPI's ``open-webui``) on 127.0.0.1 for the browser tests.

``scripts/setup-open-webui.sh`` (run by ``make test``) installs it in a virtualenv of its
own under ``~/.cache/memory_chain``; :func:`find_open_webui` finds it there.
:func:`open_webui_env` is the whole configuration, the one the README documents: memory_chain
as its only OpenAI connection, with a proxy key, the user and chat headers forwarded, nothing
fetched from the internet (no embedding model, no update check, no telemetry).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.needs import missing
from tests.postgres import free_port
from tests.servers import wait_until_healthy

ROOT = Path(__file__).resolve().parent.parent.parent
SETUP_SCRIPT = ROOT / "scripts" / "setup-open-webui.sh"


def pinned_version() -> str:
    """The Open WebUI version the setup script installs."""
    found = re.search(r"^OPEN_WEBUI_VERSION=(\S+)$", SETUP_SCRIPT.read_text(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{SETUP_SCRIPT} pins no OPEN_WEBUI_VERSION")
    return found[1]


def venv_path() -> Path:
    """Where the setup script puts the virtualenv (``OPEN_WEBUI_VENV`` overrides it)."""
    if os.environ.get("OPEN_WEBUI_VENV"):
        return Path(os.environ["OPEN_WEBUI_VENV"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "memory_chain" / f"open-webui-{pinned_version()}"


def find_open_webui() -> Path | None:
    """The ``open-webui`` command of a finished install, or ``None``."""
    venv = venv_path()
    command = venv / "bin" / "open-webui"
    if command.exists() and (venv / ".memory_chain-installed").exists():
        return command
    return None


def require_open_webui() -> Path:
    """The ``open-webui`` command; skips the test without one (fails it under CI)."""
    command = find_open_webui()
    if command is None:
        missing(
            f"Open WebUI is not installed in {venv_path()}: run `make test` or "
            "`bash scripts/setup-open-webui.sh` (about 3 GB, a few minutes)"
        )
    return command


def open_webui_env(
    data_dir: Path, port: int, api_url: str, api_key: str, *, forward_user_info: bool = True
) -> dict[str, str]:
    """Open WebUI's settings: memory_chain behind a proxy key, offline, accounts on.

    Args:
        data_dir: Open WebUI's own database and uploads.
        port: Where Open WebUI listens (for its CORS origin).
        api_url: memory_chain's OpenAI-compatible base URL (``http://host:port/v1``).
        api_key: A key of memory_chain's ``proxy_api_keys``.
        forward_user_info: ``ENABLE_FORWARD_USER_INFO_HEADERS``; ``False`` is Open WebUI's
            own default, which memory_chain refuses with a proxy key (no user header).
    """
    return {
        # memory_chain is the only model connection; Ollama's is off, so every chat goes
        # through memory.
        "OPENAI_API_BASE_URL": api_url,
        "OPENAI_API_KEY": api_key,
        "ENABLE_OLLAMA_API": "False",
        # X-OpenWebUI-User-Id and X-OpenWebUI-Chat-Id: memory_chain's user and conversation.
        "ENABLE_FORWARD_USER_INFO_HEADERS": str(forward_user_info),
        # Accounts on; new accounts may chat at once (admins add them here), and every
        # account may use memory_chain's model (otherwise an admin grants it per model).
        "WEBUI_AUTH": "True",
        "DEFAULT_USER_ROLE": "user",
        "BYPASS_MODEL_ACCESS_CONTROL": "True",
        "WEBUI_SECRET_KEY": "memory-chain-tests-only",
        "DATA_DIR": str(data_dir),
        "CORS_ALLOW_ORIGIN": f"http://127.0.0.1:{port}",
        # Nothing from the internet: no model hub, no update check, no analytics.
        "OFFLINE_MODE": "true",
        "HF_HUB_OFFLINE": "1",
        "RAG_EMBEDDING_MODEL": "",
        "BYPASS_EMBEDDING_AND_RETRIEVAL": "true",
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
        "ANONYMIZED_TELEMETRY": "false",
        "ENABLE_OTEL": "false",
    }


@dataclass
class Account:
    """An Open WebUI account."""

    name: str
    email: str
    password: str
    id: str = ""


@dataclass
class OpenWebUI:
    """An Open WebUI process on 127.0.0.1 (``open-webui serve``)."""

    command: Path
    data_dir: Path
    api_url: str
    api_key: str
    forward_user_info: bool = True
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[str] | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 300.0) -> OpenWebUI:
        """Start and wait until ``/health`` answers (about 30 s on 2 cores)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log = self.data_dir.parent / "open-webui.log"
        env = {
            **os.environ,
            **open_webui_env(
                self.data_dir,
                self.port,
                self.api_url,
                self.api_key,
                forward_user_info=self.forward_user_info,
            ),
        }
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [str(self.command), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=self.data_dir,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        wait_until_healthy(self.process, f"{self.url}/health", timeout, self.tail)
        return self

    def tail(self, chars: int = 4000) -> str:
        """The end of its log."""
        return self.log.read_text()[-chars:] if self.log and self.log.exists() else ""

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None

    def create_accounts(self, admin: Account, *others: Account) -> None:
        """Sign ``admin`` up (the first account is the admin), then add the others as users."""
        response = httpx.post(
            f"{self.url}/api/v1/auths/signup",
            json={"name": admin.name, "email": admin.email, "password": admin.password},
            timeout=60,
        )
        response.raise_for_status()
        admin.id = response.json()["id"]
        token = response.json()["token"]
        for account in others:
            added = httpx.post(
                f"{self.url}/api/v1/auths/add",
                headers={"Authorization": f"Bearer {token}"},
                json={
                    "name": account.name,
                    "email": account.email,
                    "password": account.password,
                    "role": "user",
                },
                timeout=60,
            )
            added.raise_for_status()
            account.id = added.json()["id"]
