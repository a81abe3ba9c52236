"""The server starts on the embedded defaults: in process, and as a real uvicorn process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from memory_chain.api import create_app
from memory_chain.config import MemorySettings
from tests.postgres import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_health_in_process(tmp_path: Path) -> None:
    app = create_app(MemorySettings(data_dir=tmp_path / "data"))
    with TestClient(app) as client:
        body = client.get("/health").json()
    assert body["status"] == "ok"
    assert body["tier2"] == {"dialect": "sqlite", "schema_revision": "0001"}
    assert (tmp_path / "data" / "memory.db").is_file()


@pytest.mark.parametrize(
    "command", ["python server.py", "memory-chain serve", "uvicorn server:app"]
)
def test_real_server_starts_migrates_and_stops(tmp_path: Path, command: str) -> None:
    port = free_port()
    env = {
        **os.environ,
        "MEMORY_CHAIN_DATA_DIR": str(tmp_path / "data"),
        "MEMORY_CHAIN_SERVER_PORT": str(port),
        "HF_HUB_OFFLINE": "1",
    }
    bindir = Path(sys.executable).parent
    argv = {
        "python server.py": [sys.executable, "server.py"],
        "memory-chain serve": [str(bindir / "memory-chain"), "serve"],
        "uvicorn server:app": [
            str(bindir / "uvicorn"),
            "server:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
    }[command]
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        body = None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert body is not None, f"server did not answer; exit code {process.poll()}"
        assert body["status"] == "ok"
        assert body["tier2"]["schema_revision"] == "0001"
        assert (tmp_path / "data" / "memory.db").is_file()
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    # uvicorn re-raises SIGTERM after a graceful shutdown.
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output
