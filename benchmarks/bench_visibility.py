"""What the purge/archive check costs a retrieval: ``MemorySearch.find`` with it and without.

Every retrieval keeps only items of conversations still visible in tier 2
(``SQLStore.visible_conversations``), so that a purged conversation whose points wait for
the vector store never comes back. This times ``find`` on the LoCoMo dev conversations with
the check and with it switched off, A and B alternating, and the check alone with its status
cache warm and cold.

Run from the repository root::

    python benchmarks/bench_visibility.py [--locomo ../shared/data/locomo/locomo-dev.json]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from memory_chain.eval.locomo import EVAL_USER, ingested
from memory_chain.eval.locomo_data import load_locomo
from memory_chain.retrieval.search import MemorySearch

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--locomo", type=Path, default=DEFAULT)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    samples, _ = load_locomo(args.locomo)
    questions = [q.question for s in samples for q in s.questions][: args.queries]
    checked = MemorySearch._keep_visible

    def unchecked(*_args: Any) -> None:
        return None

    with ingested(samples, None, lambda *_: None, {}) as (manager, _numbers):
        search, store = manager.memory_search, manager.store
        times: dict[str, list[float]] = {"with": [], "without": [], "warm": [], "cold": []}
        for number, question in enumerate(questions * 2):
            order = ("with", "without") if number % 2 else ("without", "with")
            for variant in order:  # A and B take turns
                MemorySearch._keep_visible = checked if variant == "with" else unchecked  # type: ignore[method-assign]
                started = time.perf_counter()
                search.find(question, user_id=EVAL_USER, limit=10)
                times[variant].append(_ms(started))
            MemorySearch._keep_visible = checked  # type: ignore[method-assign]
            named = {
                c.item.conversation_id for c in search.gather(question, user_id=EVAL_USER).items
            }
            for cache in ("cold", "warm"):
                if cache == "cold":
                    store.statuses.clear()
                started = time.perf_counter()
                store.visible_conversations(EVAL_USER, named)
                times[cache].append(_ms(started))
    for name, values in times.items():
        print(f"{name:>8}: p50 {statistics.median(values):7.3f} ms  p95 {_p(values, 95):7.3f} ms")
    ratio = statistics.median(times["with"]) / statistics.median(times["without"])
    print(f"find with the check / without, p50: {ratio:.3f} ({len(times['with'])} queries)")


if __name__ == "__main__":
    main()
