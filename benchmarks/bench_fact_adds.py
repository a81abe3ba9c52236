"""What n adds of one user's facts cost, for growing n: linear, or quadratic.

Run from the repository root::

    python benchmarks/bench_fact_adds.py                         # n = 250, 500, 1000
    python benchmarks/bench_fact_adds.py --sizes 250,500,1000,2000 --json /tmp/adds.json

For each n, a fresh SQLite database (in a temporary folder) and a ``FactStore`` whose model
answers from vectors computed beforehand with the bundled all-MiniLM-L6-v2 (so that the
time is the store's, not the model's), then n ``FactStore.add`` calls for one user, one
after the other: distinct notes learnt at consolidation (``origin="extracted"``, which also
looks at the past facts), and every tenth a new value of the user's home (it supersedes the
previous one: history grows too). Reported: the seconds for all n, the mean add, the mean of
the last 100 adds (what an add costs with about n facts), and t(n) / t(n / 2) for the sizes
that double (linear: 2, quadratic: 4).

Until issue 38 each add read every current and past fact of the user with its vector; now
it reads the facts it can be by index, and the user's vectors only when another writer
changed them (:mod:`memory_chain.tiers.sql.fact_adds`).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from corpus import fill
from harness import Run, configure, parser, progress, table, timed

from memory_chain.facts.model import FactDraft
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings

PACKAGES = ("SQLAlchemy", "sentence-transformers", "torch")
USER = "bench-user"


@dataclass(frozen=True)
class Settings:
    sizes: str = "250,500,1000"
    seed: int = 1234
    quick: bool = False


QUICK: dict[str, Any] = {"sizes": "50,100"}


def drafts(count: int, rng: random.Random) -> list[FactDraft]:
    """``count`` facts: notes, and every tenth a move."""
    made = []
    for number in range(count):
        if number % 10 == 9:
            text, subject = fill("I live in {city}.", rng) + f" (move {number})", "home"
        else:
            text = f"Note {number}: " + fill(
                "I care about {topic} and {food}; {person} lives in {city}.", rng
            )
            subject = None
        made.append(FactDraft(text, origin="extracted", subject=subject))
    return made


def time_adds(
    folder: Path, facts_: Sequence[FactDraft], vectors: dict[str, list[float]]
) -> list[float]:
    """Each add's seconds, in a fresh database."""
    engine = create_sql_engine(f"sqlite:///{folder / 'adds.db'}")
    upgrade(engine)
    try:
        store = FactStore(SQLStore(engine).database, embed=lambda t: [vectors[x] for x in t])
        return [timed(store.add, USER, draft)[0] / 1e9 for draft in facts_]
    finally:
        engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, quick="n = 50, 100")
    args.add_argument("--sizes", help="numbers of adds, comma-separated (250,500,1000)")
    args.add_argument("--seed", type=int)
    settings = configure(Settings(), args.parse_args(argv), QUICK)
    sizes = [int(size) for size in settings.sizes.split(",")]
    bench = Run("fact adds", PACKAGES)
    print(bench.header())
    rng = random.Random(settings.seed)
    made = drafts(max(sizes), rng)
    progress(f"embedding {len(made):,} facts beforehand", bench.started)
    texts = [draft.text for draft in made]
    vectors = dict(zip(texts, SentenceEmbeddings().embed_documents(texts), strict=True))
    results: dict[str, Any] = {}
    for size in sizes:
        progress(f"{size:,} adds", bench.started)
        folder = Path(tempfile.mkdtemp(prefix="mc-bench-adds-"))
        try:
            took = time_adds(folder, made[:size], vectors)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        last = took[-100:]
        results[str(size)] = {
            "seconds": sum(took),
            "mean_ms": statistics.fmean(took) * 1e3,
            "last_100_mean_ms": statistics.fmean(last) * 1e3,
            "last_100_p50_ms": statistics.median(last) * 1e3,
        }
    rows = []
    for size in sizes:
        entry = results[str(size)]
        half = results.get(str(size // 2)) if size % 2 == 0 else None
        ratio = entry["seconds"] / half["seconds"] if half else None
        if ratio is not None:
            entry["over_half"] = ratio
        rows.append((size, entry["seconds"], entry["mean_ms"], entry["last_100_mean_ms"], ratio))
    lines = table(("adds", "total s", "mean ms", "last 100 ms", "t(n)/t(n/2)"), rows)
    bench.finish(lines, args.parse_args(argv).json, settings=settings, results=results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
