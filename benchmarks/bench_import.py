"""Import throughput: turns/s until searchable (tier 2 written, tier 3 embedded), beside the
embedding model alone on the same texts, before and after bulk embedding, in one run.

Run from the repository root::

    python benchmarks/bench_import.py --locomo ../shared/data/locomo/locomo-dev.json
    python benchmarks/bench_import.py --locomo ... --turns 5000 --json /tmp/import.json
    python benchmarks/bench_import.py --quick        # 600 template turns, smoke run

Texts: the turns of a LoCoMo-format file (about 2,760 turns in the 5 dev conversations),
loaded again and again under new conversation ids (``<sample>.<pass>``) until ``--turns``
turns (20,000 by default; the last pass is cut short). Nothing is copied into the project.

Each path starts from fresh scratch stores (SQLite and the embedded index, as
``memory-chain eval`` uses) and does what an import does: ``add_turns(..., index_now=False)``
session by session, then embeds the queue; the turns are searchable once every turn has a
point (checked: points == turns, and a search finds a turn).

- ``before``: the queue drained as on main: batches of 64 turns, one forward pass at a time
  on one intra-op thread (``TurnIndexer.drain()``, what the background worker does).
- ``after``: ``Tier3.drain()``: bulk batches of 256 turns, ``embedding_bulk_workers`` passes
  at once (default: one per core), weights quantized as ``embedding_bulk_quantization``
  (what ``memory-chain import`` uses).

The embedding model alone is timed first, on the texts tier 3 embeds
(``"<role>: <content>"``), before and after settings alternating chunk by chunk, on one pass
of the file's turns (the same texts the end-to-end runs embed, each ``--turns / passes``
times; ``--alone-texts N``: its first N). Reported:
end-to-end turns/s and the embedding alone's sentences/s (total, and the median per-chunk
ratio after/before, which machine load colours alike on both sides; and, for information,
the after settings with the other quantization), the store's share,
and the load average. Goal: ``--turns`` searchable in under 300 s with ``after``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from harness import Run, configure, fmt, goal_line, parser, verdict

from memory_chain.config import MemorySettings
from memory_chain.eval.stores import scratch_settings
from memory_chain.schemas import NewTurn
from memory_chain.services import build_embeddings, open_services
from memory_chain.tiers.vectors.index import VectorFilter

GOAL_SECONDS = 300.0
USER = "import-bench"
#: (conversation id, [(role, content, timestamp)]) per session.
Session = tuple[str, list[tuple[str, str, Any]]]


@dataclass(frozen=True)
class Settings:
    """What a run loads and how."""

    locomo: Path | None = None
    turns: int = 20_000
    chunk: int = 512
    alone_texts: int = 0
    paths: str = "before,after"
    quick: bool = False


def load_sessions(path: Path | None, turns: int) -> tuple[list[Session], int]:
    """Sessions of ``turns`` turns in all, the file's conversations repeated; and the passes."""
    base: list[Session] = []
    if path is None:
        from corpus import CITIES, TOPICS

        lines = [(t, c) for t in TOPICS for c in CITIES]
        for n in range(0, len(lines), 20):
            base.append(
                (
                    f"template-{n // 20}",
                    [
                        ("user" if i % 2 == 0 else "assistant", f"We said {t} before {c}.", None)
                        for i, (t, c) in enumerate(lines[n : n + 20])
                    ],
                )
            )
    else:
        from memory_chain.eval.locomo_data import load_locomo

        samples, _ = load_locomo(path)
        for sample in samples:
            roles = {sample.speakers[0]: "user", sample.speakers[1]: "assistant"}
            for _, session in groupby(sample.turns, key=lambda t: t.dia_id.split(":")[0]):
                rows = [(roles.get(t.speaker, "user"), t.content, t.timestamp) for t in session]
                base.append((sample.sample_id, rows))
    sessions: list[Session] = []
    left, passes = turns, 0
    while left > 0:
        for conversation, rows in base:
            if left <= 0:
                break
            sessions.append((f"{conversation}.{passes}", rows[:left]))
            left -= len(rows[:left])
        passes += 1
    return sessions, passes


