"""A user's own data through the API: export it, list and forget facts, erase oneself.

A ``memory-chain serve`` process with API keys for ana and bob, the embedded stores and the
fake Ollama. Every route acts only on the key's user: ana's export holds her conversations
(the same lines as ``memory-chain export --user ana``), a fact id of bob's is not found for
ana, and bob erasing himself leaves ana's memory whole, in every tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.fake_llm import FakeOllama
from tests.faults.stores import read_stores
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

ANA = {"Authorization": "Bearer key-ana"}
BOB = {"Authorization": "Bearer key-bob"}
ANA_TRIP = [
    ("user", "We fly to Lisbon on 3 May."),
    ("assistant", "Noted."),
    ("user", "Please remember this: my seat is 14C."),
    ("assistant", "Noted: seat 14C."),
]
BOB_NOTES = [("user", "Please remember this: my locker is 12."), ("assistant", "Noted.")]


def _add(
    http: httpx.Client, conversation: str, turns: list[tuple[str, str]], key: dict[str, str]
) -> None:
    body = {"turns": [{"role": role, "content": text} for role, text in turns]}
    response = http.post(f"/v1/conversations/{conversation}/turns", json=body, headers=key)
    assert response.status_code == 201, response.text


def _facts(http: httpx.Client, key: dict[str, str]) -> list[dict[str, Any]]:
    response = http.get("/v1/facts", headers=key)
    assert response.status_code == 200, response.text
    facts: list[dict[str, Any]] = response.json()["facts"]
    return facts


def _settled(http: httpx.Client) -> bool:
    tier3 = http.get("/health").json()["tier3"]
    return bool(tier3["queued_turns"] == tier3["queued_tasks"] == 0)


def _wait(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    fake = FakeOllama().start()
    data_dir = tmp_path_factory.mktemp("user-data") / "data"
    env = server_env(data_dir, fake.url, api_keys={"key-ana": "ana", "key-bob": "bob"})
    running = RunningServer(data_dir, env).start()
    with httpx.Client(base_url=running.url, timeout=60) as http:
        _add(http, "trip", ANA_TRIP, ANA)
        _add(http, "work", [("user", "The report is due Friday.")], ANA)
        _add(http, "notes", BOB_NOTES, BOB)
        _add(http, "trip", [("user", "Bob's own trip, same id as ana's.")], BOB)
        _wait(lambda: _settled(http) and _facts(http, ANA) and _facts(http, BOB), "the backfill")
    yield running
    running.stop()
    fake.stop()


def test_every_new_route_needs_a_key(server: RunningServer) -> None:
    for method, path in [
        ("GET", "/v1/users/me/export"),
        ("DELETE", "/v1/users/me"),
        ("GET", "/v1/facts"),
        ("DELETE", "/v1/facts/trip:3"),
    ]:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = httpx.request(method, server.url + path, headers=headers, timeout=30)
            assert response.status_code == 401, (method, path, response.text)
            assert "API key" in response.json()["detail"]


def test_export_streams_the_callers_conversations_as_the_cli_exports_them(
    server: RunningServer,
) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        exported = http.get("/v1/users/me/export", headers=ANA)
    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert "attachment" in exported.headers["content-disposition"]
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert [(line["user_id"], line["conversation_id"]) for line in lines] == [
        ("ana", "trip"),
        ("ana", "work"),
    ]
    assert [(t["role"], t["content"]) for t in lines[0]["turns"]] == ANA_TRIP
    # The same bytes as the command line's export of her conversations.
    env = {**os.environ, **server.env}
    cli = str(Path(sys.executable).parent / "memory-chain")
    result = subprocess.run(
        [cli, "export", "-", "--user", "ana"], capture_output=True, env=env, timeout=120, check=True
    )
    assert result.stdout.decode("utf-8") == exported.text


def test_facts_are_the_callers_and_can_be_forgotten(server: RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        (fact,) = _facts(http, ANA)
        assert fact["id"] == "trip:3"
        assert fact["content"] == ANA_TRIP[2][1]
        (bobs,) = _facts(http, BOB)
        assert bobs["id"] == "notes:1"
        # Another user's fact, a turn that is not a fact, a turn that does not exist: 404.
        for fact_id in ("notes:1", "trip:1", "trip:99", "nowhere:1"):
            response = http.delete(f"/v1/facts/{fact_id}", headers=ANA)
            assert response.status_code == 404, (fact_id, response.text)
            assert "GET /v1/facts" in response.json()["detail"]
        assert http.delete("/v1/facts/trip:3", headers=ANA).status_code == 204
        assert _facts(http, ANA) == []
        assert http.delete("/v1/facts/trip:3", headers=ANA).status_code == 204  # idempotent
        assert [f["id"] for f in _facts(http, BOB)] == ["notes:1"]
        # The turn stays in its conversation; only its being a fact is gone.
        turns = http.get("/v1/conversations/trip/turns", headers=ANA).json()["turns"]
        assert [(t["role"], t["content"]) for t in turns] == ANA_TRIP


def test_erasing_oneself_removes_everything_of_the_caller_only(server: RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        before = http.get("/v1/users/me/export", headers=ANA).text
        assert http.delete("/v1/users/me", headers=BOB).status_code == 204
        assert http.get("/v1/conversations", headers=BOB).json() == []
        assert http.get("/v1/users/me/export", headers=BOB).text == ""
        assert _facts(http, BOB) == []
        assert http.delete("/v1/users/me", headers=BOB).status_code == 204  # idempotent
        assert http.get("/v1/users/me/export", headers=ANA).text == before
        _wait(lambda: _settled(http), "the queued deletion")
    server.stop()  # the index is read directly: one process per folder
    stores = read_stores(server.data_dir)
    owners = {p.user_id for p in [*stores.points.values(), *stores.facts.values()]}
    assert owners == {"ana"}
    assert set(stores.owners.values()) == {"ana"}
    server.start()
