"""A user's own data through the API: export it, manage facts, erase oneself.

A ``memory-chain serve`` process with API keys for ana and bob, the embedded stores and the
fake Ollama. Every route acts only on the key's user: ana's export holds her conversations
and facts (the same lines as ``memory-chain export --user ana``), her facts are listed,
added, edited and dismissed with their history, a fact id of bob's is not found for ana, and
bob erasing himself leaves ana's memory whole, in every tier.
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
        ("GET", "/v1/users/me/status"),
        ("DELETE", "/v1/users/me"),
        ("GET", "/v1/facts"),
        ("POST", "/v1/facts"),
        ("PATCH", f"/v1/facts/{'a' * 32}"),
        ("DELETE", f"/v1/facts/{'a' * 32}"),
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
    everything = [json.loads(line) for line in exported.text.splitlines()]
    lines = [line for line in everything if line["format"] == "memory-chain/conversation"]
    facts = [line for line in everything if line["format"] == "memory-chain/fact"]
    assert [(fact["user_id"], fact["text"]) for fact in facts] == [("ana", "my seat is 14C.")]
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


def test_status_counts_the_callers_turns_as_the_memory_browser_does(
    server: RunningServer,
) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        mine = http.get("/v1/users/me/status", headers=ANA)
        assert mine.status_code == 200, mine.text
        status = mine.json()
        details = [http.get(f"/v1/conversations/{c}", headers=ANA).json() for c in ("trip", "work")]
        bobs = http.get("/v1/users/me/status", headers=BOB).json()
    assert (status["user_id"], status["conversations"], status["turns"]) == ("ana", 2, 5)
    assert (status["turns_to_embed"], status["facts"]) == (0, 1)
    # The browser's "N of M consolidated": each conversation's highest summarized turn.
    through = sum(max([0] + [s["turn_range_end"] for s in d["summaries"]]) for d in details)
    assert status["turns_consolidated"] == through
    assert status["turns_consolidated"] + status["turns_to_consolidate"] == 5
    assert (bobs["user_id"], bobs["conversations"], bobs["turns"]) == ("bob", 2, 3)


def test_facts_are_the_callers_with_their_history(server: RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        (seat,) = _facts(http, ANA)  # "Please remember this: my seat is 14C."
        assert (seat["text"], seat["origin"], seat["status"]) == (
            "my seat is 14C.",
            "explicit",
            "current",
        )
        assert (seat["conversation_id"], seat["turns"]) == ("trip", [3, 3])
        (bobs,) = _facts(http, BOB)
        # Another user's fact, and one that does not exist: 404, for every verb.
        for fact_id in (bobs["id"], "0" * 32):
            for method, body in (("GET", None), ("PATCH", {"text": "x"}), ("DELETE", None)):
                response = http.request(method, f"/v1/facts/{fact_id}", json=body, headers=ANA)
                assert response.status_code == 404, (method, response.text)
                assert "GET /v1/facts" in response.json()["detail"]

        # Added by hand: 201; the same again adds nothing (200, "same").
        added = http.post(
            "/v1/facts", json={"text": "I live in Porto.", "subject": "home city"}, headers=ANA
        )
        assert added.status_code == 201, added.text
        porto = added.json()["fact"]
        assert (added.json()["action"], porto["origin"], porto["kind"]) == ("added", "api", "other")
        again = http.post("/v1/facts", json={"text": "i live in porto"}, headers=ANA)
        assert (again.status_code, again.json()["action"]) == (200, "same")
        assert again.json()["fact"]["id"] == porto["id"]
        # A newer value of the same subject supersedes it, and it leaves the current list.
        moved = http.post(
            "/v1/facts",
            json={"text": "I live in Berlin.", "subject": "Home city", "kind": "biography"},
            headers=ANA,
        )
        assert (moved.status_code, moved.json()["action"]) == (201, "superseded")
        berlin = moved.json()["fact"]
        assert moved.json()["replaced"]["id"] == porto["id"]
        assert {f["text"] for f in _facts(http, ANA)} == {"my seat is 14C.", "I live in Berlin."}

        # Edited: same id, new text; the old text stays as history.
        edited = http.patch(
            f"/v1/facts/{seat['id']}", json={"text": "My seat is 15A."}, headers=ANA
        )
        assert edited.status_code == 200, edited.text
        assert (edited.json()["id"], edited.json()["text"]) == (seat["id"], "My seat is 15A.")
        # Dismissed: 204, twice; gone from the current list, kept in the history.
        assert http.delete(f"/v1/facts/{berlin['id']}", headers=ANA).status_code == 204
        assert http.delete(f"/v1/facts/{berlin['id']}", headers=ANA).status_code == 204
        assert [f["text"] for f in _facts(http, ANA)] == ["My seat is 15A."]
        history = http.get(
            "/v1/facts", params={"include": ["superseded", "dismissed"]}, headers=ANA
        ).json()["facts"]
        past = {
            (f["text"], f["status"], f["superseded_by"])
            for f in history
            if f["status"] != "current"
        }
        assert past == {
            ("my seat is 14C.", "superseded", seat["id"]),
            ("I live in Porto.", "superseded", berlin["id"]),
            ("I live in Berlin.", "dismissed", None),
        }
        assert all(f["invalidated_at"] for f in history if f["status"] != "current")
        assert http.get(f"/v1/facts/{berlin['id']}", headers=ANA).json()["status"] == "dismissed"
        # Bob's facts are untouched; the turn that said ana's stays in its conversation.
        assert [f["id"] for f in _facts(http, BOB)] == [bobs["id"]]
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