def end_to_end(sessions: Sequence[Session], *, bulk: bool, run: Run) -> dict[str, Any]:
    """Store and embed every session in fresh stores; seconds of each phase, turns/s."""
    with scratch_settings(MemorySettings(), None) as scratch:
        services = open_services(scratch)
        try:
            tier3 = services.vectors
            assert tier3 is not None
            tier3.indexer.warm_up()  # both paths load the model before the clock starts
            tier3.indexer.bulk_embeddings.embed_query("warm up")
            started = time.perf_counter()
            turns = 0
            for conversation, rows in sessions:
                new = [NewTurn(role, content, timestamp=at) for role, content, at in rows]  # type: ignore[arg-type]
                services.manager.add_turns(conversation, USER, new, index_now=False)
                turns += len(rows)
            stored = time.perf_counter()
            run.progress(f"stored {turns:,} turns in {stored - started:.1f} s; embedding")
            shown = [0]

            def progress(done: int, total: int) -> None:
                if done - shown[0] >= 2_000 or done == total:
                    shown[0] = done
                    rate = done / (time.perf_counter() - stored)
                    run.progress(f"embedded {done:,}/{total:,} turns, {rate:.1f}/s")

            if bulk:
                embedded = tier3.drain(progress=progress)
            else:
                embedded = tier3.indexer.drain(progress=progress)
            done = time.perf_counter()
            points = tier3.point_counts()["turns"]
            first, rows = sessions[0]
            found = tier3.find(rows[0][1], VectorFilter(user_id=USER, conversation_id=first), 1)
        finally:
            services.close()
    seconds = done - started
    return {
        "turns": turns,
        "embedded": embedded,
        "points": points,
        "searchable": points >= turns and bool(found),
        "store_s": round(stored - started, 2),
        "embed_s": round(done - stored, 2),
        "seconds": round(seconds, 2),
        "turns_per_s": round(turns / seconds, 1),
    }


