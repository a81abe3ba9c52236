"""Imported chats keep their titles in the conversation endpoints (and so the memory browser).

The titles live in the user's ``("imports",)`` store items (no column of their own); the
list and the detail read them in one query. A SQLite data folder filled by ``memory-chain
import``, then the app in process.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner

from memory_chain.api import create_app
from memory_chain.cli import app
from memory_chain.config import MemorySettings
from memory_chain.services import open_services

DATA = Path(__file__).parent / "samples"
TRIP = "chatgpt-6627a1b0-1111-4c2d-9e8f-0a1b2c3d4e5f"
DOG = "chatgpt-65e1f2a0-2222-4c2d-9e8f-0a1b2c3d4e5f"


def test_the_conversations_endpoints_show_imported_titles(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = {
        "MEMORY_CHAIN_DATA_DIR": str(data_dir),
        "MEMORY_CHAIN_DATABASE_URL": None,
        "MEMORY_CHAIN_MEMORY_TIER3_ENABLED": "false",
        "MEMORY_CHAIN_LLM_FALLBACK": "off",
    }
    source = str(DATA / "chatgpt_conversations.json")
    imported = CliRunner().invoke(app, ["import", source, "--user", "ana"], env=env)
    assert imported.exit_code == 0, imported.output
    settings = MemorySettings(
        data_dir=data_dir, memory_tier3_enabled=False, llm_fallback="off", database_url=None
    )
    services = open_services(settings)
    try:
        services.manager.add_turns("live", "ana", [HumanMessage("Said through the API.")])
    finally:
        services.close()

    with TestClient(create_app(settings)) as client:
        listed = client.get("/v1/conversations", headers={"X-User-Id": "ana"}).json()
        detail = client.get(f"/v1/conversations/{TRIP}", headers={"X-User-Id": "ana"}).json()
        bobs = client.get("/v1/conversations", headers={"X-User-Id": "bob"}).json()
    titles = {c["conversation_id"]: c["title"] for c in listed}
    assert titles == {TRIP: "Trip to Lisbon", DOG: "My dog", "live": None}
    assert detail["title"] == "Trip to Lisbon"
    assert bobs == []
