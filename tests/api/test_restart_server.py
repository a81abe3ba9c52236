"""A conversation outlives its server: chat, stop the server gracefully, start it again.

Twelve messages go through ``/memory/invoke`` with the real model (the summary threshold is
ten, and a final manual consolidation makes the summary cover every turn); the restarted
server, on the same data directory, shows the same turns and summary, rebuilds tier 1,
numbers new turns after the old ones, and still finds an early detail in tier 3.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import httpx

from tests.servers import RunningServer

TIMEOUT = 120.0
CONVERSATION = "bike-trip"
MESSAGES = [
    "I am planning a cycling trip along the Danube. Reply briefly.",
    "My bicycle is a green Peugeot from 1987.",
    "I will start in Passau on the 4th of June.",
    "I want to end the trip in Vienna.",
    "I can ride about 70 kilometres a day.",
    "I will sleep in small guesthouses along the river.",
]


def _config() -> dict[str, Any]:
    return {"configurable": {"conversation_id": CONVERSATION}}


def _chat(http: httpx.Client, text: str) -> str:
    response = http.post("/memory/invoke", json={"input": {"input": text}, "config": _config()})
    assert response.status_code == 200, response.text
    content: str = response.json()["output"]["content"]
    return content


def _get(http: httpx.Client, path: str, **params: Any) -> Any:
    response = http.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _wait_for_backfill(http: httpx.Client, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while _get(http, "/health")["tier3"]["queued_turns"]:
        assert time.monotonic() < deadline, "tier 3 backfill did not finish"
        time.sleep(0.2)


def _state(http: httpx.Client) -> dict[str, Any]:
    detail = _get(http, f"/v1/conversations/{CONVERSATION}")
    turns = _get(http, f"/v1/conversations/{CONVERSATION}/turns")
    assert turns["next_after"] is None
    return {"detail": detail, "turns": turns["turns"]}


def test_the_conversation_continues_after_a_restart(
    start_server: Callable[..., RunningServer],
) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
        for text in MESSAGES:
            _chat(http, text)
        # The threshold (10 messages) scheduled a background consolidation; the manual one
        # waits for it and summarizes whatever is left, so every turn is covered now.
        response = http.post(f"/v1/conversations/{CONVERSATION}/consolidate")
        assert response.status_code == 200, response.text
        _wait_for_backfill(http)
        before = _state(http)

    detail = before["detail"]
    assert detail["turn_count"] == 12
    assert [t["turn_number"] for t in before["turns"]] == list(range(1, 13))
    assert detail["summary"]
    assert detail["summaries"]
    assert detail["summaries"][0]["turn_range_start"] == 1
    assert detail["summaries"][-1]["turn_range_end"] == 12
    ranges = [(s["turn_range_start"], s["turn_range_end"]) for s in detail["summaries"]]
    assert all(end + 1 == start for (_, end), (start, _) in pairwise(ranges))
    # Consolidation pruned tier 1 to its last turns.
    recent = [t["turn_number"] for t in detail["recent_turns"]]
    assert recent == list(range(13 - len(recent), 13))
    assert len(recent) < 12

    server.stop()  # SIGTERM: uvicorn shuts the app down, which closes every store
    assert server.log is not None
    assert "Application shutdown complete" in server.log.read_text()
    server.start()

    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
        health = _get(http, "/health")
        assert health["tier1"]["conversations"] == 0  # nothing cached yet: a fresh process
        after = _state(http)
        assert after == before  # same turns, summaries, running summary; tier 1 rebuilt

        reply = _chat(http, "Which city do I start the trip in?")
        turns = _get(http, f"/v1/conversations/{CONVERSATION}/turns")["turns"]
        assert [t["turn_number"] for t in turns] == list(range(1, 15))
        assert turns[12]["content"] == "Which city do I start the trip in?"
        assert turns[13]["content"] == reply
        assert turns[:12] == before["turns"]

        retrieved = http.post(
            "/memory/retriever/invoke",
            json={"input": "What kind of bicycle do I have?", "config": _config()},
        )
        assert retrieved.status_code == 200, retrieved.text
        docs = retrieved.json()["output"]
        bike = [doc for doc in docs if "Peugeot" in doc["page_content"]]
        assert bike, [doc["page_content"] for doc in docs]
        assert 3 in {doc["metadata"]["turn_number"] for doc in bike}  # the user's own words
        # Tier 3 came back with the process: the bicycle turn is a semantic hit too.
        assert any("tier3" in doc["metadata"]["sources"] for doc in bike)

        found = http.post(
            f"/v1/conversations/{CONVERSATION}/search", json={"query": "Peugeot bicycle"}
        ).json()
        assert found["degraded"] == []
        assert "Peugeot" in found["results"][0]["content"]
