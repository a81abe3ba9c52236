"""Tier 3 down: chat goes on with tiers 1-2, turns wait in the outbox, and none is lost.

Two outages, both against real servers with the real embedding model:

* the embedded index's folder held by another process (qdrant-edge allows one process per
  folder) for the start of the run, then released: the running server's backfill opens the
  index and embeds every queued turn, with no restart;
* a Qdrant server URL nobody listens on for the whole run; recovery is a restart on the
  embedded default with the same SQL database, whose backfill drains the outbox.

Each ends with the server stopped and its files read directly: exactly one point per stored
turn, with its content, and the "remember this" said during the outage filed as a user fact.

A conversation purged while the index is held elsewhere leaves nothing behind: its rows and
facts go at once, the deletion of its points waits in tier 2 until the index is back, and no
read path (chat context, search endpoint, LangServe retriever, facts) shows any of it meanwhile
or after.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from memory_chain.tiers.vectors.edge import EdgeIndex
from memory_chain.tiers.vectors.index import VectorFilter
from tests.faults.chat import chat, health, turn_numbers, wait_for
from tests.faults.fake_llm import FakeOllama
from tests.faults.stores import COLLECTION, check_points, check_sql, read_stores
from tests.postgres import free_port
from tests.servers import RunningServer

pytestmark = pytest.mark.slow

DETAILS = [
    "Please remember this: my passport number is X1234567.",
    "We fly to Lisbon on the 3rd of May.",
    "My bicycle is a green Peugeot from 1987.",
    "The invoice for the garden work was 420 euros.",
]
#: What the first detail asks to be remembered.
SAVED = "my passport number is X1234567."


def _search(http: httpx.Client, conversation_id: str, query: str) -> dict[str, object]:
    response = http.post(f"/v1/conversations/{conversation_id}/search", json={"query": query})
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def _chat_through_outage(http: httpx.Client, conversation_id: str) -> list[dict[str, str]]:
    history: list[dict[str, str]] = []
    for text in DETAILS:
        response = chat(http, conversation_id, history, text)
        assert response.status_code == 200, response.text
    assert turn_numbers(http, conversation_id) == list(range(1, 2 * len(DETAILS) + 1))
    assert health(http)["tier3"]["queued_turns"] == 2 * len(DETAILS)
    found = _search(http, conversation_id, "Peugeot bicycle")
    degraded = found["degraded"]
    assert isinstance(degraded, list)
    assert any("tier3" in reason for reason in degraded), degraded
    return history


def _check_embedded(data_dir: Path, turns: int) -> None:
    stores = read_stores(data_dir)
    check_sql(stores)
    check_points(stores, settled=True)
    assert stores.turn_total == turns
    assert len(stores.points) == turns
    # The explicit save said while tier 3 was down is a user fact (facts live in tier 2).
    assert [(f.text, f.status) for f in stores.facts.values()] == [(SAVED, "current")]


def test_index_folder_held_elsewhere_then_released_loses_nothing(
    tmp_path: Path, make_server: Callable[..., RunningServer]
) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "vectors").mkdir(parents=True)
    holder = EdgeIndex(data_dir / "vectors", collection=COLLECTION, dimension=384)
    holder.open()  # this process holds the folder: the server cannot open it
    try:
        server = make_server(data_dir).start()
        with httpx.Client(base_url=server.url, timeout=60) as http:
            tier3 = health(http)["tier3"]
            assert tier3["available"] is False
            assert "held by another process" in tier3["last_error"]
            history = _chat_through_outage(http, "held")
    finally:
        holder.close()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        # The next turn wakes the backfill, which opens the released folder and drains.
        response = chat(http, "held", history, "I prefer window seats.")
        assert response.status_code == 200, response.text
        wait_for(lambda: health(http)["tier3"]["queued_turns"] == 0, 60, "the outbox to drain")
        tier3 = health(http)["tier3"]
        assert tier3["available"] is True, tier3
        found = _search(http, "held", "What kind of bicycle do I have?")
        assert found["degraded"] == []  # the index is back
        results = found["results"]
        assert isinstance(results, list)
        assert any("Peugeot" in hit["content"] and "tier3" in hit["sources"] for hit in results)
    server.stop()
    _check_embedded(data_dir, 2 * len(DETAILS) + 2)


def test_unreachable_qdrant_server_queues_turns_for_the_next_index(
    tmp_path: Path, make_server: Callable[..., RunningServer]
) -> None:
    data_dir = tmp_path / "data"
    nowhere = f"http://127.0.0.1:{free_port()}"
    down = make_server(data_dir, qdrant_url=nowhere).start()
    with httpx.Client(base_url=down.url, timeout=60) as http:
        tier3 = health(http)["tier3"]
        assert tier3["backend"] == f"qdrant server ({nowhere})"
        assert tier3["available"] is False
        assert "unreachable" in tier3["last_error"]
        _chat_through_outage(http, "nowhere")
    down.stop()
    # Recovery: the same SQL database, tier 3 on the embedded default.
    up = make_server(data_dir).start()
    with httpx.Client(base_url=up.url, timeout=60) as http:
        wait_for(lambda: health(http)["tier3"]["queued_turns"] == 0, 60, "the outbox to drain")
        assert health(http)["tier3"]["available"] is True
        assert turn_numbers(http, "nowhere") == list(range(1, 2 * len(DETAILS) + 1))
        found = _search(http, "nowhere", "Which city do we fly to?")
        assert found["degraded"] == []
        results = found["results"]
        assert isinstance(results, list)
        assert any("Lisbon" in hit["content"] and "tier3" in hit["sources"] for hit in results)
    up.stop()
    _check_embedded(data_dir, 2 * len(DETAILS))


SECRET = ["Please remember this: my locker code is 4471.", "The office safe opens with 9931."]
KEPT = ["Please remember this: we fly to Lisbon on 3 May.", "Our airport locker is number 12."]
PROBES = ["What is my locker code?", "How does the office safe open?", "When do we fly?"]


def _read_everything(http: httpx.Client, fake: FakeOllama) -> str:
    """What the chat context, the search endpoint, the LangServe retriever and the facts give."""
    seen: list[str] = []
    fake.recall = True  # the fake model's replies quote the memories in its prompt
    for query in PROBES:
        response = chat(http, "probe", [], query)  # the fake model quotes its memories
        assert response.status_code == 200, response.text
        seen.append(response.json()["choices"][0]["message"]["content"])
        seen.extend(hit["content"] for hit in _search(http, "kept", query)["results"])  # type: ignore[union-attr]
        retrieved = http.post("/memory/retriever/invoke", json={"input": query})
        assert retrieved.status_code == 200, retrieved.text
        seen.extend(
            f"{d['metadata']['conversation_id']} {d['page_content']}"
            for d in retrieved.json()["output"]
        )
    facts = http.get("/v1/facts", params={"include": ["superseded", "dismissed"]})
    assert facts.status_code == 200, facts.text  # facts live in tier 2: listed while it is down
    seen.extend(f"{f['conversation_id']} {f['text']}" for f in facts.json()["facts"])
    assert http.delete("/v1/conversations/probe", params={"purge": "true"}).status_code == 200
    fake.recall = False
    return "\n".join(seen)


def test_purge_while_the_index_is_held_elsewhere_leaves_nothing_behind(
    tmp_path: Path, fake_llm: FakeOllama, make_server: Callable[..., RunningServer]
) -> None:
    data_dir = tmp_path / "data"
    first = make_server(data_dir).start()
    with httpx.Client(base_url=first.url, timeout=60) as http:
        for conversation_id, texts in (("secret", SECRET), ("kept", KEPT)):
            history: list[dict[str, str]] = []
            for text in texts:
                assert chat(http, conversation_id, history, text).status_code == 200
        wait_for(lambda: health(http)["tier3"]["queued_turns"] == 0, 60, "the backfill")
        assert "4471" in _read_everything(http, fake_llm)  # found before the purge
    first.stop()

    holder = EdgeIndex(data_dir / "vectors", collection=COLLECTION, dimension=384)
    holder.open()  # this process holds the folder: the next server runs with tier 3 down
    secret_points = VectorFilter(user_id="default", conversation_id="secret")
    try:
        server = make_server(data_dir).start()
        with httpx.Client(base_url=server.url, timeout=60) as http:
            assert health(http)["tier3"]["available"] is False
            purged = http.delete("/v1/conversations/secret", params={"purge": "true"})
            assert purged.status_code == 200, purged.text
            assert health(http)["tier3"]["queued_tasks"] >= 1  # the deletion waits in tier 2
            assert http.get("/v1/conversations/secret").status_code == 404
            down = _read_everything(http, fake_llm)
            assert "4471" not in down, down
            assert "9931" not in down, down
            assert "Lisbon" in down
        stale = holder.count(secret_points)
    finally:
        holder.close()
    assert stale == 2 * len(SECRET)  # every point of the purged conversation was still there
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert chat(http, "kept", [], "Any news?").status_code == 200  # wakes the backfill

        def recovered() -> bool:
            tier3 = health(http)["tier3"]
            return bool(tier3["available"] and tier3["queued_tasks"] == tier3["queued_turns"] == 0)

        wait_for(recovered, 90, "the queued deletion and the backfill")
        after = _read_everything(http, fake_llm)
        assert "4471" not in after, after
        assert "9931" not in after, after
        assert "Lisbon" in after
        facts = http.get("/v1/facts").json()["facts"]
        assert [f["conversation_id"] for f in facts] == ["kept"]
    server.stop()
    stores = read_stores(data_dir)
    check_sql(stores)
    check_points(stores, settled=True)
    left = [
        *(p for p in stores.points.values() if p.conversation_id == "secret"),
        *(f for f in stores.facts.values() if f.conversation_id == "secret"),
    ]
    assert left == []
    print(
        f"purged with tier 3 down: {stale} points of the conversation stayed in the index "
        f"until it was back, {len(left)} after; nothing of it came back through the chat "
        "context, the search endpoint, the LangServe retriever or the facts, before or after"
    )
