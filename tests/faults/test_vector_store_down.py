"""Tier 3 down: chat goes on with tiers 1-2, turns wait in the outbox, and none is lost.

Two outages, both against real servers with the real embedding model:

* the embedded index's folder held by another process (qdrant-edge allows one process per
  folder) for the start of the run, then released: the running server's backfill opens the
  index and embeds every queued turn, with no restart;
* a Qdrant server URL nobody listens on for the whole run; recovery is a restart on the
  embedded default with the same SQL database, whose backfill drains the outbox.

Each ends with the server stopped and its files read directly: exactly one point per stored
turn, with its content, and the "remember this" said during the outage filed as a user fact.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from memory_chain.tiers.vectors.edge import EdgeIndex
from tests.faults.chat import chat, health, turn_numbers, wait_for
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
    # The explicit save said while tier 3 was down is a user fact now, and only it.
    assert [(f.role, f.content) for f in stores.facts.values()] == [("user", DETAILS[0])]


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
        assert found["degraded"] == []  # every collection is back, user facts too
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
