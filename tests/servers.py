"""Real servers for tests: the embedded LLM behind Ollama's API, and memory_chain on uvicorn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from memory_chain.local_llm.model import MODEL_NAME
from tests.postgres import free_port

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class RunningServer:
    """A memory_chain server in its own process (``memory-chain serve``) on 127.0.0.1."""

    data_dir: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[str] | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> RunningServer:
        """Start and wait until ``/health`` answers."""
        self.log = self.data_dir.parent / f"server-{self.port}-{time.monotonic_ns()}.log"
        env = {**os.environ, **self.env, "MEMORY_CHAIN_SERVER_PORT": str(self.port)}
        cli = str(Path(sys.executable).parent / "memory-chain")
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [cli, "serve"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
            )
        log = self.log
        wait_until_healthy(self.process, f"{self.url}/health", timeout, log.read_text)
        return self

    def stop(self) -> None:
        """Graceful stop (SIGTERM), as a user would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        self.process = None

    def kill(self) -> None:
        """Crash (SIGKILL): no shutdown, nothing closed or flushed."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def restart(self) -> RunningServer:
        """Stop, then start again on the same data directory and port."""
        self.stop()
        return self.start()


def wait_until_healthy(
    process: subprocess.Popen[str], url: str, timeout: float, log: Callable[[], str]
) -> None:
    """Wait until ``url`` answers 200; raise with the end of the log if ``process`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited:\n{log()[-4000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer in {timeout:.0f} s:\n{log()[-4000:]}")


def server_env(data_dir: Path, llm_url: str, **extra: object) -> dict[str, str]:
    """Environment of a test server: embedded stores under ``data_dir``, the test LLM."""
    env = {
        "MEMORY_CHAIN_DATA_DIR": str(data_dir),
        "MEMORY_CHAIN_OLLAMA_BASE_URL": llm_url,
        "MEMORY_CHAIN_OLLAMA_CHAT_MODEL": MODEL_NAME,
        "MEMORY_CHAIN_OLLAMA_SUMMARY_MODEL": MODEL_NAME,
        "MEMORY_CHAIN_LLM_MAX_TOKENS": "24",
        "MEMORY_CHAIN_LLM_TEMPERATURE": "0",
        "MEMORY_CHAIN_LLM_FALLBACK": "off",
        "MEMORY_CHAIN_LOG_LEVEL": "INFO",
        # Fact extraction is one more real-model call per consolidated range (tens of
        # seconds on 2 cores) that lands after the summary a test waits for; servers here
        # test the routes. It runs with the real model in tests/test_e2e_real_llm.py and
        # tests/facts/test_extract.py; a test that wants it passes consolidation_learn_facts.
        "MEMORY_CHAIN_CONSOLIDATION_LEARN_FACTS": "false",
        "HF_HUB_OFFLINE": "1",
        # The shipped default (loopback names only), not the test clients' names that
        # tests/conftest.py trusts for apps run in process.
        "MEMORY_CHAIN_TRUSTED_HOSTS": "",
    }
    for key, value in extra.items():
        env[f"MEMORY_CHAIN_{key.upper()}"] = (
            json.dumps(value) if isinstance(value, dict | list) else str(value)
        )
    return env
