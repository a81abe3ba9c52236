"""The tier-3 task queue: what the vector store must still do besides embedding new turns.

Tier 2 is the source of truth and tier 3 an index of it, so every change to tier 3 is first
written to tier 2, in the transaction that makes it necessary, and done by the backfill
afterwards (``TurnIndexer.apply_tasks``), exactly as the embedding outbox does for new turns:

* ``forget``: a purged conversation (or every conversation of a user) must leave the vector
  store, its turns' points and its user facts; written with the purge. A vector store that
  is down delays the deletion, never loses it; meanwhile retrieval hides the conversation by
  its tier-2 row, which is gone at once.
* ``forget_fact``: one "remember this" turn is no longer a fact (``DELETE /v1/facts/{id}``).
* ``refresh``: the payloads of a turn range changed (its summary was stored); written with
  the summary.

A task is removed only once the vector store has done it. Its interface is deliberately small
(:meth:`VectorTasks.pending`, :meth:`VectorTasks.done`): a claim for several workers (a lease
column, or ``FOR UPDATE SKIP LOCKED`` on PostgreSQL) can be added behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from sqlalchemy import Connection, delete, func, insert, select

from memory_chain.schemas import utcnow
from memory_chain.tiers.sql.models import vector_tasks
from memory_chain.tiers.sql.rows import naive_utc, storage_errors

if TYPE_CHECKING:
    from memory_chain.tiers.sql.store import SQLStore

TaskKind = Literal["forget", "forget_fact", "refresh"]
KINDS: frozenset[str] = frozenset({"forget", "forget_fact", "refresh"})


@dataclass(frozen=True, slots=True)
class VectorTask:
    """One queued change to tier 3.

    Attributes:
        id: The task's row id (the order tasks are done in).
        kind: ``"forget"``, ``"forget_fact"`` or ``"refresh"``.
        user_id: Whose points.
        conversation_id: Which conversation (``None`` for a ``forget`` of every one of the
            user's conversations).
        turns: First and last turn number (``forget_fact``: the fact's turn twice;
            ``refresh``: the range), else ``None``.
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


class VectorTasks:
    """Reads and settles the task queue of a :class:`SQLStore`.

    Args:
        store: The tier-2 store whose changes are queued.
    """

    def __init__(self, store: SQLStore) -> None:
        self.store = store

    def pending(self, limit: int = 100) -> list[VectorTask]:
        """The oldest ``limit`` tasks, in the order they were queued."""
        statement = select(vector_tasks).order_by(vector_tasks.c.id).limit(max(limit, 0))
        with storage_errors(), self.store.engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [
            VectorTask(
                id=row.id,
                kind=cast(TaskKind, row.kind),
                user_id=row.user_id,
                conversation_id=row.conversation_id,
                turns=(row.first_turn, row.last_turn) if row.first_turn is not None else None,
            )
            for row in rows
            if row.kind in KINDS
        ]

    def done(self, task_ids: Sequence[int]) -> None:
        """Remove tasks the vector store has done."""
        if task_ids:
            ids = list(task_ids)
            self.store.run_write(
                lambda conn: conn.execute(delete(vector_tasks).where(vector_tasks.c.id.in_(ids)))
            )

    def summaries(self, user_id: str, conversation_id: str) -> list[tuple[int, int, str]]:
        """``(first turn, last turn, summary)`` of a conversation's summarized ranges."""
        stored = self.store.get_summaries(conversation_id, user_id=user_id)
        return [(s.turn_range_start, s.turn_range_end, s.summary_text) for s in stored]

    def count(self) -> int:
        """How many tasks are waiting."""
        statement = select(func.count()).select_from(vector_tasks)
        with storage_errors(), self.store.engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())
