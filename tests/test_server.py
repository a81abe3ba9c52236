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
from memory_chain.tiers.sql.migrate import head_revision
from tests.postgres import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_health_in_process(tmp_path: Path) -> None:
    settings = MemorySettings(
        data_dir=tmp_path / "data",
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",  # no Ollama there
    )
    app = create_app(settings)
    with TestClient(app) as client:
        body = client.get("/health").json()
    assert body["status"] == "ok"
    assert body["tier2"] == {"dialect": "sqlite", "schema_revision": head_revision()}
    assert body["tier3"]["enabled"] is True
    assert body["tier3"]["backend"].startswith("embedded")
    assert body["tier3"]["available"] is True
    assert body["tier3"]["queued_turns"] == 0
    assert body["llm"]["provider"] == "unavailable"
    assert "start Ollama" in body["llm"]["detail"]
    assert (tmp_path / "data" / "memory.db").is_file()
    assert (tmp_path / "data" / "vectors").is_dir()


def test_consolidate_without_an_llm_is_503_saying_what_to_start(tmp_path: Path) -> None:
    settings = MemorySettings(
        data_dir=tmp_path / "data",
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",  # no Ollama there
        memory_tier3_enabled=False,
    )
    with TestClient(create_app(settings)) as client:
        turns = {"turns": [{"role": "user", "content": "We fly to Lisbon on 3 May."}]}
        assert client.post("/v1/conversations/trip/turns", json=turns).status_code == 201
        response = client.post("/v1/conversations/trip/consolidate")
        assert response.status_code == 503, response.text
        assert "start Ollama" in response.json()["detail"]
        # A server built without any LLM at all (the library's llm=False) says so too.
        client.app.state.services.consolidation = None  # type: ignore[attr-defined]
        response = client.post("/v1/conversations/trip/consolidate")
        assert response.status_code == 503, response.text
        assert "MEMORY_CHAIN_OLLAMA_BASE_URL" in response.json()["detail"]
        stored = client.get("/v1/conversations/trip/turns").json()["turns"]
        assert [turn["content"] for turn in stored] == ["We fly to Lisbon on 3 May."]


def test_health_reports_an_unreachable_qdrant(tmp_path: Path) -> None:
    settings = MemorySettings(
        data_dir=tmp_path / "data",
        qdrant_url=f"http://127.0.0.1:{free_port()}",
        llm_fallback="off",
    )
    with TestClient(create_app(settings)) as client:
        body = client.get("/health").json()
    assert body["status"] == "ok"  # tiers 1-2 keep working
    assert body["tier3"]["available"] is False
    assert "unreachable" in body["tier3"]["last_error"]


@pytest.mark.parametrize(
    "command", ["python server.py", "memory-chain serve", "uvicorn server:app"]
)
def test_real_server_starts_migrates_and_stops(tmp_path: Path, command: str) -> None:
    port = free_port()
    env = {
        **os.environ,
        "MEMORY_CHAIN_DATA_DIR": str(tmp_path / "data"),
        "MEMORY_CHAIN_SERVER_PORT": str(port),
        "MEMORY_CHAIN_LLM_FALLBACK": "off",
        "MEMORY_CHAIN_OLLAMA_BASE_URL": f"http://127.0.0.1:{free_port()}",
        "HF_HUB_OFFLINE": "1",
        # Tier 3 (and its model) once is enough; the other commands only need to start.
        "MEMORY_CHAIN_MEMORY_TIER3_ENABLED": str(command == "memory-chain serve").lower(),
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
        assert body["tier2"]["schema_revision"] == head_revision()
        assert (tmp_path / "data" / "memory.db").is_file()
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    # uvicorn re-raises SIGTERM after a graceful shutdown.
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output
