"""The embedding outbox: which stored turns still need to be embedded into tier 3.

:class:`~memory_chain.tiers.sql.store.SQLStore` adds a turn to the outbox in the transaction
that stores it (when created with ``queue_embeddings=True``; ``store.outbox()`` is this
module's :class:`EmbeddingOutbox` over the store's database); the tier-3 indexer claims batches
from it (one worker at a time per turn, across replicas: :mod:`.claims`) and removes them once
their points are stored. A turn is embedded exactly when it is not in the outbox.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

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
    update,
)

from memory_chain.schemas import Turn, utcnow
from memory_chain.tiers.sql.claims import UNCLAIMED, Claimant, claim_ids, held_by
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.models import (
    conversations,
    outbox,
    summaries,
    turns,
)
from memory_chain.tiers.sql.rows import (
    conversation_scope,
    naive_utc,
    turn_from_row,
)
from memory_chain.tiers.sql.tasks import add_task

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """A turn waiting for tier 3, with its owner.

    Attributes:
        turn_id: The turn's row id (its place in the outbox).
        user_id: The conversation's owner.
        turn: The turn.
        summary: The summary of the range the turn is in, once one is stored.
    """

    turn_id: int
    user_id: str
    turn: Turn
    summary: str | None = None


@cache
def _enqueue_statement() -> Executable:
    # Built once, with bind parameters: it runs in every write transaction.
    chosen = select(turns.c.id, bindparam("enqueued_at", type_=TIMESTAMP)).where(
        turns.c.conversation_id == bindparam("cid"),
        turns.c.turn_number.between(bindparam("first"), bindparam("last")),
    )
    return insert(outbox).from_select(["turn_id", "enqueued_at"], chosen)


@cache
def _pending_statement() -> Executable:
    """The claimed turns with their owner and their range's summary."""
    covering = and_(
        summaries.c.conversation_id == turns.c.conversation_id,
        turns.c.turn_number.between(summaries.c.turn_range_start, summaries.c.turn_range_end),
    )
    return (
        select(
            turns,
            conversations.c.user_id.label("owner"),
            summaries.c.summary_text.label("range_summary"),
        )
        .join(conversations, conversations.c.conversation_id == turns.c.conversation_id)
        .outerjoin(summaries, covering)
        .where(turns.c.id.in_(bindparam("ids", expanding=True)))
        .order_by(turns.c.id)
    )


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
    """Claims and settles the embedding outbox of a tier-2 database.

    Several workers (one per replica, the command line's ``reindex``) may work on one outbox:
    each takes turns with a claim (:mod:`.claims`), so a queued turn is embedded by one worker
    at a time, and one that dies leaves its turns to another once its claims expire.

    Args:
        database: The tier-2 database whose turns are queued.
        claimant: Who this worker is and how long its claims last (a new worker id by
            default).
    """

    def __init__(self, database: Database, *, claimant: Claimant | None = None) -> None:
        self.database = database
        self.claimant = claimant if claimant is not None else Claimant()

    def claim(self, limit: int, *, exclude: Collection[int] = ()) -> list[PendingTurn]:
        """Claim the oldest ``limit`` queued turns nobody else holds, leaving out ``exclude``.

        Args:
            limit: Most turns to claim.
            exclude: Turn ids this worker holds and is still working on.

        Returns:
            The claimed turns, oldest first.
        """

        def work(conn: Connection) -> list[Any]:
            ids = claim_ids(conn, outbox, self.claimant, limit, exclude=exclude)
            if not ids:
                return []
            return list(conn.execute(_pending_statement(), {"ids": ids}).all())

        rows = self.database.write(work)
        return [
            PendingTurn(
                row.id,
                row.owner or "",
                turn_from_row(row),
                summary=row.range_summary,
            )
            for row in rows
        ]

    def done(self, batch: Sequence[PendingTurn]) -> list[tuple[str, str]]:
        """Remove turns whose points are stored, and undo what a purge meanwhile made stale.

        Only turns this worker still holds are removed: a turn queued again while it was
        being embedded (a ``forget`` re-queues its conversation) stays queued. A turn no
        longer stored was purged while its batch was embedded, and its points may
        have been written after the purge's own deletion ran (on another replica): a
        ``forget`` of its conversation is queued in the same transaction, which deletes
        them again (and re-queues whatever the conversation holds by then). Read after the
        points were written, the check cannot miss a purge that the deletion preceded.

        Returns:
            ``(user_id, conversation_id)`` of the conversations purged meanwhile.
        """
        if not batch:
            return []
        ids = [pending.turn_id for pending in batch]

        def work(conn: Connection) -> list[tuple[str, str]]:
            conn.execute(
                delete(outbox).where(outbox.c.turn_id.in_(ids), held_by(outbox, self.claimant))
            )
            stored = set(conn.execute(select(turns.c.id).where(turns.c.id.in_(ids))).scalars())
            gone = sorted(
                {(p.user_id, p.turn.conversation_id) for p in batch if p.turn_id not in stored}
            )
            for user_id, conversation_id in gone:
                add_task(conn, "forget", user_id, conversation_id)
            return gone

        gone = self.database.write(work)
        if gone:
            logger.info(
                "tier 3: %d conversations purged while embedded, forgotten again", len(gone)
            )
        return gone

    def enqueue(self, *, user_id: str | None = None, conversation_id: str | None = None) -> int:
        """Queue every stored turn (of a user, a conversation, or both) again, e.g. to reindex.

        A conversation id without a user queues that conversation of every user. Turns in
        scope that are queued already lose their claims: a worker embedding one now does
        not settle it, and it is embedded again after this call (a ``forget`` deletes the
        points of its scope, then queues the scope, so a point written by a batch in flight
        is written again).

        Returns:
            How many turns were added (turns already queued are not counted).
        """
        scope = conversation_scope(turns.c.conversation_id, user_id, conversation_id)

        def work(conn: Connection) -> int:
            in_scope = select(turns.c.id).where(*scope)
            conn.execute(
                update(outbox)
                .where(outbox.c.turn_id.in_(in_scope), outbox.c.claimed_by.is_not(None))
                .values(UNCLAIMED)
            )
            chosen = select(turns.c.id).where(
                ~exists().where(outbox.c.turn_id == turns.c.id), *scope
            )
            # Another worker may queue the same turns at once (two forgets of one scope).
            added = conn.execute(
                self.database.insert(outbox)
                .from_select(["turn_id"], chosen)
                .on_conflict_do_nothing()
            )
            return max(int(added.rowcount), 0)

        return self.database.write(work)

    def count(self) -> int:
        """How many turns are waiting."""
        with self.database.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(outbox)).scalar_one())
