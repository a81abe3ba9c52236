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

from pathlib import Path
from typing import Any

from harness import Run, alternate, comparison_lines, parser

from memory_chain.eval.locomo import EVAL_USER, ingested
from memory_chain.eval.locomo_data import load_locomo
from memory_chain.retrieval.search import MemorySearch

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--locomo", type=Path, default=DEFAULT)
    args.add_argument("--queries", type=int, default=300)
    options = args.parse_args()
    bench = Run("visibility check")
    print(bench.header())
    samples, _ = load_locomo(options.locomo)
    questions = [q.question for s in samples for q in s.questions][: options.queries]
    checked = MemorySearch._keep_visible

    def unchecked(*_args: Any) -> None:
        return None

    with ingested(samples, None, lambda *_: None, {}) as (manager, _numbers):
        search, store = manager.memory_search, manager.store

        def find(question: str) -> None:
            search.find(question, user_id=EVAL_USER, limit=10)

        def switch(name: str, _question: object) -> None:
            MemorySearch._keep_visible = checked if name == "with" else unchecked  # type: ignore[method-assign]

        try:
            finds = alternate({"with": find, "without": find}, questions * 2, before=switch)
        finally:
            MemorySearch._keep_visible = checked  # type: ignore[method-assign]

        def conversations(question: str) -> set[str]:
            return {
                c.item.conversation_id for c in search.gather(question, user_id=EVAL_USER).items
            }

        named = [(question, conversations(question)) for question in questions * 2]

        def visible(item: tuple[str, set[str]]) -> None:
            store.visible_conversations(EVAL_USER, item[1])

        def clear(name: str, _item: object) -> None:
            if name == "cold":
                store.statuses.clear()

        # Cold first, then warm on the statuses the cold read left.
        caches = alternate({"cold": visible, "warm": visible}, named, order="fixed", before=clear)
    lines = ["find with the purge/archive check and without, A and B taking turns"]
    lines += comparison_lines(finds, baseline="without", digits=3)
    lines.append("the check alone (SQLStore.visible_conversations), status cache cold and warm")
    lines += comparison_lines(caches, baseline="cold", digits=3)
    ratio = finds.ratio("with", "without")
    lines.append(f"find with the check / without, p50: {ratio:.3f} ({len(questions) * 2} queries)")
    results = {"ms": {**finds.summaries(), **caches.summaries()}, "with_over_without_p50": ratio}
    bench.finish(lines, options.json, results=results)


if __name__ == "__main__":
    main()
