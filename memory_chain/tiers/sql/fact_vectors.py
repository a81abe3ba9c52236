"""Facts stored without a vector, embedded in the background rather than in a chat request.

A fact is stored without a vector when no embedding model answered as it was added, and
when it is imported (an import writes SQL only). Such facts are found by a partial index
(``idx_facts_unembedded``, migration 0015) and embedded a batch at a time by
:func:`embed_pending`, which the tier-3 backfill thread runs after each drain of the turns'
outbox (:class:`~memory_chain.tiers.vectors.worker.BackfillWorker`'s ``chores``). Until then
a chat turn ranks them after the scored facts, newest first; a request never waits for them.

One process at a time embeds them (a skipping lock, ``facts:embedding``: replicas do not
embed the same facts twice). A vector is written only if the fact still has the text that
was embedded and no vector, in a transaction holding its user's lock, like every change of
the user's facts; it changes the user's fact version, so every process ranks by it at its
next read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from sqlalchemy import Connection, select, update

from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.fact_writes import facts_lock, vector_bytes
from memory_chain.tiers.sql.models import facts

#: Facts embedded per call (one batch of the embedding model).
EMBED_BATCH = 64
#: The lock one process at a time holds while embedding facts.
EMBEDDING_LOCK = "facts:embedding"


def embed_pending(
    database: Database,
    embed: Callable[[list[str]], list[list[float]]],
    *,
    batch: int = EMBED_BATCH,
) -> int:
    """Embed up to ``batch`` current facts stored without a vector (any user's).

    Returns:
        How many facts were embedded (0: none waits, or another process is embedding).

    Raises:
        MemoryChainError: If the model fails (the facts wait for the next call).
        StorageError: If the database fails.
    """
    with database.try_lock(EMBEDDING_LOCK) as held:
        if not held:
            return 0
        rows = database.read(
            select(facts.c.id, facts.c.user_id, facts.c.text)
            .where(facts.c.status == "current", facts.c.embedding.is_(None))
            .limit(batch)
        )
        if not rows:
            return 0
        vectors = embed([row.text for row in rows])
        by_user: dict[str, list[tuple[str, str, bytes]]] = defaultdict(list)
        for row, vector in zip(rows, vectors, strict=True):
            by_user[row.user_id].append((row.id, row.text, vector_bytes(vector)))
        for user_id, embedded in by_user.items():
            database.write(_writer(embedded), locks=[facts_lock(user_id)])
        return len(rows)


def _writer(embedded: list[tuple[str, str, bytes]]) -> Callable[[Connection], None]:
    def work(conn: Connection) -> None:
        for fact_id, text, blob in embedded:
            conn.execute(
                update(facts)
                .where(facts.c.id == fact_id, facts.c.text == text, facts.c.embedding.is_(None))
                .values(embedding=blob)
            )

    return work
