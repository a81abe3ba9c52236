"""Several replicas on one database: each has its own tier 1 and consolidation service.

Two "replicas" here are two :class:`MemoryManager` / :class:`ConsolidationService` pairs, each
with its own engine (connection pool) and tier-1 buffer, on one real database: SQLite and a
real PostgreSQL for reads (a second process on one SQLite file is the same case), PostgreSQL
for the consolidation lock (several replicas need a shared server).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from memory_chain.consolidation import ConsolidationService, ConsolidationSettings
from memory_chain.manager import MemoryManager
from memory_chain.schemas import NewTurn
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from tests.deprecated_doors import USES_DEPRECATED_HISTORIES
from tests.fake_chat import ScriptedSummarizer

pytestmark = USES_DEPRECATED_HISTORIES


@dataclass
class Replica:
    manager: MemoryManager
    consolidation: ConsolidationService
    summarizer: ScriptedSummarizer

    @property
    def store(self) -> SQLStore:
        return self.manager.store


def start_replica(url: str, *, delay: float = 0.0) -> Replica:
    engine = create_sql_engine(url)
    upgrade(engine)
    store = SQLStore(engine)
    manager = MemoryManager(store, TurnBuffer(max_turns=10), keep_after_consolidation=2)
    summarizer = ScriptedSummarizer(delay=delay)
    consolidation = ConsolidationService(
        store,
        manager.buffer,
        summarizer,  # type: ignore[arg-type]
        settings=ConsolidationSettings(backoff_seconds=0.01, keep_last=2),
    )
    manager.listeners.append(consolidation)
    return Replica(manager, consolidation, summarizer)


def stop(*replicas: Replica) -> None:
    for replica in replicas:
        replica.consolidation.stop()
        replica.manager.close()
        replica.store.engine.dispose()


@pytest.fixture
def replicas(sql_url: str) -> Iterator[tuple[Replica, Replica]]:
    a, b = start_replica(sql_url), start_replica(sql_url)
    yield a, b
    stop(a, b)


def say(replica: Replica, text: str, conversation: str = "trip") -> None:
    replica.manager.add_turns(conversation, "ana", [NewTurn("user", text)])


def contents(turns: Any) -> list[str]:
    return [turn.content for turn in turns]


def test_a_replica_sees_turns_another_replica_acknowledged(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    say(a, "one")
    say(a, "two")
    assert contents(a.manager.retrieve("trip", "ana", "x").recent) == ["one", "two"]  # cached
    say(b, "three")  # acknowledged by the other replica
    say(b, "four")
    context = a.manager.retrieve("trip", "ana", "x")
    assert contents(context.recent) == ["one", "two", "three", "four"]
    # The composed history (RunnableWithMessageHistory's read) is checked the same way.
    say(b, "five")
    history = a.manager.history("trip", "ana").messages
    assert [m.content for m in history][-1] == "five"
    # ...and A's own writes after that stay contiguous with what B wrote.
    say(a, "six")
    assert [t.turn_number for t in a.manager.recent_turns("trip", "ana")] == [1, 2, 3, 4, 5, 6]


def test_a_replica_serves_the_summary_another_replica_stored(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    for word in ("alpha", "beta", "gamma", "delta"):
        say(a, word)
    assert a.manager.retrieve("trip", "ana", "x").summary is None  # "no summary" is cached
    stored = b.consolidation.consolidate("trip", "ana")
    assert stored is not None
    context = a.manager.retrieve("trip", "ana", "x")
    assert context.summary == b.store.get_conversation("trip", user_id="ana").summary  # type: ignore[union-attr]
    assert context.summary is not None
    # A rebuilt tier 1 as consolidation leaves it: the last keep_after_consolidation turns.
    assert contents(context.recent) == ["gamma", "delta"]


def test_a_conversation_deleted_by_another_replica_is_gone(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    say(a, "secret")
    assert contents(a.manager.recent_turns("trip", "ana")) == ["secret"]
    assert b.manager.delete_conversation("trip", "ana")
    assert a.manager.recent_turns("trip", "ana") == []
    assert a.manager.summary("trip", "ana").text is None


@pytest.mark.postgres
def test_one_consolidation_per_conversation_across_replicas(postgres_url: str) -> None:
    """Replicas that trigger the same consolidation at once make the LLM calls one would."""
    from tests.conftest import _fresh_postgres_database

    url = _fresh_postgres_database(postgres_url)
    alone = start_replica(url, delay=0.3)
    a, b = start_replica(url, delay=0.3), start_replica(url, delay=0.3)
    try:
        for i in range(8):
            alone.store.append_turns("solo", [NewTurn("user", f"m{i}")], user_id="ana")
            a.store.append_turns("trip", [NewTurn("user", f"m{i}")], user_id="ana")
        assert alone.consolidation.consolidate("solo", "ana", reason="idle") is not None
        baseline = len(alone.summarizer.calls)

        barrier = threading.Barrier(2)
        results: dict[str, Any] = {}

        def run(name: str, replica: Replica) -> None:
            barrier.wait()
            results[name] = replica.consolidation.consolidate("trip", "ana", reason="idle")

        threads = [threading.Thread(target=run, args=item) for item in (("a", a), ("b", b))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert sorted(r is None for r in results.values()) == [False, True]  # one skipped
        assert len(a.summarizer.calls) + len(b.summarizer.calls) == baseline
        assert len(a.store.get_summaries("trip", user_id="ana")) == 1
        # The lock is released: the next range is consolidated by whichever replica asks.
        for i in range(8, 12):
            b.store.append_turns("trip", [NewTurn("user", f"m{i}")], user_id="ana")
        assert a.consolidation.consolidate("trip", "ana") is not None
        assert [s.turn_range_end for s in b.store.get_summaries("trip", user_id="ana")] == [8, 12]
    finally:
        stop(alone, a, b)


@pytest.mark.postgres
def test_idle_scans_of_every_replica_summarize_each_range_once(postgres_url: str) -> None:
    """Every replica's idle scan finds the same silent conversations: each range is still
    summarized once, and the LLM is called no more than one replica alone would."""
    from tests.conftest import _fresh_postgres_database

    url = _fresh_postgres_database(postgres_url)
    replicas = [start_replica(url, delay=0.05) for _ in range(3)]
    try:
        for replica in replicas:
            replica.consolidation.settings.idle_seconds = 0.01
        for c in range(6):
            for i in range(3):
                replicas[0].store.append_turns(f"c{c}", [NewTurn("user", f"m{i}")], user_id="u")
        time.sleep(0.05)
        for replica in replicas:
            assert replica.consolidation.scan_idle() == 6
        for replica in replicas:
            for future in list(replica.consolidation._pending.values()):
                future.result(timeout=60)
        calls = sum(len(replica.summarizer.calls) for replica in replicas)
        assert calls == 6  # one range summary per conversation, none repeated
        for c in range(6):
            assert [
                s.turn_range_end for s in replicas[1].store.get_summaries(f"c{c}", user_id="u")
            ] == [3]
    finally:
        stop(*replicas)
