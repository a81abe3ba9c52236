"""The API's door (``memory_chain.api.deps``): one ownership rule for every conversation route.

In process, on SQLite without tier 3 and without an LLM: the routes about an existing
conversation all go through ``OwnedConversation``, so each answers 404 for an id the caller
has no conversation under (whoever else has one), and that check comes before the others.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memory_chain.api import create_app
from memory_chain.api.deps import owned_conversation
from memory_chain.config import MemorySettings
from memory_chain.errors import ConversationNotFoundError
from memory_chain.schemas import NewTurn
from memory_chain.services import open_services
from tests.postgres import free_port

ANA = {"X-User-Id": "ana"}
BOB = {"X-User-Id": "bob"}
#: Every route about an existing conversation, with a valid body where it takes one.
ROUTES = [
    ("GET", "", None),
    ("GET", "/turns", None),
    ("POST", "/search", {"query": "Lisbon"}),
    ("POST", "/consolidate", None),
    ("POST", "/end", None),
    ("DELETE", "", None),
    ("DELETE", "?purge=true", None),
]


def _settings(tmp_path: Path) -> MemorySettings:
    return MemorySettings(
        data_dir=tmp_path / "data",
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",  # no Ollama there
        memory_tier3_enabled=False,
    )


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(_settings(tmp_path))) as client:
        turns = {"turns": [{"role": "user", "content": "We fly to Lisbon on 3 May."}]}
        response = client.post("/v1/conversations/trip/turns", json=turns, headers=ANA)
        assert response.status_code == 201, response.text
        yield client


def test_owned_conversation_is_the_callers_own(tmp_path: Path) -> None:
    services = open_services(_settings(tmp_path))
    try:
        memory = services.manager
        memory.add_turns("trip", "ana", [NewTurn("user", "We fly to Lisbon.")])
        info = owned_conversation("trip", memory, "ana")
        assert (info.conversation_id, info.user_id, info.turn_count) == ("trip", "ana", 1)
        with pytest.raises(ConversationNotFoundError, match="'trip' not found"):
            owned_conversation("trip", memory, "bob")
    finally:
        services.close()


@pytest.mark.parametrize(("method", "suffix", "body"), ROUTES)
def test_every_conversation_route_is_404_for_an_id_the_caller_lacks(
    client: TestClient, method: str, suffix: str, body: dict[str, str] | None
) -> None:
    # Bob has no "trip" (ana has): 404, before the missing LLM (503) is even looked at.
    response = client.request(method, f"/v1/conversations/trip{suffix}", json=body, headers=BOB)
    assert response.status_code == 404, response.text
    assert "'trip' not found" in response.json()["detail"]
    stored = client.get("/v1/conversations/trip/turns", headers=ANA).json()["turns"]
    assert [turn["content"] for turn in stored] == ["We fly to Lisbon on 3 May."]


def test_end_without_an_llm_schedules_nothing(client: TestClient) -> None:
    client.app.state.services.consolidation = None  # type: ignore[attr-defined]
    response = client.post("/v1/conversations/trip/end", headers=ANA)
    assert response.status_code == 202, response.text
    assert response.json() == {"conversation_id": "trip", "scheduled": False}
