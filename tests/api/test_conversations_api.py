"""The conversations API (``/v1/conversations``) on a real uvicorn with the real model.

One server (no API keys) serves the module; each test acts as its own user (``X-User-Id``),
so listings only hold what that test created.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.servers import RunningServer, server_env

TIMEOUT = 120.0
MAX_BYTES = 1_000_000
MISSING = "no-such-conversation"
BAD_IDS = ["bad%20id", ".hidden", "-dash", "a" * 129, "caf%C3%A9", "semi;colon"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_llm_url: str) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("conversations") / "data"
    env = server_env(data_dir, local_llm_url, max_request_bytes=MAX_BYTES)
    running = RunningServer(data_dir, env).start()
    yield running
    running.stop()


class Client:
    """httpx against the server, as one user."""

    def __init__(self, server: RunningServer, user: str) -> None:
        self.server = server
        self.http = httpx.Client(base_url=server.url, headers={"X-User-Id": user}, timeout=TIMEOUT)

    def chat(self, conversation_id: str, text: str) -> str:
        body = {
            "input": {"input": text},
            "config": {"configurable": {"conversation_id": conversation_id}},
        }
        response = self.http.post("/memory/invoke", json=body)
        assert response.status_code == 200, response.text
        content: str = response.json()["output"]["content"]
        return content

    def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        assert response.is_success, f"{method} {path}: {response.status_code} {response.text}"
        return response.json()

    def wait_for_backfill(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ok("GET", "/health")["tier3"]["queued_turns"] == 0:
                return
            time.sleep(0.2)
        pytest.fail(f"tier 3 still has queued turns after {timeout} s")


@pytest.fixture
def client(server: RunningServer, request: pytest.FixtureRequest) -> Iterator[Client]:
    client = Client(server, re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:128])
    yield client
    client.http.close()


def _ids(conversations: list[dict[str, Any]]) -> list[str]:
    return [c["conversation_id"] for c in conversations]


def test_list_filters_by_status_and_pages(client: Client) -> None:
    for name in ("first", "second", "third"):
        client.chat(name, f"This is the {name} conversation. Reply with one word.")
    listed = client.ok("GET", "/v1/conversations")
    assert _ids(listed) == ["third", "second", "first"]  # most recently active first
    for conversation in listed:
        assert conversation["turn_count"] == 2
        assert conversation["status"] == "active"
        assert conversation["total_tokens"] > 0
        assert conversation["last_message_at"] is not None

    assert _ids(client.ok("GET", "/v1/conversations", params={"limit": 1})) == ["third"]
    page = client.ok("GET", "/v1/conversations", params={"limit": 2, "offset": 1})
    assert _ids(page) == ["second", "first"]
    assert client.ok("GET", "/v1/conversations", params={"offset": 3}) == []

    client.ok("DELETE", "/v1/conversations/second")
    archived = client.ok("GET", "/v1/conversations", params={"status": "archived"})
    assert _ids(archived) == ["second"]
    assert archived[0]["status"] == "archived"
    active = client.ok("GET", "/v1/conversations", params={"status": "active"})
    assert _ids(active) == ["third", "first"]
    assert _ids(client.ok("GET", "/v1/conversations")) == ["third", "second", "first"]


def test_get_shows_summaries_and_recent_turns(client: Client) -> None:
    replies = [client.chat("detail", text) for text in ("I am Bo.", "I like tea.")]
    detail = client.ok("GET", "/v1/conversations/detail")
    assert detail["conversation_id"] == "detail"
    assert detail["turn_count"] == 4
    assert detail["summary"] is None
    assert detail["summaries"] == []
    recent = detail["recent_turns"]
    assert [t["turn_number"] for t in recent] == [1, 2, 3, 4]
    assert [t["content"] for t in recent] == ["I am Bo.", replies[0], "I like tea.", replies[1]]
    assert [t["role"] for t in recent] == ["user", "assistant", "user", "assistant"]
    assert all(t["tokens"]["total"] > 0 for t in recent)


def test_turns_are_paginated(client: Client) -> None:
    for n in range(1, 4):
        client.chat("pages", f"Message number {n}. Reply with one word.")
    everything = client.ok("GET", "/v1/conversations/pages/turns")
    assert [t["turn_number"] for t in everything["turns"]] == [1, 2, 3, 4, 5, 6]
    assert everything["next_after"] is None

    seen: list[int] = []
    after = 0
    pages = 0
    while True:
        page = client.ok(
            "GET", "/v1/conversations/pages/turns", params={"after": after, "limit": 4}
        )
        seen += [t["turn_number"] for t in page["turns"]]
        pages += 1
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert seen == [1, 2, 3, 4, 5, 6]
    assert pages == 2
    page = client.ok("GET", "/v1/conversations/pages/turns", params={"after": 2, "limit": 2})
    assert [t["turn_number"] for t in page["turns"]] == [3, 4]
    assert page["next_after"] == 4
    page = client.ok("GET", "/v1/conversations/pages/turns", params={"after": 6})
    assert page == {"turns": [], "next_after": None}


def test_search_returns_tiers_best_first(client: Client) -> None:
    client.chat("facts", "My dog is called Biscuit and he is a beagle.")
    client.chat("facts", "I work as a lighthouse keeper on the coast.")
    client.chat("other", "My dog is called Waffle.")  # another conversation: not searched
    client.wait_for_backfill()
    body = client.ok("POST", "/v1/conversations/facts/search", json={"query": "dog Biscuit"})
    assert body["degraded"] == []
    results = body["results"]
    assert results
    assert "Biscuit" in results[0]["content"]
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert not any("Waffle" in r["content"] for r in results)
    assert {r["tier"] for r in results} <= {"tier2", "tier3"}
    sources = {source for r in results for source in r["sources"]}
    assert "tier3" in sources
    assert "tier2-turns" in sources
    for result in results:
        assert result["kind"] == "turn"
        assert result["role"] in ("user", "assistant")
        assert result["turn_number"] >= 1
    limited = client.ok("POST", "/v1/conversations/facts/search", json={"query": "dog", "k": 1})
    assert len(limited["results"]) == 1


def test_archive_keeps_the_conversation_readable(client: Client) -> None:
    client.chat("old", "Remember the password is TULIP.")
    assert client.ok("DELETE", "/v1/conversations/old") == {
        "conversation_id": "old",
        "action": "archived",
    }
    detail = client.ok("GET", "/v1/conversations/old")
    assert detail["status"] == "archived"
    assert detail["turn_count"] == 2
    assert len(client.ok("GET", "/v1/conversations/old/turns")["turns"]) == 2
    client.wait_for_backfill()
    found = client.ok("POST", "/v1/conversations/old/search", json={"query": "password TULIP"})
    assert any("TULIP" in r["content"] for r in found["results"])


def test_purge_removes_the_conversation_from_every_tier(client: Client) -> None:
    client.chat("doomed", "The launch code is MANGO-9921.")
    client.chat("kept", "The weather is nice today.")
    client.wait_for_backfill()
    retriever = {"input": "What is the launch code?"}
    before = client.ok("POST", "/memory/retriever/invoke", json=retriever)["output"]
    assert any("MANGO-9921" in doc["page_content"] for doc in before)

    assert client.ok("DELETE", "/v1/conversations/doomed", params={"purge": "true"}) == {
        "conversation_id": "doomed",
        "action": "purged",
    }
    for method, path, body in (
        ("GET", "/v1/conversations/doomed", None),
        ("GET", "/v1/conversations/doomed/turns", None),
        ("POST", "/v1/conversations/doomed/search", {"query": "launch code"}),
        ("DELETE", "/v1/conversations/doomed?purge=true", None),
    ):
        response = client.http.request(method, path, json=body)
        assert response.status_code == 404, (path, response.text)
    assert _ids(client.ok("GET", "/v1/conversations")) == ["kept"]
    after = client.ok("POST", "/memory/retriever/invoke", json=retriever)["output"]
    assert after  # the kept conversation is still searchable
    assert {doc["metadata"]["conversation_id"] for doc in after} == {"kept"}
    in_kept = client.ok("POST", "/v1/conversations/kept/search", json={"query": "launch code"})
    assert not any("MANGO" in r["content"] for r in in_kept["results"])

    # The id can be used again, and starts afresh.
    client.chat("doomed", "Hello again.")
    assert [
        t["turn_number"] for t in client.ok("GET", "/v1/conversations/doomed/turns")["turns"]
    ] == [1, 2]
    client.wait_for_backfill()
    again = client.ok(
        "POST", "/v1/conversations/doomed/search", json={"query": "launch code MANGO"}
    )
    assert not any("MANGO" in r["content"] for r in again["results"])


def test_consolidate_summarizes_with_the_real_model(client: Client) -> None:
    client.chat("trip", "I am planning a trip to Lisbon in May.")
    client.chat("trip", "In Lisbon I want to visit the Belem tower.")
    body = client.ok("POST", "/v1/conversations/trip/consolidate")
    summary = body["summary"]
    assert summary is not None
    assert (summary["turn_range_start"], summary["turn_range_end"]) == (1, 4)
    assert "Lisbon" in summary["summary_text"]
    assert summary["token_count"] > 0
    detail = client.ok("GET", "/v1/conversations/trip")
    assert detail["summary"]
    assert "Lisbon" in detail["summary"]
    assert [s["summary_text"] for s in detail["summaries"]] == [summary["summary_text"]]
    # Nothing new since: nothing to summarize.
    assert client.ok("POST", "/v1/conversations/trip/consolidate") == {"summary": None}


def test_end_schedules_a_consolidation(client: Client) -> None:
    client.chat("ending", "I am learning to play the cello.")
    response = client.http.post("/v1/conversations/ending/end")
    assert response.status_code == 202, response.text
    assert response.json() == {"conversation_id": "ending", "scheduled": True}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        detail = client.ok("GET", "/v1/conversations/ending")
        if detail["summaries"]:
            break
        time.sleep(0.5)
    assert detail["summaries"], "the end-of-conversation consolidation did not run"
    assert detail["summaries"][0]["turn_range_end"] == 2
    assert detail["summary"]


def test_turns_can_be_added_without_the_llm(client: Client) -> None:
    logged = [
        {
            "role": "user",
            "content": "Our wifi password is MARMALADE-42.",
            "timestamp": "2025-05-01T09:00:00+02:00",
        },
        {"role": "assistant", "content": "Noted the wifi password."},
        {"role": "system", "content": "Logged from the family tablet."},
    ]
    added = client.ok("POST", "/v1/conversations/logged/turns", json={"turns": logged})
    assert added["conversation_id"] == "logged"
    assert [(t["turn_number"], t["role"], t["content"]) for t in added["turns"]] == [
        (n, turn["role"], turn["content"]) for n, turn in enumerate(logged, 1)
    ]
    assert added["turns"][0]["timestamp"].startswith("2025-05-01T07:00:00")  # stored in UTC
    assert all(t["tokens"]["total"] > 0 for t in added["turns"])
    more = client.ok(
        "POST",
        "/v1/conversations/logged/turns",
        json={"turns": [{"role": "user", "content": "Thanks!"}]},
    )
    assert [t["turn_number"] for t in more["turns"]] == [4]
    page = client.ok("GET", "/v1/conversations/logged/turns")
    assert [t["content"] for t in page["turns"]] == [t["content"] for t in logged] + ["Thanks!"]
    # The turns are memory like a chat's: searchable in tiers 2 and 3, used by the chat.
    client.wait_for_backfill()
    found = client.ok("POST", "/v1/conversations/logged/search", json={"query": "wifi password"})
    sources = {
        s for hit in found["results"] if "MARMALADE" in hit["content"] for s in hit["sources"]
    }
    assert {"tier2-turns", "tier3"} <= sources, found
    assert (
        "MARMALADE"
        in client.chat("logged", "What is the wifi password? Answer with it only.").upper()
    )


# -- errors -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def errors(server: RunningServer) -> Iterator[Client]:
    """A user with one conversation, ``known``, for the error cases."""
    client = Client(server, "errors")
    client.chat("known", "Hello.")
    yield client
    client.http.close()


ENDPOINTS = [
    ("GET", "/v1/conversations/{id}", None),
    ("GET", "/v1/conversations/{id}/turns", None),
    ("POST", "/v1/conversations/{id}/search", {"query": "anything"}),
    ("DELETE", "/v1/conversations/{id}", None),
    ("DELETE", "/v1/conversations/{id}?purge=true", None),
    ("POST", "/v1/conversations/{id}/consolidate", None),
    ("POST", "/v1/conversations/{id}/end", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_an_unknown_conversation_is_404(
    errors: Client, method: str, path: str, body: dict[str, Any] | None
) -> None:
    response = errors.http.request(method, path.format(id=MISSING), json=body)
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/json"
    assert MISSING in response.json()["detail"]


@pytest.mark.parametrize("bad_id", BAD_IDS)
@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_a_malformed_id_is_422(
    errors: Client, method: str, path: str, body: dict[str, Any] | None, bad_id: str
) -> None:
    response = errors.http.request(method, path.format(id=bad_id), json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["path", "conversation_id"]


def test_an_oversize_body_is_413(errors: Client) -> None:
    body = b'{"query": "' + b"a" * (MAX_BYTES + 1) + b'"}'
    headers = {"content-type": "application/json"}
    declared = errors.http.post("/v1/conversations/known/search", content=body, headers=headers)
    assert declared.status_code == 413, declared.text
    assert "send less" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no content-length: the limit must count what arrives
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    streamed = errors.http.post("/v1/conversations/known/search", content=chunks(), headers=headers)
    assert streamed.status_code == 413, streamed.text
    assert "send less" in streamed.json()["detail"]

    for content in (body, chunks()):
        chat = errors.http.post("/memory/invoke", content=content, headers=headers)
        assert chat.status_code == 413, chat.text


@pytest.mark.parametrize(
    "content",
    [
        b'{"query":',
        b"not json",
        b'{"query": 5}',
        b'{"query": ""}',
        b'{"query": "x", "k": 0}',
        b'{"query": "x", "k": 51}',
        b'{"query": "' + b"x" * 2_001 + b'"}',
        b"[]",
        b"",
    ],
)
def test_a_malformed_search_body_is_422(errors: Client, content: bytes) -> None:
    response = errors.http.post(
        "/v1/conversations/known/search",
        content=content,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v1/conversations/{id}/turns", {"after": -1}),
        ("/v1/conversations/{id}/turns", {"after": 2**31}),
        ("/v1/conversations/{id}/turns", {"after": "10" * 20}),
        ("/v1/conversations/{id}/turns", {"limit": 0}),
        ("/v1/conversations/{id}/turns", {"limit": -5}),
        ("/v1/conversations/{id}/turns", {"limit": 501}),
        ("/v1/conversations/{id}/turns", {"limit": "ten"}),
        ("/v1/conversations", {"limit": 0}),
        ("/v1/conversations", {"limit": 201}),
        ("/v1/conversations", {"limit": 10**30}),
        ("/v1/conversations", {"offset": -1}),
        ("/v1/conversations", {"offset": 10**7}),
        ("/v1/conversations", {"status": "deleted"}),
        ("/v1/conversations", {"status": "bogus"}),
    ],
)
def test_bad_pagination_is_422(errors: Client, path: str, params: dict[str, Any]) -> None:
    response = errors.http.get(path.format(id="known"), params=params)
    assert response.status_code == 422, response.text
    assert response.json()["detail"]


@pytest.mark.parametrize("path", ["/v1/conversations", "/v1/conversations/known"])
def test_a_malformed_user_header_is_422(errors: Client, path: str) -> None:
    response = errors.http.get(path, headers={"X-User-Id": "../someone"})
    assert response.status_code == 422, response.text
    assert "user id" in response.json()["detail"]


def _turn(content: object = "hello", role: object = "user", **extra: object) -> dict[str, object]:
    return {"role": role, "content": content, **extra}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"turns": []}, "at least 1"),
        ({"turns": [_turn()] * 101}, "at most 100"),
        ({}, "Field required"),
        ({"turns": [_turn(role="tool")]}, "'user', 'assistant' or 'system'"),
        ({"turns": [_turn(content=5)]}, "valid string"),
        ({"turns": [_turn(), _turn(content="a\x00b")]}, "NUL"),
        ({"turns": [_turn(timestamp="yesterday")]}, "datetime"),
        ({"turns": [_turn(timestamp="0001-01-01T00:00:00+01:00")]}, "out of range"),
    ],
)
def test_bad_turns_are_422_and_store_nothing(
    errors: Client, body: dict[str, Any], says: str
) -> None:
    before = errors.ok("GET", "/v1/conversations/known/turns")
    response = errors.http.post("/v1/conversations/known/turns", json=body)
    assert response.status_code == 422, response.text
    assert says in str(response.json()["detail"]), response.text
    assert errors.ok("GET", "/v1/conversations/known/turns") == before
    new = errors.http.post("/v1/conversations/never-written/turns", json=body)
    assert new.status_code == 422, new.text
    assert errors.http.get("/v1/conversations/never-written").status_code == 404


def test_empty_messages_are_left_out_and_counted_the_rest_stored(errors: Client) -> None:
    # Before: one empty message made the whole batch a 422, and nothing was stored.
    body = {"turns": [_turn("first"), _turn(""), _turn("   ", role="assistant"), _turn("last")]}
    response = errors.http.post("/v1/conversations/with-empties/turns", json=body)
    assert response.status_code == 201, response.text
    assert [t["content"] for t in response.json()["turns"]] == ["first", "last"]
    assert response.json()["skipped_empty"] == 2
    stored = errors.ok("GET", "/v1/conversations/with-empties/turns")["turns"]
    assert [(t["turn_number"], t["content"]) for t in stored] == [(1, "first"), (2, "last")]

    empty = {"turns": [_turn("")]}
    only_empty = errors.http.post("/v1/conversations/only-empties/turns", json=empty)
    assert only_empty.status_code == 201, only_empty.text
    assert only_empty.json()["turns"] == []
    assert only_empty.json()["skipped_empty"] == 1
    assert errors.http.get("/v1/conversations/only-empties").status_code == 404


def test_turns_added_under_another_users_id_go_to_ones_own_conversation(
    server: RunningServer, errors: Client
) -> None:
    before = errors.ok("GET", "/v1/conversations/known/turns")
    with httpx.Client(base_url=server.url, headers={"X-User-Id": "intruder"}) as intruder:
        response = intruder.post("/v1/conversations/known/turns", json={"turns": [_turn()]})
        assert response.status_code == 201, response.text  # as for an id nobody uses
        assert [t["turn_number"] for t in response.json()["turns"]] == [1]
        own = intruder.get("/v1/conversations/known/turns").json()["turns"]
        assert [t["content"] for t in own] == [_turn()["content"]]
        assert intruder.delete("/v1/conversations/known?purge=true").status_code == 200
    assert errors.ok("GET", "/v1/conversations/known/turns") == before


@pytest.mark.parametrize("bad_id", BAD_IDS)
def test_adding_turns_to_a_malformed_id_is_422(errors: Client, bad_id: str) -> None:
    response = errors.http.post(f"/v1/conversations/{bad_id}/turns", json={"turns": [_turn()]})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["path", "conversation_id"]
