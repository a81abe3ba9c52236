"""Latency and memory benchmark of tier 1 (TurnBuffer) and tier 2 (SQLStore).

Run from the repository root::

    python benchmarks/bench_tiers.py
    python benchmarks/bench_tiers.py --scales 100x1000 --json /tmp/bench.json
    python benchmarks/bench_tiers.py --database-url postgresql://user:pw@127.0.0.1/db

A scale ``CxT`` is C conversations holding T turns in total (T // C each, conversation i owned
by ``user-{i % 100}``). Each scale runs in its own child process so that its RSS figures are
not inflated by the previous scale (``--in-process`` turns that off).

For each scale it measures:

* tier 1: ``TurnBuffer.get_messages`` and ``BufferChatMessageHistory(...).messages`` on
  conversations present in a warm ``TurnBuffer(max_turns=10, max_conversations=1000)``,
  plus the hit rate (and miss latency) of uniformly random conversations;
* tier 2: ``SQLStore.append_turns`` (one turn per call) on the populated database, with
  SQLite ``synchronous=NORMAL`` and ``FULL``;
* tier 2: ``SQLStore.search`` scoped to one conversation and to one user, with 2-3 word
  queries drawn from the corpus vocabulary, both by corpus frequency ("zipf": common words
  included, as in natural questions) and uniformly from the less common words ("content");
* the process RSS after populating and after the tier-1 read phase.

Text is deterministic: sentences of 8-30 words drawn from a Zipf-distributed vocabulary of
5,000 synthetic words (seeded), so the FTS5 index sees realistic term selectivity.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gc
import multiprocessing
import random
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpus import ZipfCorpus
from harness import MB, Run, parser, progress, rss_mb, timer_overhead_ns
from tiers_phases import (
    USERS,
    Options,
    bench_appends,
    bench_search,
    bench_tier1,
    populate,
    query_selectivity,
)
from tiers_report import GOALS, report, verdicts

from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade

DEFAULT_SCALES = "100x1000,10000x100000"


def run_scale(options: Options) -> dict[str, Any]:
    """Populate a database to one scale and measure it; returns every figure."""
    rng = random.Random(options.seed)
    corpus = ZipfCorpus.build(options.seed)
    result: dict[str, Any] = {
        "conversations": options.conversations,
        "turns": options.turns,
        "rss_mb": {"start": rss_mb()},
    }
    tmpdir: str | None = None
    prefix = ""
    if options.database_url:
        url = options.database_url
        prefix = f"bench-{uuid.uuid4().hex[:8]}-"
    else:
        tmpdir = tempfile.mkdtemp(prefix="mc-bench-")
        url = f"sqlite:///{Path(tmpdir) / 'tier2.db'}"
    engines = []
    try:
        engine = create_sql_engine(url, sqlite_synchronous="NORMAL")
        engines.append(engine)
        dialect = engine.dialect.name
        upgrade(engine)
        store = SQLStore(engine)
        result["database"] = {
            "dialect": dialect,
            "url": engine.url.render_as_string(hide_password=True),
        }
        conversations = [
            (f"{prefix}conv-{index:06d}", f"{prefix}user-{index % USERS}")
            for index in range(options.conversations)
        ]

        progress(f"populating {options.conversations:,} x {options.turns:,}")
        result["populate"] = populate(
            store, corpus, conversations, options.turns, options.batch, rng
        )
        if dialect == "sqlite" and engine.url.database:
            database = Path(engine.url.database)
            result["database"]["file_mb"] = sum(
                path.stat().st_size / MB
                for path in database.parent.glob(database.name + "*")
                if path.is_file()
            )
        gc.collect()
        result["rss_mb"]["after_populate"] = rss_mb()

        progress("tier-1 reads")
        result["tier1"] = bench_tier1(store, conversations, options, rng)
        result["rss_mb"]["after_reads"] = rss_mb()

        result["search_ms"] = {}
        for query_kind in ("zipf", "content"):
            for scope in ("conversation", "user"):
                progress(f"search, {query_kind} queries, scoped to one {scope}")
                result["search_ms"][f"{query_kind}/{scope}"] = bench_search(
                    store, corpus, conversations, options, rng, query_kind, scope
                )
        if dialect == "sqlite" and engine.url.database:
            result["query_selectivity"] = query_selectivity(Path(engine.url.database), corpus, rng)
        modes = ["NORMAL", "FULL"] if dialect == "sqlite" else ["server default"]
        result["append_ms"] = {}
        for mode in modes:
            progress(f"appends, synchronous={mode}")
            if mode == "FULL":
                full = create_sql_engine(url, sqlite_synchronous="FULL")
                engines.append(full)
                target = SQLStore(full)
            else:
                target = store
            result["append_ms"][mode] = bench_appends(target, corpus, conversations, options, rng)

        result["rss_mb"]["end"] = rss_mb()

        if options.database_url:
            progress("removing the benchmark's conversations")
            for conversation_id, user_id in conversations:
                store.delete_conversation(conversation_id, user_id=user_id)
    finally:
        for engine in engines:
            engine.dispose()
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return result


def parse_scales(text: str) -> list[tuple[int, int]]:
    scales = []
    for item in text.split(","):
        conv, _, turns = item.strip().lower().partition("x")
        try:
            pair = (int(conv.replace("_", "")), int(turns.replace("_", "")))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bad scale {item!r}: use CONVERSATIONSxTURNS, e.g. 100x1000"
            ) from None
        if pair[0] < 1 or pair[1] < pair[0]:
            raise argparse.ArgumentTypeError(f"bad scale {item!r}: need 1 <= C <= T")
        scales.append(pair)
    return scales


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__)
    args.add_argument(
        "--scales",
        type=parse_scales,
        default=parse_scales(DEFAULT_SCALES),
        help=f"comma-separated CONVERSATIONSxTURNS (default {DEFAULT_SCALES})",
    )
    args.add_argument(
        "--database-url",
        help="benchmark this database instead of a temporary SQLite file; the benchmark's "
        "conversations (ids prefixed bench-<random>-) are deleted at the end",
    )
    args.add_argument("--seed", type=int, default=1234)
    args.add_argument("--batch", type=int, default=10, help="turns per populate call")
    args.add_argument("--tier1-reads", type=int, default=20_000)
    args.add_argument("--hit-rate-reads", type=int, default=5_000)
    args.add_argument("--appends", type=int, default=2_000, help="per synchronous mode")
    args.add_argument("--searches", type=int, default=1_000, help="per query kind and scope")
    args.add_argument(
        "--phase-seconds",
        type=float,
        default=30.0,
        help="stop a measurement phase early after this long (keeps slow backends bounded)",
    )
    args.add_argument(
        "--in-process",
        action="store_true",
        help="run every scale in this process (RSS then accumulates across scales)",
    )
    options = args.parse_args(argv)

    overhead = timer_overhead_ns()
    bench = Run("tier", facts={"sqlite": sqlite3.sqlite_version, "timer_overhead_ns": overhead})
    environment = bench.environment()
    print(
        f"memory_chain tier benchmark: Python {environment['python']}, SQLite "
        f"{environment['sqlite']}, {environment['cpus']} CPUs, {environment['platform']}; "
        f"perf_counter_ns overhead ~{overhead:.0f} ns (included in samples)"
    )
    print(
        "latencies per call: n samples, percentiles and max; goals: tier-1 p99 <= 50 µs, "
        "append p95 <= 2 ms, search p95 <= 5 ms\n",
        flush=True,
    )
    results = []
    for conversations, turns in options.scales:
        scale = Options(
            conversations=conversations,
            turns=turns,
            database_url=options.database_url,
            seed=options.seed,
            batch=options.batch,
            tier1_reads=options.tier1_reads,
            hit_rate_reads=options.hit_rate_reads,
            appends=options.appends,
            searches=options.searches,
            phase_seconds=options.phase_seconds,
        )
        scale_started = time.perf_counter()
        if options.in_process:
            result = run_scale(scale)
        else:
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
                result = pool.submit(run_scale, scale).result()
        result["seconds"] = time.perf_counter() - scale_started
        results.append(result)
        print(report(result))
        print(f"  scale run time {result['seconds']:.0f} s\n", flush=True)

    bench.finish(
        [],
        options.json,
        goals=GOALS,
        settings={
            key: value for key, value in vars(options).items() if key not in {"json", "scales"}
        }
        | {"scales": [f"{c}x{t}" for c, t in options.scales]},
        scales=results,
        verdicts={k: v for result in results for k, v in verdicts(result).items()},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
