"""One way to start a server: ``memory-chain serve`` (uvicorn on 127.0.0.1) in its own process.

- :func:`scratch_server`: the usual one. A fresh scratch data folder (removed afterwards), the
  stub LLM of ``loadgen.py`` as its chat model unless another Ollama URL is given, and a
  ``memory-chain serve`` on it until the block ends.
- :func:`memory_chain_server`: the server alone on a data folder you give (several replicas
  on one database, a model you started).
- :func:`queued_turns` and :func:`wait_for_backfill`: the tier-3 backlog from ``/health``.

The server is configured by ``MEMORY_CHAIN_*`` variables (:func:`server_env`), writes its
output to a log file beside the data folder (:meth:`Server.log_problems` reads its errors),
is ready when ``/health`` answers, and stops on SIGTERM as under a container runtime. The
tests have their own fixtures (``tests/servers.py``, with crash and outage controls the
benchmarks do not need); the benchmarks import nothing from ``tests/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from loadgen import StubOllama, free_port

from memory_chain.local_llm.model import MODEL_NAME

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Server:
    """A running ``memory-chain serve``: its URL, process id, log file and data folder."""

    url: str
    pid: int
    log: Path
    data_dir: Path

    def log_problems(self) -> list[str]:
        """ERROR lines and tracebacks in the server's log."""
        if not self.log.exists():
            return []
        return [
            line.strip()
            for line in self.log.read_text(errors="replace").splitlines()
            if " ERROR " in line or line.startswith("Traceback")
        ]

    def data_mb(self) -> float:
        """The size of the files under the data folder, in MB."""
        files = (path for path in self.data_dir.rglob("*") if path.is_file())
        return sum(path.stat().st_size for path in files) / (1024 * 1024)

    def health(self) -> dict[str, Any]:
        """``GET /health``."""
        response = httpx.get(f"{self.url}/health", timeout=30)
        response.raise_for_status()
        found: dict[str, Any] = response.json()
        return found


#: What every benchmark server is given besides its data folder and model URL: the tests'
#: model settings (the stub LLM answers whatever is asked), no fallback to an in-process LLM.
SERVER_SETTINGS: dict[str, object] = {
    "ollama_chat_model": MODEL_NAME,
    "ollama_summary_model": MODEL_NAME,
    "llm_max_tokens": 24,
    "llm_temperature": 0,
    "llm_fallback": "off",
    "log_level": "INFO",
}


def server_env(data_dir: Path, llm_url: str, **settings: object) -> dict[str, str]:
    """A server's environment: embedded stores under ``data_dir``, the chat model at ``llm_url``.

    Args:
        data_dir: The data folder.
        llm_url: An Ollama API (the stub LLM of ``loadgen.py``).
        **settings: ``MemorySettings`` fields over :data:`SERVER_SETTINGS`
            (``database_url="..."``, ``log_level=...``).
    """
    every = {"data_dir": data_dir, "ollama_base_url": llm_url, **SERVER_SETTINGS, **settings}
    env = {"HF_HUB_OFFLINE": "1"}
    for key, value in every.items():
        encoded = json.dumps(value) if isinstance(value, dict | list) else str(value)
        env[f"MEMORY_CHAIN_{key.upper()}"] = encoded
    return env


@contextlib.contextmanager
def memory_chain_server(
    data_dir: Path, llm_url: str, timeout: float = 120.0, **settings: object
) -> Iterator[Server]:
    """``memory-chain serve`` on ``data_dir`` until the block ends (then SIGTERM).

    Args:
        data_dir: The data folder (its parent holds the log).
        llm_url: The chat model's Ollama API.
        timeout: Longest wait for ``/health`` to answer.
        **settings: More ``MemorySettings`` fields, as in :func:`server_env`.

    Raises:
        RuntimeError: If the server exits before it answers (with the end of its log).
        TimeoutError: If it does not answer within ``timeout``.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"server-{port}-{time.monotonic_ns()}.log"
    env = {**os.environ, **server_env(data_dir, llm_url, **settings)}
    env["MEMORY_CHAIN_SERVER_PORT"] = str(port)
    cli = str(Path(sys.executable).parent / "memory-chain")
    with log.open("w") as out:
        process = subprocess.Popen(
            [cli, "serve"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + timeout
        while not _answers(f"{url}/health"):
            if process.poll() is not None:
                raise RuntimeError(f"memory-chain serve exited:\n{log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer in {timeout:.0f} s")
            time.sleep(0.2)
        yield Server(url, process.pid, log, data_dir)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


@contextlib.contextmanager
def scratch_server(
    prefix: str = "memory-chain-bench-", *, llm_url: str | None = None, **settings: object
) -> Iterator[Server]:
    """A server on a fresh scratch data folder, removed when the block ends.

    Args:
        prefix: The scratch folder's name prefix (under the system's temporary folder).
        llm_url: An Ollama API for the chat model; None starts the stub LLM of
            ``loadgen.py`` (a fixed reply at once, in its own process) for the block.
        **settings: More ``MemorySettings`` fields, as in :func:`server_env`
            (``database_url=...``, ``log_level="WARNING"``...).

    Yields:
        The running server (``server.data_dir`` is ``<scratch>/data``).
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with contextlib.ExitStack() as stack:
            if llm_url is None:
                llm_url = stack.enter_context(StubOllama()).url
            yield stack.enter_context(memory_chain_server(folder / "data", llm_url, **settings))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def queued_turns(url: str) -> int:
    """Turns waiting for tier 3 on the server at ``url`` (``/health``)."""
    return int(httpx.get(f"{url}/health", timeout=30).json()["tier3"]["queued_turns"])


def wait_for_backfill(url: str, timeout: float, poll: float = 0.5) -> dict[str, Any]:
    """Poll ``/health`` until tier 3 has no queued turns (or ``timeout`` seconds pass).

    Returns:
        ``queued_at_end_of_load`` (the backlog at the first poll), ``drain_seconds`` and
        ``queued_after_wait`` (0 unless the wait timed out).
    """
    started = time.perf_counter()
    first: int | None = None
    queued = -1
    while time.perf_counter() - started < timeout:
        queued = queued_turns(url)
        if first is None:
            first = queued
        if queued == 0:
            break
        time.sleep(poll)
    return {
        "queued_at_end_of_load": first,
        "drain_seconds": time.perf_counter() - started,
        "queued_after_wait": queued,
    }


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False
