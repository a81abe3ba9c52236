"""The tier-3 task queue: what the vector store must still do besides embedding new turns.

Tier 2 is the source of truth and tier 3 an index of it, so every change to tier 3 is first
written to tier 2, in the transaction that makes it necessary, and done by the backfill
afterwards (``TurnIndexer.apply_tasks``), exactly as the embedding outbox does for new turns:

* ``forget``: a purged conversation (or every conversation of a user) must leave the vector
  store, its turns' points; written with the purge. A vector store that
  is down delays the deletion, never loses it; meanwhile retrieval hides the conversation by
  its tier-2 row, which is gone at once.
* ``refresh``: the payloads of a turn range changed (its summary was stored); written with
  the summary.

A task is removed only once the vector store has done it. Several workers (one per replica)
share the queue: each claims the tasks it does (:mod:`.claims`), so a task is done by one
worker at a time, and tasks of one conversation are done in the order they were queued (a
task is claimed only once no older task of an overlapping scope is left): a refresh that
read a conversation's points before it was purged writes them back before the purge's
``forget`` runs, never after.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from sqlalchemy import Connection, delete, exists, func, insert, or_, select

from memory_chain.schemas import utcnow
from memory_chain.tiers.sql.claims import Claimant, claim_ids, held_by
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.models import summaries, vector_tasks
from memory_chain.tiers.sql.rows import naive_utc, stored_id

logger = logging.getLogger(__name__)

TaskKind = Literal["forget", "refresh"]
KINDS: frozenset[str] = frozenset({"forget", "refresh"})


@dataclass(frozen=True, slots=True)
class VectorTask:
    """One queued change to tier 3.

    Attributes:
        id: The task's row id (the order tasks are done in).
        kind: ``"forget"`` or ``"refresh"``.
        user_id: Whose points.
        conversation_id: Which conversation (``None`` for a ``forget`` of every one of the
            user's conversations).
        turns: First and last turn number of a ``refresh``, else ``None``.
    """

    id: int
    kind: TaskKind
    user_id: str
    conversation_id: str | None
    turns: tuple[int, int] | None


def add_task(
    conn: Connection,
    kind: TaskKind,
    user_id: str,
    conversation_id: str | None = None,
    turns: tuple[int, int] | None = None,
) -> None:
    """Queue a task inside the caller's transaction (it commits with the change)."""
    if kind not in KINDS:
        raise ValueError(f"unknown tier-3 task {kind!r}: use one of {sorted(KINDS)}")
    conn.execute(
        insert(vector_tasks).values(
            kind=kind,
            user_id=user_id,
            conversation_id=conversation_id,
            first_turn=turns[0] if turns else None,
            last_turn=turns[1] if turns else None,
            created_at=naive_utc(utcnow()),
        )
    )


def _task(row: Any) -> VectorTask:
    return VectorTask(
        id=row.id,
        kind=cast(TaskKind, row.kind),
        user_id=row.user_id,
        conversation_id=row.conversation_id,
        turns=(row.first_turn, row.last_turn) if row.first_turn is not None else None,
    )


def _no_older_task() -> Any:
    """No older task of an overlapping scope is queued.

    Scopes overlap for one user when both name the same conversation or either covers every
    conversation. Kinds this version does not know (queued by a newer one) neither block nor
    get claimed.
    """
    older = vector_tasks.alias("older")
    task = vector_tasks.c
    return ~exists().where(
        older.c.id < task.id,
        older.c.user_id == task.user_id,
        or_(
            older.c.conversation_id.is_(None),
            task.conversation_id.is_(None),
            older.c.conversation_id == task.conversation_id,
        ),
        older.c.kind.in_(sorted(KINDS)),
    )


class VectorTasks:
    """Reads, claims and settles the tier-3 task queue of a tier-2 database.

    Args:
        database: The tier-2 database whose changes are queued.
        claimant: Who this worker is and how long its claims last (a new worker id by
            default; the indexer shares its outbox's).
    """

    def __init__(self, database: Database, *, claimant: Claimant | None = None) -> None:
        self.database = database
        self.claimant = claimant if claimant is not None else Claimant()

    def pending(self, limit: int = 100) -> list[VectorTask]:
        """The oldest ``limit`` tasks, in the order they were queued (claimed or not)."""
        statement = select(vector_tasks).order_by(vector_tasks.c.id).limit(max(limit, 0))
        with self.database.connect() as conn:
            rows = conn.execute(statement).all()
        return [_task(row) for row in rows if row.kind in KINDS]

    def claim(self, limit: int = 100) -> list[VectorTask]:
        """Claim up to ``limit`` tasks nobody else holds, oldest first.

        A task is claimed only once no older task of its scope is left (see the module's
        docstring).
        """

        def work(conn: Connection) -> list[Any]:
            known = vector_tasks.c.kind.in_(sorted(KINDS))
            ids = claim_ids(
                conn, vector_tasks, self.claimant, limit, where=[known, _no_older_task()]
            )
            if not ids:
                return []
            chosen = select(vector_tasks).where(vector_tasks.c.id.in_(ids))
            return list(conn.execute(chosen.order_by(vector_tasks.c.id)).all())

        rows = self.database.write(work)
        return [_task(row) for row in rows if row.kind in KINDS]

    def done(self, tasks: Sequence[VectorTask]) -> list[VectorTask]:
        """Remove tasks the vector store has done (those this worker still holds).

        A task whose claim was lost meanwhile (this worker stalled past its lease, and
        another took the task) stays for its holder. If it was a ``refresh``, the points it
        wrote back may have come after a ``forget`` of the conversation that ran once the
        other worker had done the refresh: a ``forget`` of the conversation is queued again
        in the same transaction (it deletes the points and re-queues the turns still
        stored), so a stalled worker cannot bring a purged conversation's points back.

        Returns:
            The tasks whose claim was lost.
        """
        if not tasks:
            return []
        key = vector_tasks.c.id
        ids = [task.id for task in tasks]

        def work(conn: Connection) -> list[VectorTask]:
            mine = select(key).where(key.in_(ids), held_by(vector_tasks, self.claimant))
            held = set(conn.execute(mine.with_for_update()).scalars())
            if held:
                conn.execute(delete(vector_tasks).where(key.in_(sorted(held))))
            lost = [task for task in tasks if task.id not in held]
            for task in lost:
                if task.kind == "refresh":
                    add_task(conn, "forget", task.user_id, task.conversation_id)
            return lost

        lost = self.database.write(work)
        if lost:
            logger.warning(
                "tier 3: %d tasks were taken over by another worker before they were "
                "settled (a stall longer than the %.0f s lease)",
                len(lost),
                self.claimant.lease,
            )
        return lost

    def summaries(self, user_id: str, conversation_id: str) -> list[tuple[int, int, str]]:
        """``(first turn, last turn, summary)`` of a conversation's summarized ranges."""
        columns = summaries.c
        statement = (
            select(columns.turn_range_start, columns.turn_range_end, columns.summary_text)
            .where(columns.conversation_id == stored_id(user_id, conversation_id))
            .order_by(columns.turn_range_start)
        )
        return [(row[0], row[1], row[2]) for row in self.database.read(statement)]

    def count(self) -> int:
        """How many tasks are waiting."""
        statement = select(func.count()).select_from(vector_tasks)
        with self.database.connect() as conn:
            return int(conn.execute(statement).scalar_one())
