"""Tier 3 end to end: outbox → real MiniLM embeddings → index → retriever, on every backend

(embedded qdrant-edge, qdrant-client in memory, PostgreSQL with pgvector).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from qdrant_client import QdrantClient
from sqlalchemy import Engine

from memory_chain.errors import InvalidInputError, VectorStoreUnavailableError
from memory_chain.schemas import NewTurn
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.vectors.edge import EdgeIndex
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tiers.vectors.index import VectorFilter, VectorIndex, point_id
from memory_chain.tiers.vectors.indexer import CUT, TurnIndexer, chunks_of
from memory_chain.tiers.vectors.pgvector import PgVectorIndex
from memory_chain.tiers.vectors.qdrant import QdrantIndex
from memory_chain.tiers.vectors.retriever import TurnRetriever
from memory_chain.tiers.vectors.semantic import SemanticSearch
from memory_chain.tiers.vectors.worker import BackfillWorker
from tests.postgres import database_url, free_port, running_postgres

DAY = datetime(2025, 5, 1, 9, tzinfo=UTC)
TRIP = [
    ("user", "We are planning a trip to Lisbon with my sister Marta."),
    ("assistant", "Lovely! When are you travelling?"),
    ("user", "Our flight leaves on the 3rd of May at 7 am from Berlin."),
    ("assistant", "Noted: Berlin to Lisbon, 3 May, 7 am."),
    ("user", "The total budget is 2,000 euros for the whole week."),
    ("assistant", "A 2,000 euro budget for seven days works well in Lisbon."),
    ("user", "Marta is vegetarian, so restaurants must have veggie options."),
    ("assistant", "I will suggest vegetarian-friendly restaurants."),
    ("user", "We also want to visit Sintra for a day trip by train."),
    ("assistant", "Sintra is 40 minutes by train from Rossio station."),
]
OTHER = [
    ("user", "My favourite programming language is Rust."),
    ("assistant", "Rust has a great type system."),
]


def make_index(kind: str, folder: Path, engine: Engine | None = None) -> VectorIndex:
    if kind == "embedded":
        return EdgeIndex(folder / "vectors", dimension=384)
    if kind == "pgvector":
        assert engine is not None
        return PgVectorIndex(engine, dimension=384)
    return QdrantIndex(QdrantClient(":memory:"), dimension=384)


@pytest.fixture(params=["embedded", "qdrant-memory", "pgvector"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    engine = request.getfixturevalue("postgres_engine") if request.param == "pgvector" else None
    index = make_index(request.param, tmp_path, engine)
    index.open()
    yield index
    index.close()


def store_conversation(
    store: SQLStore, conversation_id: str, user_id: str, turns: list[tuple[str, str]]
) -> None:
    store.append_turns(
        conversation_id,
        [
            NewTurn(role, text, timestamp=DAY + timedelta(hours=i))  # type: ignore[arg-type]
            for i, (role, text) in enumerate(turns)
        ],
        user_id=user_id,
    )


def snapshot(index: VectorIndex) -> dict[str, tuple[Any, np.ndarray]]:
    return {p.id: (p.payload, np.asarray(p.vector)) for p in index.scroll()}


def test_outbox_backfill_and_idempotent_ids(
    queued_store: SQLStore, index: VectorIndex, embeddings: SentenceEmbeddings
) -> None:
    store_conversation(queued_store, "trip", "ana", TRIP)
    outbox = queued_store.outbox()
    assert outbox.count() == len(TRIP)
    indexer = TurnIndexer(outbox, index, embeddings, batch_size=4)
    progress: list[tuple[int, int]] = []
    assert indexer.drain(progress=lambda done, total: progress.append((done, total))) == 10
    assert progress[-1] == (10, 10)
    assert outbox.count() == 0
    assert index.count() == 10
    assert index.count(VectorFilter(user_id="ana", conversation_id="trip")) == 10
    ids = {p.id for p in index.scroll()}
    assert ids == {point_id("ana", "trip", n) for n in range(1, 11)}
    # Embedding the same turns again overwrites the same points.
    assert outbox.enqueue(conversation_id="trip") == 10
    assert indexer.drain() == 10
    assert index.count() == 10


def test_retriever_finds_the_right_turn_with_filters(
    queued_store: SQLStore, index: VectorIndex, embeddings: SentenceEmbeddings
) -> None:
    store_conversation(queued_store, "trip", "ana", TRIP)
    store_conversation(queued_store, "code", "ana", OTHER)
    store_conversation(queued_store, "bobs", "bob", TRIP)
    TurnIndexer(queued_store.outbox(), index, embeddings).drain()
    retriever = TurnRetriever(semantic=SemanticSearch(index, embeddings), user_id="ana", k=3)

    docs = retriever.invoke("When does our flight leave?", conversation_id="trip")
    assert docs[0].metadata["turn_number"] == 3
    assert docs[0].metadata["tier"] == "tier3"
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    assert 0 < scores[0] <= 1.0 + 1e-6
    assert all(d.metadata["user_id"] == "ana" for d in docs)

    budget = retriever.invoke("how much money can we spend", k=1)
    assert budget[0].metadata["turn_number"] in (5, 6)
    # Across the user's conversations, never another user's.
    rust = retriever.invoke("which programming language do I like?", k=1)
    assert rust[0].metadata["conversation_id"] == "code"
    replies = retriever.invoke("flight", roles=["assistant"], conversation_id="trip")
    assert {d.metadata["role"] for d in replies} == {"assistant"}
    late = retriever.invoke("trip", since=DAY + timedelta(hours=8), conversation_id="trip")
    assert {d.metadata["turn_number"] for d in late} <= {9, 10}
    early = retriever.invoke("trip", until=DAY + timedelta(hours=1), conversation_id="trip", k=5)
    assert {d.metadata["turn_number"] for d in early} == {1, 2}
    assert retriever.invoke("flight", conversation_id="bobs") == []


async def test_retriever_async_and_bad_arguments(
    queued_store: SQLStore, index: VectorIndex, embeddings: SentenceEmbeddings
) -> None:
    store_conversation(queued_store, "trip", "ana", TRIP)
    store_conversation(queued_store, "code", "ana", OTHER)
    TurnIndexer(queued_store.outbox(), index, embeddings).drain()
    retriever = TurnRetriever(semantic=SemanticSearch(index, embeddings), user_id="ana")
    docs = await retriever.ainvoke("vegetarian food", k=2)
    assert len(docs) == 2
    assert docs[0].metadata["turn_number"] in (7, 8)
    # ainvoke passes the per-call arguments on, as invoke does, and finds the same turns.
    args: dict[str, Any] = {"k": 1, "conversation_id": "code", "roles": ["user"]}
    found = await retriever.ainvoke("programming", **args)
    assert [d.id for d in found] == [d.id for d in retriever.invoke("programming", **args)]
    assert [(d.metadata["conversation_id"], d.metadata["turn_number"]) for d in found] == [
        ("code", 1)
    ]
    for bad in ({"k": 0}, {"k": "3"}, {"user_id": "bob"}, {"conversation_id": "../x"}):
        with pytest.raises(InvalidInputError):
            retriever.invoke("x", **bad)
    with pytest.raises(InvalidInputError, match="query is empty"):
        retriever.invoke("  ")


def test_reindex_restores_a_deleted_collection_exactly(
    queued_store: SQLStore, index: VectorIndex, embeddings: SentenceEmbeddings
) -> None:
    store_conversation(queued_store, "trip", "ana", TRIP)
    store_conversation(queued_store, "code", "bob", OTHER)
    indexer = TurnIndexer(queued_store.outbox(), index, embeddings)
    indexer.drain()
    before = snapshot(index)
    index.drop()
    index.open()
    assert index.count() == 0
    assert indexer.reindex() == 12
    after = snapshot(index)
    assert after.keys() == before.keys()
    for point, (payload, vector) in before.items():
        assert after[point][0] == payload
        np.testing.assert_allclose(after[point][1], vector, atol=1e-5)
    # Scoped: one user's points are rebuilt, the others untouched.
    index.delete(VectorFilter(user_id="bob"))
    assert indexer.reindex(user_id="bob") == 2
    assert snapshot(index).keys() == before.keys()
    assert indexer.reindex(conversation_id="trip") == 10
    assert index.count() == 12


def test_deleting_a_conversation_removes_its_points(
    queued_store: SQLStore, index: VectorIndex, embeddings: SentenceEmbeddings
) -> None:
    store_conversation(queued_store, "trip", "ana", TRIP)
    store_conversation(queued_store, "code", "ana", OTHER)
    indexer = TurnIndexer(queued_store.outbox(), index, embeddings)
    indexer.drain()
    assert queued_store.delete_conversation("trip", user_id="ana")
    indexer.apply_tasks()  # the purge queued the deletion of its points
    assert index.count(VectorFilter(user_id="ana", conversation_id="trip")) == 0
    assert index.count() == 2


def test_unreachable_qdrant_keeps_turns_queued_until_backfill(
    queued_store: SQLStore, embeddings: SentenceEmbeddings
) -> None:
    store_conversation(queued_store, "trip", "ana", TRIP)
    outbox = queued_store.outbox()
    down = QdrantIndex.from_url(f"http://127.0.0.1:{free_port()}", timeout=2)
    indexer = TurnIndexer(outbox, down, embeddings)
    with pytest.raises(VectorStoreUnavailableError):
        down.open()
    with pytest.raises(VectorStoreUnavailableError):
        indexer.drain()
    assert indexer.try_drain() == 0
    assert outbox.count() == len(TRIP)  # nothing lost, nothing settled
    store_conversation(queued_store, "more", "ana", OTHER)  # chat goes on meanwhile
    assert outbox.count() == len(TRIP) + len(OTHER)

    recovered = QdrantIndex(QdrantClient(":memory:"))
    recovered.open()
    assert TurnIndexer(outbox, recovered, embeddings).drain() == 12
    assert outbox.count() == 0
    assert recovered.count() == 12


def test_pgvector_down_keeps_turns_queued_until_it_is_back(
    queued_store: SQLStore, embeddings: SentenceEmbeddings
) -> None:
    """A PostgreSQL that stops: searches and the backfill fail as unavailable, nothing is
    lost, and the queue drains once the server is back."""
    with running_postgres() as server:
        engine = create_sql_engine(database_url(server.url, "postgres"))
        upgrade(engine)
        index = PgVectorIndex(engine, dimension=384)
        index.open()
        outbox = queued_store.outbox()
        indexer = TurnIndexer(outbox, index, embeddings)
        store_conversation(queued_store, "trip", "ana", TRIP)
        assert indexer.drain() == len(TRIP)

        server.stop()
        store_conversation(queued_store, "more", "ana", OTHER)  # chat goes on meanwhile
        query = embeddings.embed_query("flight")
        with pytest.raises(VectorStoreUnavailableError, match="unreachable"):
            index.search(query, VectorFilter(user_id="ana"), 3)
        with pytest.raises(VectorStoreUnavailableError):
            indexer.drain()
        assert indexer.try_drain() == 0
        assert outbox.count() == len(OTHER)

        server.start()
        assert indexer.drain() == len(OTHER)
        assert outbox.count() == 0
        assert index.count(VectorFilter(user_id="ana")) == len(TRIP) + len(OTHER)
        engine.dispose()


def test_pgvector_on_an_unreachable_server_is_unavailable() -> None:
    engine = create_sql_engine(f"postgresql://nobody@127.0.0.1:{free_port()}/memory")
    index = PgVectorIndex(engine, dimension=384)
    with pytest.raises(VectorStoreUnavailableError, match="unreachable"):
        index.open()
    engine.dispose()


def test_backfill_worker_embeds_in_the_background(
    queued_store: SQLStore, index: VectorIndex, embeddings: SentenceEmbeddings
) -> None:
    worker = BackfillWorker(TurnIndexer(queued_store.outbox(), index, embeddings), interval=0.2)
    worker.index_open = True
    worker.start()
    try:
        store_conversation(queued_store, "trip", "ana", TRIP)
        worker.notify()
        deadline = time.monotonic() + 60
        outbox = queued_store.outbox()
        while index.count() < len(TRIP) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert index.count() == len(TRIP)
        # Settled once no new turn came for settle_after (1 s), well before flush_interval.
        settle_deadline = time.monotonic() + 8
        while outbox.count() and time.monotonic() < settle_deadline:
            time.sleep(0.1)
        assert outbox.count() == 0
    finally:
        worker.stop()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    owners=st.lists(st.sampled_from(["u1", "u2", "u3"]), min_size=1, max_size=12),
    query=st.text(min_size=1, max_size=30).filter(str.strip),
    searcher=st.sampled_from(["u1", "u2", "u3"]),
)
def test_user_isolation_property(
    owners: list[str], query: str, searcher: str, postgres_engine: Engine
) -> None:
    """Whatever is stored, a user's search returns only that user's turns."""
    fake = DeterministicFakeEmbedding(size=384)
    with tempfile.TemporaryDirectory() as folder:
        engine = create_sql_engine(f"sqlite:///{folder}/memory.db")
        upgrade(engine)
        store = SQLStore(engine, queue_embeddings=True)
        for i, owner in enumerate(owners):
            store.append_turns(f"c{i}", [NewTurn("user", f"turn {i} of {owner}")], user_id=owner)
        for kind in ("embedded", "qdrant-memory", "pgvector"):
            index = make_index(kind, Path(folder) / kind, postgres_engine)
            if kind == "pgvector":  # one database for every example: start empty
                index.drop()
            index.open()
            TurnIndexer(store.outbox(), index, fake).drain()
            store_outbox = store.outbox()
            store_outbox.enqueue()  # the next backend embeds the same turns
            docs = TurnRetriever(
                semantic=SemanticSearch(index, fake), user_id=searcher, k=20
            ).invoke(query)
            assert {d.metadata["user_id"] for d in docs} <= {searcher}
            assert len(docs) == owners.count(searcher)
            index.close()
        engine.dispose()


def test_cli_reindex(tmp_path: Path) -> None:
    from memory_chain.config import MemorySettings
    from memory_chain.services import open_services

    settings = MemorySettings(data_dir=tmp_path / "data")
    services = open_services(settings)
    store_conversation(services.store, "trip", "ana", TRIP)
    services.close()
    env = {**os.environ, "MEMORY_CHAIN_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    cli = str(Path(sys.executable).parent / "memory-chain")
    result = subprocess.run(
        [cli, "reindex", "--conversation", "trip"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "reindexed 10 turns" in result.stdout
    index = EdgeIndex(tmp_path / "data" / "vectors")
    index.open()
    assert index.count() == 10
    index.close()


# -- the standard LangChain retriever suite, on both backends ----------------------------------

_standard_indexes: dict[str, VectorIndex] = {}


def _standard_params(kind: str) -> dict[str, Any]:
    embeddings = SentenceEmbeddings()
    if kind not in _standard_indexes:
        folder = Path(tempfile.mkdtemp(prefix="memory-chain-standard-"))
        engine = create_sql_engine(f"sqlite:///{folder / 'memory.db'}")
        upgrade(engine)
        store = SQLStore(engine, queue_embeddings=True)
        store_conversation(store, "trip", "ana", TRIP)
        index = make_index(kind, folder)
        index.open()
        TurnIndexer(store.outbox(), index, embeddings).drain()
        engine.dispose()
        _standard_indexes[kind] = index
    return {"semantic": SemanticSearch(_standard_indexes[kind], embeddings), "user_id": "ana"}


class TestEmbeddedRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return TurnRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return _standard_params("embedded")

    @property
    def retriever_query_example(self) -> str:
        return "when is the flight to Lisbon?"


class TestQdrantRetrieverStandard(TestEmbeddedRetrieverStandard):
    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return _standard_params("qdrant-memory")


def test_outbox_is_settled_only_after_points_are_flushed(
    queued_store: SQLStore, embeddings: SentenceEmbeddings
) -> None:
    outbox = queued_store.outbox()
    seen_at_flush: list[int] = []

    class RecordingIndex(QdrantIndex):
        def flush(self) -> None:
            seen_at_flush.append(outbox.count())

    index = RecordingIndex(QdrantClient(":memory:"))
    index.open()
    store_conversation(queued_store, "trip", "ana", TRIP)
    TurnIndexer(outbox, index, embeddings, batch_size=4, flush_interval=0).drain()
    assert seen_at_flush == [10, 6, 2]  # each batch still queued while it is flushed
    assert outbox.count() == 0
    # With a flush interval, one flush settles every batch at the end of the drain.
    seen_at_flush.clear()
    outbox.enqueue()
    indexer = TurnIndexer(outbox, index, embeddings, batch_size=4, flush_interval=3600)
    assert indexer.drain(settle=False) == 10
    assert seen_at_flush == []
    assert outbox.count() == 10  # embedded, not flushed: still queued
    assert indexer.drain(settle=False) == 0  # ...but not embedded twice
    assert indexer.settle() == 10
    assert seen_at_flush == [10]
    assert outbox.count() == 0


def test_a_long_turn_is_indexed_in_parts_so_a_detail_in_its_middle_is_found(
    queued_store: SQLStore, index: VectorIndex, embeddings: SentenceEmbeddings
) -> None:
    """The model reads 256 word pieces: the middle of a pasted document needs points too."""
    filler = [
        f"Invoice {n} for the office chairs was paid on time and filed under accounting."
        for n in range(120)
    ]
    detail = "The spare key to the boat house hangs behind the blue door of the garage."
    paste = " ".join([*filler[:60], detail, *filler[60:]])
    parts = chunks_of(paste)
    assert len(parts) > 5
    assert sum(detail in part for part in parts) >= 1
    assert all(part.startswith(CUT) for part in parts)
    store_conversation(queued_store, "notes", "ana", [("user", paste), *TRIP[:3]])
    indexer = TurnIndexer(queued_store.outbox(), index, embeddings)
    assert indexer.drain() == 4  # turns, not points
    assert index.count() == 4 + len(parts)
    search = SemanticSearch(index, embeddings)
    hits = search.find("where is the key to the boat house?", VectorFilter(user_id="ana"), 3)
    best = hits[0].payload
    assert (best.conversation_id, best.turn_number) == ("notes", 1)
    assert detail in best.content  # the part that matched, not the start of the paste
    # Purging the conversation removes every part.
    assert queued_store.delete_conversation("notes", user_id="ana")
    indexer.apply_tasks()
    assert index.count() == 0
    assert chunks_of(TRIP[0][1]) == []
