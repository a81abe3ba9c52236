"""The Python API takes the ids HTTP takes, and stores them as given.

The rule is one regular expression (:data:`memory_chain.schemas.ID_PATTERN`): the HTTP routes
check path ids and user headers against it, :func:`memory_chain.schemas.validate_id` checks
the Python API's. In process (``TestClient``) on SQLite without tier 3 and without an LLM.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from memory_chain.api import create_app
from memory_chain.config import MemorySettings
from memory_chain.errors import InvalidInputError
from memory_chain.manager import MemoryManager
from memory_chain.schemas import NewTurn
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from tests.postgres import free_port

IDS = [
    "trip",
    "a_b",
    "session_1",
    "webui:u-1",
    "x@y.z",
    "A" * 128,
    "_lead",
    "-lead",
    ".lead",
    "a b",
    "a/b",
    "a%b",
    "A" * 129,
    "caf\u00e9",
    "",
]


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = MemorySettings(
        data_dir=tmp_path_factory.mktemp("http") / "data",
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",  # no Ollama there
        memory_tier3_enabled=False,
    )
    with TestClient(create_app(settings)) as client:
        yield client


def _python_takes(manager: MemoryManager, conversation_id: str, user_id: str) -> bool:
    try:
        manager.add_turns(conversation_id, user_id, [NewTurn("user", "hello")])
    except InvalidInputError:
        return False
    return True


@pytest.mark.parametrize("value", IDS)
def test_ids_are_taken_by_python_exactly_as_by_http(
    http: TestClient, sqlite_store: SQLStore, value: str
) -> None:
    manager = MemoryManager(sqlite_store, TurnBuffer())
    body = {"turns": [{"role": "user", "content": "hello"}]}
    path = f"/v1/conversations/{urllib.parse.quote(value, safe='')}/turns"
    by_path = http.post(path, json=body, headers={"X-User-Id": "ana"})
    assert by_path.status_code in (201, 404, 405, 422), by_path.text
    http_takes_conversation = by_path.status_code == 201
    assert _python_takes(manager, value, "ana") == http_takes_conversation
    if value.isascii():  # HTTP headers are Latin-1: a client cannot send others
        by_header = http.post("/v1/conversations/c/turns", json=body, headers={"X-User-Id": value})
        assert by_header.status_code in (201, 422), by_header.text
        # An empty header names no user: the default user is served (201), not refused.
        http_takes_user = by_header.status_code == 201 and value != ""
        assert _python_takes(manager, "c", value) == http_takes_user
    if http_takes_conversation:
        stored = by_path.json()["conversation_id"]
        assert stored == value  # stored under the id given, not a mapped one
        assert manager.conversation(value, "ana") is not None
