"""Each search takes its own options: mode, now and limit, with nothing shared changed.

Real SQLite keyword search, a real vector index and the real embedding model (``conftest.py``'s
manager, ``trip.py``'s conversation and helpers).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from memory_chain.errors import InvalidInputError
from memory_chain.manager import MemoryManager
from memory_chain.schemas import MemoryItem
from tests.retrieval.trip import DAY, TRIP, add, drain


def _sources(items: list[MemoryItem]) -> set[str]:
    return {source for item in items for source in item.sources}


# -- options per call ------------------------------------------------------------------------


def test_find_takes_the_mode_per_call_and_leaves_the_settings_alone(
    manager: MemoryManager,
) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    query = "When is our flight to Lisbon?"
    keyword = manager.find(query, user_id="ana", limit=4, mode="keyword")
    dense = manager.find(query, user_id="ana", limit=4, mode="dense")
    hybrid = manager.find(query, user_id="ana", limit=4, mode="hybrid")
    assert keyword.items
    assert _sources(keyword.items) <= {"tier2-turns", "tier2-summaries"}
    assert keyword.vector is None  # no query embedded
    assert dense.items
    assert _sources(dense.items) == {"tier3"}
    assert {"tier2-turns", "tier3"} <= _sources(hybrid.items)
    assert manager.retrieval.mode == "hybrid"
    assert manager.find(query, user_id="ana", limit=4) == hybrid  # the settings' mode
    with pytest.raises(InvalidInputError, match="mode"):
        manager.find(query, user_id="ana", limit=4, mode="fuzzy")  # type: ignore[arg-type]


def test_threads_asking_different_modes_each_get_their_own(manager: MemoryManager) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    query = "What do we pack for the trip to Lisbon?"
    expected = {
        mode: manager.find(query, user_id="ana", limit=4, mode=mode)
        for mode in ("keyword", "dense", "hybrid")
    }
    results: dict[str, list[object]] = {mode: [] for mode in expected}
    start = threading.Barrier(3)

    def ask(mode: str) -> None:
        start.wait()
        for _ in range(5):
            results[mode].append(manager.find(query, user_id="ana", limit=4, mode=mode))  # type: ignore[arg-type]

    threads = [threading.Thread(target=ask, args=(mode,)) for mode in expected]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for mode, found in results.items():
        assert found == [expected[mode]] * 5, mode


def test_retrieve_counts_relative_times_from_now(manager: MemoryManager) -> None:
    add(manager, "food", "ana", "We had pizza for dinner.", "Sounds tasty.", day=0)
    add(manager, "food", "ana", "We had pizza for dinner.", "Again!", day=20)
    drain(manager)
    question = "What did we have for dinner yesterday?"
    early = manager.retrieve("chat", "ana", question, now=DAY + timedelta(days=1))
    late = manager.retrieve("chat", "ana", question, now=DAY + timedelta(days=21))
    assert early.items[0].timestamp.date() == DAY.date()
    assert late.items[0].timestamp.date() == (DAY + timedelta(days=20)).date()
    found = manager.find(question, user_id="ana", limit=2, now=DAY + timedelta(days=1))
    assert found.items[0].timestamp.date() == DAY.date()


# -- limits ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "dense", "keyword"])
def test_find_returns_limit_items_when_the_store_has_that_many(
    manager: MemoryManager, mode: str
) -> None:
    cities = ["Lisbon", "Porto", "Madrid", "Berlin", "Vienna", "Prague", "Oslo", "Rome"]
    notes = [
        f"Note {i}: the train to {cities[i % len(cities)]} leaves at {6 + i % 14}:{i % 60:02d}."
        for i in range(130)
    ]
    add(manager, "trains", "ana", *notes)
    drain(manager)
    found = manager.find("When does the train leave?", user_id="ana", limit=100, mode=mode)  # type: ignore[arg-type]
    assert found.degraded == []
    assert len(found.items) == 100
    keys = {(item.conversation_id, item.turn_number) for item in found.items}
    assert len(keys) == 100
    assert [i.score for i in found.items] == sorted((i.score for i in found.items), reverse=True)
    # A small limit still gets the settings' candidates: the same best item.
    few = manager.find("When does the train leave?", user_id="ana", limit=3, mode=mode)  # type: ignore[arg-type]
    assert len(few.items) == 3
