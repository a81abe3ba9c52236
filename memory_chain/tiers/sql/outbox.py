"""The embedding outbox: which stored turns still need to be embedded into tier 3.

:class:`SQLStore` adds a turn to the outbox in the transaction that stores it (when created
with ``queue_embeddings=True``); the tier-3 indexer takes batches from it and removes them
once their points are stored. A turn is embedded exactly when it is not in the outbox.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from sqlalchemy import (
    TIMESTAMP,
    Connection,
    Executable,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
)

from memory_chain.schemas import Turn, utcnow
from memory_chain.tiers.sql.models import (
    conversations,
    dismissed_facts,
    outbox,
    summaries,
    turns,
)
from memory_chain.tiers.sql.rows import (
    conversation_scope,
    naive_utc,
    storage_errors,
    turn_from_row,
)

if TYPE_CHECKING:
    from memory_chain.tiers.sql.store import SQLStore


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """A turn waiting for tier 3, with its owner.

    Attributes:
        turn_id: The turn's row id (its place in the outbox).
        user_id: The conversation's owner.
        turn: The turn.
        summary: The summary of the range the turn is in, once one is stored.
        fact_dismissed: The user asked to forget this turn as a fact.
    """

    turn_id: int
    user_id: str
    turn: Turn
    summary: str | None = None
    fact_dismissed: bool = False


@cache
def _enqueue_statement() -> Executable:
    # Built once, with bind parameters: it runs in every write transaction.
    chosen = select(turns.c.id, bindparam("enqueued_at", type_=TIMESTAMP)).where(
        turns.c.conversation_id == bindparam("cid"),
        turns.c.turn_number.between(bindparam("first"), bindparam("last")),
    )
    return insert(outbox).from_select(["turn_id", "enqueued_at"], chosen)


def enqueue_range(conn: Connection, stored: str, first: int, last: int) -> None:
    """Queue turns ``first..last`` of a conversation by its stored id (inside a transaction)."""
    parameters = {
        "cid": stored,
        "first": first,
        "last": last,
        "enqueued_at": naive_utc(utcnow()),
    }
    conn.execute(_enqueue_statement(), parameters)


class EmbeddingOutbox:
    """Reads and settles the outbox of a :class:`SQLStore`.

    Args:
        store: The tier-2 store whose turns are queued.
    """

    def __init__(self, store: SQLStore) -> None:
        self.store = store

    def pending(self, limit: int, *, exclude: Collection[int] = ()) -> list[PendingTurn]:
        """The oldest ``limit`` queued turns, leaving out the turn ids in ``exclude``."""
        covering = and_(
            summaries.c.conversation_id == turns.c.conversation_id,
            turns.c.turn_number.between(summaries.c.turn_range_start, summaries.c.turn_range_end),
        )
        dismissed = and_(
            dismissed_facts.c.conversation_id == turns.c.conversation_id,
            dismissed_facts.c.turn_number == turns.c.turn_number,
        )
        statement = (
            select(
                turns,
                conversations.c.user_id.label("owner"),
                summaries.c.summary_text.label("range_summary"),
                dismissed_facts.c.turn_number.label("dismissed"),
            )
            .join(outbox, outbox.c.turn_id == turns.c.id)
            .join(conversations, conversations.c.conversation_id == turns.c.conversation_id)
            .outerjoin(summaries, covering)
            .outerjoin(dismissed_facts, dismissed)
            .order_by(outbox.c.turn_id)
            .limit(max(limit, 0))
        )
        if exclude:
            statement = statement.where(outbox.c.turn_id.not_in(list(exclude)))
        with storage_errors(), self.store.engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [
            PendingTurn(
                row.id,
                row.owner or "",
                turn_from_row(row),
                summary=row.range_summary,
                fact_dismissed=row.dismissed is not None,
            )
            for row in rows
        ]

    def done(self, turn_ids: Sequence[int]) -> None:
        """Remove turns whose points are stored."""
        if not turn_ids:
            return
        self.store.run_write(
            lambda conn: conn.execute(delete(outbox).where(outbox.c.turn_id.in_(list(turn_ids))))
        )

    def enqueue(self, *, user_id: str | None = None, conversation_id: str | None = None) -> int:
        """Queue every stored turn (of a user, a conversation, or both) again, e.g. to reindex.

        A conversation id without a user queues that conversation of every user.

        Returns:
            How many turns were added (turns already queued are not counted).
        """

        def work(conn: Connection) -> int:
            chosen = select(turns.c.id).where(
                ~exists().where(outbox.c.turn_id == turns.c.id),
                *conversation_scope(turns.c.conversation_id, user_id, conversation_id),
            )
            before = conn.execute(select(func.count()).select_from(outbox)).scalar_one()
            conn.execute(insert(outbox).from_select(["turn_id"], chosen))
            after = conn.execute(select(func.count()).select_from(outbox)).scalar_one()
            return int(after - before)

        added: int = self.store.run_write(work)
        return added

    def count(self) -> int:
        """How many turns are waiting."""
        with storage_errors(), self.store.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(outbox)).scalar_one())
