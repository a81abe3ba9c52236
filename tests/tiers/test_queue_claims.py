"""Claims on the tier-3 queues: several replicas' backfills on one database.

A "replica" here is its own engine (connection pool), store and indexer on one real database
(PostgreSQL with pgvector where the vectors must be shared; SQLite as well where only the
queues are). Each turn is embedded by one replica, a dead replica's claims expire and another
takes them, a purge cannot be undone by a batch claimed before it (nor a dismissed fact by a
batch that read it as not dismissed, nor a purge by a refresh that a stalled worker finishes
after another took it over), and a forget re-queues a turn another replica is embedding.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from langchain_core.embeddings import Embeddings
from sqlalchemy import Engine, func, select, text

from memory_chain.schemas import NewTurn
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.claims import Claimant
from memory_chain.tiers.sql.models import outbox
from memory_chain.tiers.sql.outbox import EmbeddingOutbox
from memory_chain.tiers.sql.tasks import add_task
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tiers.vectors.index import VectorFilter
from memory_chain.tiers.vectors.indexer import TurnIndexer
from memory_chain.tiers.vectors.pgvector import PgVectorIndex
from tests.conftest import _fresh_postgres_database


class CountedEmbeddings(Embeddings):
    """The real model, counting how often each text is embedded."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.texts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self.lock:
            self.texts.update(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


@dataclass
class Replica:
    engine: Engine
    store: SQLStore
    indexer: TurnIndexer

    @property
    def outbox(self) -> EmbeddingOutbox:
        return self.indexer.outbox


def open_replica(url: str, embeddings: Embeddings, *, lease: float = 30.0) -> Replica:
    engine = create_sql_engine(url)
    upgrade(engine)
    store = SQLStore(engine, queue_embeddings=True)
    index = PgVectorIndex(engine, "conversation_memory", 384)
    index.open()
    outbox_ = store.outbox(claimant=Claimant(lease=lease))
    indexer = TurnIndexer(outbox_, index, embeddings, batch_size=8, flush_interval=0)
    return Replica(engine, store, indexer)


@pytest.fixture
def pg_url(postgres_url: str) -> str:
    return _fresh_postgres_database(postgres_url)


@pytest.fixture
def counted(embeddings: SentenceEmbeddings) -> CountedEmbeddings:
    return CountedEmbeddings(embeddings)


@pytest.fixture
def two(pg_url: str, counted: CountedEmbeddings) -> Iterator[tuple[Replica, Replica]]:
    a, b = open_replica(pg_url, counted), open_replica(pg_url, counted)
    yield a, b
    for replica in (a, b):
        replica.engine.dispose()


def say(store: SQLStore, conversation: str, *texts: str, user: str = "ana") -> None:
    store.append_turns(conversation, [NewTurn("user", t) for t in texts], user_id=user)


def points(engine: Engine, collection: str, conversation: str | None = None) -> list[str]:
    """The contents of a collection's points (of one conversation), sorted."""
    sql = "SELECT content FROM vector_points WHERE collection = :c"
    if conversation is not None:
        sql += " AND conversation_id = :cid"
    with engine.connect() as conn:
        rows = conn.execute(text(sql), {"c": collection, "cid": conversation}).scalars()
        return sorted(rows)


def queued(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(outbox)).scalar_one())


