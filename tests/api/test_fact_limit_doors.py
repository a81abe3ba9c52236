"""The per-user limit of current facts holds at every door, and each says what to do.

A server with ``memory_max_facts_per_user=3``: at the limit, ``POST /v1/facts`` answers 409,
MCP's ``remember`` a tool error, the LangGraph store's ``put`` raises, a chat's "remember
..." stores the turn and skips the fact, ``memory-chain import`` refuses the file before
writing anything; each message names the setting and how to make room. What adds no
current fact (the same fact, a newer value of a subject, an edit) passes; a dismissal makes
room. Learning at consolidation is in ``tests/facts/test_extract.py``, the store's own
checks (concurrent adds, history) in ``tests/facts/test_fact_bounds.py``.

The app runs in process on the real stores, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.server.fastmcp.exceptions import ToolError

from memory_chain.api import create_app
from memory_chain.config import MemorySettings
from memory_chain.errors import FactLimitError
from memory_chain.integrations.mcp import build_mcp_server
from memory_chain.integrations.store import MemoryStore
from memory_chain.services import Services
from memory_chain.transfer import ImportFileError, import_jsonl
from tests.conftest import _fresh_postgres_database

LIMIT = 3
SAYS = "MEMORY_CHAIN_MEMORY_MAX_FACTS_PER_USER"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    database = None
    if request.param == "postgresql":
        database = _fresh_postgres_database(request.getfixturevalue("postgres_url"))
    settings = MemorySettings(
        data_dir=tmp_path_factory.mktemp(f"limit-{request.param}") / "data",
        database_url=database,
        memory_tier3_enabled=False,
        llm_fallback="off",
        ollama_base_url="http://127.0.0.1:9",
        consolidation_learn_facts=False,
        memory_max_facts_per_user=LIMIT,
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as opened:
        yield opened


@pytest.fixture
def user(request: pytest.FixtureRequest) -> str:
    """A user of this test alone."""
    return "u-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]


def _services(client: TestClient) -> Services:
    services: Services = client.app.state.services  # type: ignore[attr-defined]
    return services


def _headers(user: str) -> dict[str, str]:
    return {"X-User-Id": user}


def _add(client: TestClient, user: str, text: str, **fields: Any) -> Any:
    return client.post("/v1/facts", json={"text": text, **fields}, headers=_headers(user))


def _texts(client: TestClient, user: str) -> list[str]:
    listed = client.get("/v1/facts", headers=_headers(user))
    assert listed.status_code == 200, listed.text
    return sorted(fact["text"] for fact in listed.json()["facts"])


def _full(client: TestClient, user: str) -> list[str]:
    """Give ``user`` three facts (one of them about "home"); their texts."""
    for text, subject in (("I live in Porto.", "home"), ("I swim.", None), ("I run.", None)):
        assert _add(client, user, text, subject=subject).status_code == 201
    return _texts(client, user)


def test_rest_answers_409_at_the_limit_and_takes_what_adds_nothing(
    client: TestClient, user: str
) -> None:
    full = _full(client, user)
    refused = _add(client, user, "I play the cello.")
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert f"has {LIMIT} current facts" in detail
    assert SAYS in detail
    assert "DELETE /v1/facts/{id}" in detail
    assert _texts(client, user) == full
    assert _add(client, user, "i swim").status_code == 200  # the same fact: nothing added
    moved = _add(client, user, "I live in Lisbon.", subject="home")  # a newer value
    assert (moved.status_code, moved.json()["action"]) == (201, "superseded")
    fact_id = moved.json()["fact"]["id"]
    patched = client.patch(
        f"/v1/facts/{fact_id}", json={"text": "I live in Braga."}, headers=_headers(user)
    )
    assert patched.status_code == 200, patched.text
    assert client.delete(f"/v1/facts/{fact_id}", headers=_headers(user)).status_code == 204
    assert _add(client, user, "I play the cello.").status_code == 201


async def test_mcp_remember_is_a_tool_error_at_the_limit(client: TestClient, user: str) -> None:
    full = _full(client, user)
    server = build_mcp_server(_services(client), user=user)
    with pytest.raises(ToolError) as raised:
        await server.call_tool("remember", {"text": "I play the cello."})
    assert SAYS in str(raised.value)
    assert _texts(client, user) == full


def test_the_store_put_raises_at_the_limit_and_edits_a_key(client: TestClient, user: str) -> None:
    store = MemoryStore(_services(client))
    store.put((user, "facts"), "diet", {"text": "I am vegan."})
    _add(client, user, "I swim.")
    _add(client, user, "I run.")
    with pytest.raises(FactLimitError, match=SAYS):
        store.put((user, "facts"), "car", {"text": "I drive a Volvo."})
    assert store.get((user, "facts"), "car") is None
    store.put((user, "facts"), "diet", {"text": "I am vegetarian."})  # an edit: no new fact
    item = store.get((user, "facts"), "diet")
    assert item is not None
    assert item.value["text"] == "I am vegetarian."


def test_a_chat_remember_stores_the_turn_and_skips_the_fact(
    client: TestClient, user: str, caplog: pytest.LogCaptureFixture
) -> None:
    full = _full(client, user)
    body = {"turns": [{"role": "user", "content": "Remember: my locker code is 4471."}]}
    with caplog.at_level("WARNING"):
        stored = client.post("/v1/conversations/gym/turns", json=body, headers=_headers(user))
    assert stored.status_code == 201, stored.text
    assert _texts(client, user) == full
    assert SAYS in caplog.text
    turns = client.get("/v1/conversations/gym/turns", headers=_headers(user))
    assert [t["content"] for t in turns.json()["turns"]] == ["Remember: my locker code is 4471."]


def _fact_line(user: str, number: int, status: str = "current") -> str:
    return json.dumps(
        {
            "version": 3,
            "format": "memory-chain/fact",
            "id": hashlib.md5(f"{user}{number}".encode()).hexdigest(),
            "user_id": user,
            "text": f"Imported fact {number}.",
            "status": status,
        }
        | ({"invalidated_at": "2026-01-01T00:00:00Z"} if status != "current" else {})
    )


def test_an_import_past_the_limit_fails_before_writing(
    client: TestClient, user: str, tmp_path: Path
) -> None:
    _add(client, user, "I swim.")
    lines = [_fact_line(user, n, "dismissed") for n in range(5)]  # history: not counted
    lines += [_fact_line(user, n) for n in range(5, 8)]  # 1 + 3 current: one too many
    path = tmp_path / "facts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = _services(client).store
    with pytest.raises(ImportFileError) as raised:
        import_jsonl(store, path, max_chars=100_000, max_facts_per_user=LIMIT)
    assert raised.value.line == 8  # the first current fact past the limit
    assert SAYS in str(raised.value)
    assert "nothing was imported" in str(raised.value)
    assert _texts(client, user) == ["I swim."]
    path.write_text("\n".join(lines[:7]) + "\n", encoding="utf-8")
    report = import_jsonl(store, path, max_chars=100_000, max_facts_per_user=LIMIT)
    assert report.facts == 7
    assert len(_texts(client, user)) == LIMIT
