"""What several replicas cost a request: tier 1 checked against SQL before it is served.

Part ``check`` of ``bench_replicas.py``. A replica serves a cached conversation only after
one indexed lookup of its row (turn count, last summarized turn) shows that no other replica
wrote or consolidated it since (``MemoryManager.working_memory``). Per database: 200
conversations of 20 turns, cached; then, alternating on random conversations, the tier-1
read without the check (the cache alone: what a single process could do) and with it; and
``retrieve`` (the whole memory read of a chat request, tiers 1-2) for scale. Also the
advisory lock a consolidation takes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from harness import alternate, stats_header, stats_row

from memory_chain.manager import MemoryManager
from memory_chain.schemas import NewTurn
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade

CONVERSATIONS = 200
TURNS = 20


def measure(url: str, samples: int, seed: int) -> dict[str, Any]:
    """Time the tier-1 read without and with the check, ``retrieve`` and the lock on ``url``."""
    engine = create_sql_engine(url)
    upgrade(engine)
    store = SQLStore(engine)
    manager = MemoryManager(store, TurnBuffer(max_turns=10, max_conversations=CONVERSATIONS))
    rng = random.Random(seed)
    ids = [f"bench-replicas-{i}" for i in range(CONVERSATIONS)]
    for conversation in ids:
        manager.add_turns(
            conversation,
            "u",
            [
                NewTurn("user", f"turn {t} about {rng.choice(['trips', 'food', 'work'])}")
                for t in range(TURNS)
            ],
        )
        manager.working_memory(conversation, "u")  # cached from here on

    def unchecked(conversation: str) -> None:
        # What a single process serves: tier 1 alone (the private reads, no SQL).
        manager._recent(conversation, "u")
        manager._summary(conversation, "u")

    def checked(conversation: str) -> None:
        manager.working_memory(conversation, "u")

    def request(conversation: str) -> None:
        manager.retrieve(conversation, "u", "what about trips?")

    def lock(conversation: str) -> None:
        with store.try_lock(f"consolidation:{conversation}") as held:
            assert held

    kinds: dict[str, Callable[[str], None]] = {
        "tier1_unchecked": unchecked,
        "tier1_checked": checked,
        "retrieve": request,
        "consolidation_lock": lock,
    }
    # The first tenth of the reads warm up; the kinds take turns, reversed every other read.
    chosen = [rng.choice(ids) for _ in range(samples)]
    timings = alternate(kinds, chosen, warmup=samples // 10, order="reverse")
    manager.close()
    engine.dispose()
    result: dict[str, Any] = timings.summaries()
    check = result["tier1_checked"]["p50"] - result["tier1_unchecked"]["p50"]
    result["check_cost_p50_ms"] = check
    result["check_share_of_retrieve_p50"] = check / result["retrieve"]["p50"]
    return result


def report(name: str, result: dict[str, Any]) -> list[str]:
    """The check's table for one database."""
    columns = ("p50", "p95", "p99")
    lines = [f"== {name} ==", stats_header("ms", columns, width=44)]
    labels = {
        "tier1_unchecked": "tier 1 alone (one process, no check)",
        "tier1_checked": "tier 1 checked against SQL (several replicas)",
        "retrieve": "retrieve: the memory read of a chat request",
        "consolidation_lock": "consolidation lock: take and release",
    }
    for key, label in labels.items():
        lines.append(stats_row(label, result[key], columns, width=44, digits=3))
    lines.append(
        f"  the check costs {result['check_cost_p50_ms']:.3f} ms at p50, "
        f"{result['check_share_of_retrieve_p50']:.1%} of retrieve's p50"
    )
    return lines