def embedding_alone(texts: list[str], chunk: int) -> dict[str, Any]:
    """Sentences/s of the before and after embedding settings, alternating chunk by chunk.

    ``after`` embeds as an import does (``embedding_bulk_quantization``, default int8);
    ``after-other``, for information, the same with the other quantization.
    """
    settings = MemorySettings()
    other = "none" if settings.embedding_bulk_quantization == "int8" else "int8"
    models: dict[str, Any] = {
        "before": build_embeddings(settings),
        "after": build_embeddings(settings, bulk=True),
        "after-other": build_embeddings(
            settings.model_copy(update={"embedding_bulk_quantization": other}), bulk=True
        ),
    }
    runs: dict[str, Callable[[list[str]], Any]] = {
        # What each path's drain does with a batch: 64 or 256 turns per call.
        "before": lambda part: [
            models["before"].embed_documents(part[i : i + 64]) for i in range(0, len(part), 64)
        ],
        "after": lambda part: [
            models["after"].embed_documents(part[i : i + 256]) for i in range(0, len(part), 256)
        ],
        "after-other": lambda part: [
            models["after-other"].embed_documents(part[i : i + 256])
            for i in range(0, len(part), 256)
        ],
    }
    for model in models.values():
        model.embed_query("warm up")
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for n, start in enumerate(range(0, len(texts), chunk)):
        part = texts[start : start + chunk]
        names = list(runs)
        order = names[n % len(names) :] + names[: n % len(names)]  # each first in turn
        for name in order:
            began = time.perf_counter()
            runs[name](part)
            seconds[name].append(time.perf_counter() - began)
    ratios = [b / a for a, b in zip(seconds["after"], seconds["before"], strict=True)]
    other_ratios = [b / a for a, b in zip(seconds["after-other"], seconds["before"], strict=True)]
    return {
        "texts": len(texts),
        "chunks": len(ratios),
        **{f"{name}_per_s": round(len(texts) / sum(seconds[name]), 1) for name in runs},
        "speedup_median": round(statistics.median(ratios), 2),
        "speedup_min_max": (round(min(ratios), 2), round(max(ratios), 2)),
        "after_quantization": settings.embedding_bulk_quantization,
        "other_quantization": other,
        "other_speedup_median": round(statistics.median(other_ratios), 2),
        "workers": getattr(models["after"], "workers", 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table and write the JSON."""
    args_parser = parser(__doc__, quick="600 template turns instead of a LoCoMo file")
    args_parser.add_argument("--locomo", type=Path, help="a LoCoMo-format JSON file")
    args_parser.add_argument("--turns", type=int, help="turns to load (default 20,000)")
    args_parser.add_argument("--chunk", type=int, help="texts per alternated chunk (512)")
    args_parser.add_argument(
        "--alone-texts", type=int, help="time the model alone on the first N texts of a pass"
    )
    args_parser.add_argument("--paths", help="end-to-end paths to run: before,after")
    args = args_parser.parse_args(argv)
    settings = configure(Settings(), args, quick={"turns": 600, "chunk": 128})
    run = Run("import", packages=("onnxruntime", "tokenizers", "SQLAlchemy"))
    print(run.header())
    sessions, passes = load_sessions(settings.locomo, settings.turns)
    one_pass = [
        f"{role}: {content}"
        for conversation, rows in sessions
        if conversation.endswith(".0")
        for role, content, _ in rows
    ]
    source = settings.locomo.name if settings.locomo else "template turns"
    print(
        f"texts: {source}, {sum(len(r) for _, r in sessions):,} turns in {len(sessions):,} "
        f"sessions ({passes} passes of {len(one_pass):,} turns under new conversation ids)"
    )
    run.progress("embedding alone")
    alone = embedding_alone(one_pass[: settings.alone_texts or None], settings.chunk)
    run.progress(f"embedding alone: {alone}")
    results: dict[str, Any] = {}
    for name in settings.paths.split(","):
        run.progress(f"end to end: {name}")
        results[name] = end_to_end(sessions, bulk=name == "after", run=run)
        run.progress(f"{name}: {results[name]}")
    lines = [
        "",
        f"  {'path':<8} {'turns':>7} {'store s':>8} {'embed s':>8} {'total s':>8} "
        f"{'turns/s':>8}  {'model alone /s':>14}  searchable",
    ]
    for name, row in results.items():
        lines.append(
            f"  {name:<8} {row['turns']:>7,} {row['store_s']:>8.1f} {row['embed_s']:>8.1f} "
            f"{row['seconds']:>8.1f} {row['turns_per_s']:>8.1f}  "
            f"{alone[f'{name}_per_s']:>14.1f}  {row['searchable']}"
        )
    lines.append(
        f"\n  embedding alone, after/before per chunk of {settings.chunk} texts: median "
        f"{alone['speedup_median']}x (min {alone['speedup_min_max'][0]}, max "
        f"{alone['speedup_min_max'][1]}; {alone['chunks']} chunks; after = {alone['workers']} "
        "forward passes at once)"
    )
    lines.append(
        f"  after: embedding_bulk_quantization={alone['after_quantization']}; for "
        f"information, ={alone['other_quantization']}: {alone['after-other_per_s']}/s, "
        f"median {alone['other_speedup_median']}x before"
    )
    verdicts = {}
    if "after" in results:
        after = results["after"]
        verdicts["searchable_seconds"] = verdict(after["seconds"], GOAL_SECONDS, False)
        lines.append(
            goal_line(
                f"{after['turns']:,} turns searchable (after)",
                f"{fmt(after['seconds'])} s",
                f"<= {GOAL_SECONDS:.0f} s",
                verdicts["searchable_seconds"],
            )
        )
    run.finish(
        lines,
        args.json,
        settings=settings,
        results={"end_to_end": results, "embedding_alone": alone, "passes": passes},
        verdicts=verdicts,
    )
    return 0 if all(r["searchable"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