def test_two_replicas_draining_at_once_embed_each_turn_once(
    two: tuple[Replica, Replica], counted: CountedEmbeddings
) -> None:
    a, b = two
    texts = [f"turn {n} of the shared queue" for n in range(120)]
    for start in range(0, len(texts), 10):
        say(a.store, f"c{start // 30}", *texts[start : start + 10])
    done: dict[str, int] = {}

    def drain(name: str, replica: Replica) -> None:
        done[name] = replica.indexer.drain()

    threads = [threading.Thread(target=drain, args=(n, r)) for n, r in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert done["a"] + done["b"] == len(texts)
    assert done["a"] > 0
    assert done["b"] > 0  # both took part: the claims split the queue, not a lock
    assert {t: n for t, n in counted.texts.items() if n != 1} == {}
    assert len(counted.texts) == len(texts)
    assert points(a.engine, "conversation_memory") == sorted(texts)
    assert queued(a.engine) == 0


@pytest.fixture
def both(sql_url: str) -> Iterator[tuple[SQLStore, SQLStore]]:
    engines = [create_sql_engine(sql_url) for _ in range(2)]
    upgrade(engines[0])
    yield SQLStore(engines[0], queue_embeddings=True), SQLStore(engines[1], queue_embeddings=True)
    for engine in engines:
        engine.dispose()


def test_claims_are_disjoint_and_a_dead_workers_expire(both: tuple[SQLStore, SQLStore]) -> None:
    first, second = both
    say(first, "trip", *(f"message {n}" for n in range(6)))
    dead = first.outbox(claimant=Claimant("dead", lease=0.5))
    alive = second.outbox(claimant=Claimant("alive", lease=30))
    taken = dead.claim(4)
    assert [p.turn.turn_number for p in taken] == [1, 2, 3, 4]
    assert [p.turn.turn_number for p in alive.claim(10)] == [5, 6]  # not the dead one's
    time.sleep(0.6)  # the dead worker's lease runs out
    retaken = alive.claim(10, exclude=[5, 6])
    assert [p.turn.turn_number for p in retaken] == [1, 2, 3, 4]
    dead.done(taken)  # a late settle of the old claims removes nothing
    assert dead.count() == 6
    alive.done(retaken)
    assert alive.count() == 2


def test_tasks_of_one_scope_are_claimed_in_the_order_queued(
    both: tuple[SQLStore, SQLStore],
) -> None:
    first, second = both
    for kind, user, conversation in [
        ("refresh", "ana", "trip"),
        ("forget", "ana", "trip"),
        ("forget", "ana", "work"),
        ("forget", "bob", None),
        ("refresh", "bob", "notes"),
    ]:
        turns = (1, 2) if kind == "refresh" else None
        first.database.write(lambda conn: add_task(conn, kind, user, conversation, turns))  # noqa: B023
    a = first.tasks(claimant=Claimant("a"))
    b = second.tasks(claimant=Claimant("b"))
    claimed = [(t.kind, t.user_id, t.conversation_id) for t in a.claim(10)]
    # ana's forget of trip waits for the refresh before it; bob's refresh for the forget of
    # all his conversations.
    assert claimed == [
        ("refresh", "ana", "trip"),
        ("forget", "ana", "work"),
        ("forget", "bob", None),
    ]
    assert b.claim(10) == []  # held, or waiting for an older task of their scope
    assert a.done([task for task in a.pending(10) if task.conversation_id != "work"][:1]) == []
    taken = b.claim(10)
    assert [(t.kind, t.conversation_id) for t in taken] == [("forget", "trip")]
    work = [task for task in a.pending(10) if task.conversation_id == "work"]
    assert b.done([*taken, *work]) == work  # removes only what b holds
    assert [(t.kind, t.conversation_id) for t in a.pending(10)] == [
        ("forget", "work"),
        ("forget", None),
        ("refresh", "notes"),
    ]


def test_a_purge_while_another_replica_embeds_its_turns_is_not_undone(
    two: tuple[Replica, Replica],
) -> None:
    a, b = two
    say(a.store, "secret", "Please remember this: my locker code is 4471.", "The safe is 9931.")
    say(a.store, "kept", "We fly to Lisbon on 3 May.")
    batch = a.outbox.claim(10)  # replica a starts a batch...
    assert {p.turn.conversation_id for p in batch} == {"secret", "kept"}
    assert b.store.delete_conversation("secret", user_id="ana")  # ...b purges one of them
    assert b.indexer.apply_tasks() == 1  # and deletes its points (none yet) at once
    a.indexer.embed_batch(batch)  # a writes the batch after the purge's deletion
    assert len(points(a.engine, "conversation_memory", "secret")) == 2
    assert a.indexer.settle() == 3  # the settle sees the turns gone: forget queued again
    assert [t.kind for t in a.store.tasks().pending()] == ["forget"]
    b.indexer.drain()
    assert points(a.engine, "conversation_memory", "secret") == []
    assert points(a.engine, "conversation_memory", "kept") == ["We fly to Lisbon on 3 May."]
    assert queued(a.engine) == 0


def test_a_forget_requeues_a_turn_another_replica_is_embedding(
    two: tuple[Replica, Replica],
) -> None:
    a, b = two
    say(a.store, "notes", "old words")
    a.indexer.drain()
    assert b.store.delete_conversation("notes", user_id="ana")
    say(b.store, "notes", "new words")  # the same id again: a new conversation
    batch = a.outbox.claim(10)
    a.indexer.embed_batch(batch)  # a writes the new turn's point...
    b.indexer.apply_tasks()  # ...and b's forget deletes the scope and queues it again
    assert points(a.engine, "conversation_memory", "notes") == []
    a.indexer.settle()  # a's claim was cleared by the re-queue: the turn stays queued
    assert queued(a.engine) == 1
    b.indexer.drain()
    assert points(a.engine, "conversation_memory", "notes") == ["new words"]


def test_a_refresh_taken_over_from_a_stalled_worker_cannot_bring_a_purge_back(
    two: tuple[Replica, Replica],
) -> None:
    a, b = two
    say(a.store, "trip", "We fly to Lisbon on 3 May.", "The hotel is near the river.")
    a.indexer.drain()
    a.store.database.write(lambda conn: add_task(conn, "refresh", "ana", "trip", (1, 2)))
    stalled = a.store.tasks(claimant=Claimant("stalled", lease=0.5))
    [refresh] = stalled.claim(10)
    read = list(a.indexer.index.scroll(VectorFilter(user_id="ana", conversation_id="trip")))
    assert len(read) == 2  # the stalled refresh read the points, then stopped past its lease
    time.sleep(0.6)
    assert b.indexer.apply_tasks() == 1  # b takes the refresh over and does it
    assert b.store.delete_conversation("trip", user_id="ana")
    assert b.indexer.apply_tasks() == 1  # the purge's forget
    assert points(a.engine, "conversation_memory", "trip") == []
    a.indexer.index.upsert(read)  # the stalled worker writes the points back...
    assert stalled.done([refresh]) == [refresh]  # ...finds its claim lost: forget again
    b.indexer.drain()
    assert points(a.engine, "conversation_memory", "trip") == []
