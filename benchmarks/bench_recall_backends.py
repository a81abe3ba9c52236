"""Held-out LoCoMo recall and retrieval latency on SQLite and on PostgreSQL + pgvector, one run.

Recall: the same cross-validation (``memory-chain eval locomo FILE --cross-validate``) runs
twice in one process, on a temporary SQLite file with the embedded vector index, then on a
scratch database of a PostgreSQL server with tier 3 in pgvector (``--postgres-url``: a server
of yours, the database made and dropped; default: a throwaway local one, as the tests start
it). Each mode's held-out Recall@k is printed overall and per category side by side, with
the difference.

Latency: both stores are filled, then questions are asked through ``MemoryManager.find``
(the chat's retrieval, default settings) on both, in alternating order, each right after the
question was embedded alone: retrieval p50/p95 on each beside one query embedding's, under
the same load. (The cross-validation's own timings come one store after the other, minutes
apart; on a shared machine the load changes in between.)

Run from the repository root::

    python benchmarks/bench_recall_backends.py [--locomo ../shared/data/locomo/locomo-dev.json]
        [--postgres-url postgresql+psycopg://user@host/postgres] [--latency-questions 300]
        [--skip-recall] [--json out.json]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import Run, alternate, goal_line, local_postgres, parser, progress, timed

from memory_chain.eval.crossval import CrossValReport, cross_validate_locomo
from memory_chain.eval.locomo import (
    DEFAULT_KS,
    EVAL_USER,
    ingested,
    latency_summary,
    searched,
)
from memory_chain.eval.locomo_data import load_locomo
from memory_chain.manager import MemoryManager

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
BACKENDS = ("sqlite", "postgresql")


def _quiet(stage: str, done: int, total: int) -> None:
    if done == total:
        progress(f"{stage} {done}/{total}")


def _rows(reports: dict[str, CrossValReport], mode: str) -> list[str]:
    ks = reports["sqlite"].ks
    cells = "".join(f"{f'R@{k}':>7}" for k in ks)
    lines = [f"  {mode:<20}{'questions':>10}  sqlite {cells}  | postgresql {cells}  | difference"]
    sqlite, postgres = reports["sqlite"].held_out[mode], reports["postgresql"].held_out[mode]
    for name in ["overall", *sqlite.per_category]:
        a = sqlite.recall if name == "overall" else sqlite.per_category[name]
        b = postgres.recall if name == "overall" else postgres.per_category.get(name, {})
        left = "".join(f"{a[k]:>7.1f}" for k in ks)
        right = "".join(f"{b.get(k, 0.0):>7.1f}" for k in ks)
        diff = " ".join(f"{b.get(k, 0.0) - a[k]:+5.1f}" for k in ks)
        count = sqlite.questions[name]
        lines.append(f"    {name:<18}{count:>10}  {'':7}{left}  | {'':11}{right}  | {diff}")
    return lines


def _recall(options: Any, server: str, modes: list[str]) -> dict[str, CrossValReport]:
    reports: dict[str, CrossValReport] = {}
    for backend in BACKENDS:
        progress(f"cross-validating on {backend}")
        reports[backend] = cross_validate_locomo(
            options.locomo, ks=DEFAULT_KS, modes=modes, scope=options.scope,
            postgres_url=server if backend == "postgresql" else None, progress=_quiet,
        )  # fmt: skip
    return reports


def _latency(options: Any, server: str) -> dict[str, dict[str, float]]:
    """Per-question ``find`` on both stores, alternating, beside the question's embedding."""
    samples, _ = load_locomo(options.locomo)
    asked = [(sample, q.question) for sample in samples for q in sample.questions]
    step = max(len(asked) // max(options.latency_questions, 1), 1)
    asked = asked[::step][: options.latency_questions]
    embedding_ns: list[int] = []
    with contextlib.ExitStack() as stack:
        managers: dict[str, MemoryManager] = {}
        for backend in BACKENDS:
            progress(f"filling {backend}")
            url = server if backend == "postgresql" else None
            manager, _numbers = stack.enter_context(
                ingested(samples, None, _quiet, {}, postgres_url=url)
            )
            managers[backend] = manager
        tier3 = managers["sqlite"].tier3
        assert tier3 is not None

        def embed_first(_backend: str, item: tuple[Any, str]) -> None:
            embedding_ns.append(timed(tier3.embed_query, item[1])[0])

        def finder(backend: str) -> Callable[[tuple[Any, str]], object]:
            def find(item: tuple[Any, str]) -> object:
                sample, question = item
                return managers[backend].find(
                    question, user_id=EVAL_USER,
                    conversation_id=searched(sample, options.scope), limit=max(DEFAULT_KS),
                )  # fmt: skip

            return find

        variants = {backend: finder(backend) for backend in BACKENDS[::-1]}
        timings = alternate(variants, asked, before=embed_first)
    times = {"embedding": embedding_ns, **timings.samples}
    return {name: latency_summary([ns / 1e6 for ns in values]) for name, values in times.items()}


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--locomo", type=Path, default=DEFAULT, help="a LoCoMo-format file")
    args.add_argument("--postgres-url", help="a server to use (a database is made and dropped)")
    args.add_argument("--scope", choices=["conversation", "user"], default="conversation")
    args.add_argument(
        "--mode", action="append", choices=["hybrid", "keyword", "dense"], help="repeatable"
    )
    args.add_argument("--latency-questions", type=int, default=300, help="0: no latency stage")
    args.add_argument("--skip-recall", action="store_true", help="only the latency stage")
    options = args.parse_args()
    modes = options.mode or ["hybrid", "keyword", "dense"]
    run = Run("recall on sqlite and postgresql", packages=("SQLAlchemy", "psycopg"))
    print(run.header())
    reports: dict[str, CrossValReport] = {}
    latency: dict[str, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        server = options.postgres_url or stack.enter_context(local_postgres())
        if not options.skip_recall:
            reports = _recall(options, server, modes)
        if options.latency_questions > 0:
            latency = _latency(options, server)
    lines: list[str] = []
    verdicts: dict[str, str] = {}
    if reports:
        lines += [
            f"held-out recall, one conversation left out at a time: {options.locomo}",
            f"  each question searched its {options.scope}'s turns",
        ]
        for mode in modes:
            lines += _rows(reports, mode)
        sqlite, postgres = reports["sqlite"].held_out, reports["postgresql"].held_out
        for mode in modes:
            gap = max(abs(postgres[mode].recall[k] - sqlite[mode].recall[k]) for k in DEFAULT_KS)
            label = f"{mode}: postgresql within 1 point of sqlite at every k"
            verdicts[label] = "ok" if gap <= 1.0 else "MISSED"
            lines.append(goal_line(label, f"{gap:.1f}", "<= 1.0", verdicts[label]))
        if "hybrid" in modes and "keyword" in modes:
            for backend in BACKENDS:
                held = reports[backend].held_out
                hybrid, keyword = held["hybrid"].recall, held["keyword"].recall
                behind = [k for k in DEFAULT_KS if hybrid[k] < keyword[k]]
                label = f"{backend}: hybrid >= keyword only at every k"
                verdicts[label] = "MISSED" if behind else "ok"
                figure = ",".join(map(str, behind)) or "-"
                lines.append(goal_line(label, figure, "none", verdicts[label]))
    if latency:
        embedding = latency["embedding"]
        lines.append(
            f"  per-question retrieval (MemoryManager.find, {options.scope} scope), ms, the stores "
            "alternating; one query embedding alone: "
            f"p50 {embedding['p50']:.2f}  p95 {embedding['p95']:.2f}"
        )
        for backend in BACKENDS:
            figures = latency[backend]
            lines.append(
                f"    {backend:<11} p50 {figures['p50']:6.2f}  p95 {figures['p95']:6.2f}  "
                f"max {figures['max']:7.2f}   p95 / embedding p95 "
                f"{figures['p95'] / embedding['p95']:.2f}"
            )
    results: dict[str, Any] = {backend: report.as_dict() for backend, report in reports.items()}
    run.finish(lines, options.json, results=results, latency_ms=latency, verdicts=verdicts)


if __name__ == "__main__":
    main()
