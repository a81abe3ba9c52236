"""Tier 2: the SQL store, source of truth for every turn and summary.

Writes are write-through and atomic: one :meth:`SQLStore.append_turns` call is one
transaction that numbers its turns after the conversation's stored ``turn_count`` while holding
the conversation's lock (``BEGIN IMMEDIATE`` on SQLite, ``SELECT ... FOR UPDATE`` on
PostgreSQL), so concurrent writers to one conversation get contiguous, unique turn numbers.
Input is validated before the transaction starts: a bad batch changes nothing.

Conversation ids are each user's own: every method that names a conversation takes its
``user_id``, and the row is stored under ``"<user_id>/<conversation_id>"``
(:func:`~memory_chain.tiers.sql.rows.stored_id`), so one user's choice of id neither blocks
nor reveals another's. Everything returned carries the id the client uses. The methods block,
like the engine under them: async callers run them in a worker thread.

Example:
    >>> from memory_chain.schemas import NewTurn
    >>> from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
    >>> engine = create_sql_engine("sqlite:////tmp/mc-store-example.db")
    >>> upgrade(engine)
    >>> store = SQLStore(engine)
    >>> turns = store.append_turns("conv-1", [NewTurn("user", "What is FastAPI?")])
    >>> turns[0].turn_number >= 1
    True
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, Executable, bindparam, insert, select, update

from memory_chain.config import DEFAULT_USER_ID
from memory_chain.errors import (
    ConversationNotFoundError,
    InvalidInputError,
    StorageConflictError,
)
from memory_chain.schemas import (
    NewTurn,
    Summary,
    Turn,
    as_utc,
    utcnow,
    validate_id,
    validate_new_turns,
)
from memory_chain.tiers.sql.claims import Claimant
from memory_chain.tiers.sql.conversation_reads import ConversationReads
from memory_chain.tiers.sql.database import Database, dialect_insert
from memory_chain.tiers.sql.keywords import KeywordSearch
from memory_chain.tiers.sql.lifecycle import STATUS_TTL, ConversationLifecycle
from memory_chain.tiers.sql.models import conversations, summaries, turns
from memory_chain.tiers.sql.outbox import EmbeddingOutbox, enqueue_range
from memory_chain.tiers.sql.rows import naive_utc, stored_id, turn_values
from memory_chain.tiers.sql.tasks import VectorTasks, add_task
from memory_chain.tiers.sql.term_stats import ScopeStats, TermStats, TTLCache


@dataclass(frozen=True, slots=True)
class _AppendStatements:
    """The statements of :meth:`SQLStore.append_turns`, built once per dialect.

    Built with bind parameters so that a write does not construct (and coerce, and compute the
    cache key of) five statements every time: that was half of an append's Python time.
    """

    create: Executable
    lock: Executable
    add_turns: Executable
    count: Executable


@cache
def _append_statements(dialect: str) -> _AppendStatements:
    this = conversations.c.conversation_id == bindparam("cid")
    create = (
        dialect_insert(dialect)(conversations)
        .values(
            conversation_id=bindparam("cid"),
            user_id=bindparam("uid"),
            created_at=bindparam("now"),
            turn_count=0,
            total_tokens=0,
            status="active",
        )
        .on_conflict_do_nothing(index_elements=["conversation_id"])
    )
    lock = (
        select(conversations.c.user_id, conversations.c.turn_count, conversations.c.total_tokens)
        .where(this)
        .with_for_update()
    )
    count = (
        update(conversations)
        .where(this)
        .values(
            turn_count=bindparam("new_turn_count"),
            total_tokens=bindparam("new_total_tokens"),
            last_message_at=bindparam("new_last_message_at"),
        )
    )
    return _AppendStatements(create, lock, insert(turns), count)


class SQLStore(ConversationReads, ConversationLifecycle, KeywordSearch):
    """Tier 2 over a SQLAlchemy engine (SQLite or PostgreSQL).

    The reads of conversations, turns and summaries are in
    :class:`~memory_chain.tiers.sql.conversation_reads.ConversationReads`; archiving, purging
    and the checks retrieval makes against them in
    :class:`~memory_chain.tiers.sql.lifecycle.ConversationLifecycle`, keyword search in
    :class:`~memory_chain.tiers.sql.keywords.KeywordSearch`. Transactions run through the
    store's :class:`~memory_chain.tiers.sql.database.Database`; the tier-3 queues kept beside
    the turns are :meth:`outbox` and :meth:`tasks`.

    The schema must exist: run :func:`memory_chain.tiers.sql.migrate.upgrade` first.

    Args:
        engine: From :func:`memory_chain.tiers.sql.engine.create_sql_engine`.
        max_message_chars: Longest accepted turn content.
        queue_embeddings: Add every new turn to the embedding outbox (tier 3 is on).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        max_message_chars: int = 200_000,
        queue_embeddings: bool = False,
    ) -> None:
        self.database = Database(engine)
        self.queue_embeddings = queue_embeddings
        self._max_chars = max_message_chars
        self._fts: bool | None = None
        self._term_stats = TermStats()
        self._scope_stats = ScopeStats()
        self.statuses: TTLCache[int] = TTLCache(ttl=STATUS_TTL, size=8_192, clock=time.monotonic)

    # -- writes -------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for reads that take an engine: export, progress)."""
        return self.database.engine

    def outbox(self, *, claimant: Claimant | None = None) -> EmbeddingOutbox:
        """The queue of this store's turns still to embed (see :mod:`.outbox`)."""
        return EmbeddingOutbox(self.database, claimant=claimant)

    def tasks(self, *, claimant: Claimant | None = None) -> VectorTasks:
        """The queue of changes tier 3 must still make (see :mod:`.tasks`)."""
        return VectorTasks(self.database, claimant=claimant)

    def _lock_conversation(
        self, conn: Connection, conversation_id: str, user_id: str, now: datetime
    ) -> Any:
        """Create the conversation if needed and lock its row for this transaction."""
        statements = _append_statements(self.database.dialect)
        key = stored_id(user_id, conversation_id)
        conn.execute(statements.create, {"cid": key, "uid": user_id, "now": now})
        row = conn.execute(statements.lock, {"cid": key}).one()
        if row.user_id != user_id:  # pragma: no cover - the stored id names its owner
            raise ConversationNotFoundError(conversation_id)
        return row

    def try_lock(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """A lock across processes, for work one replica at a time does (see :mod:`.locks`).

        ``with store.try_lock("consolidation:c1") as held:`` holds it for the block when
        ``held`` is True; False means another process holds it. Always held on SQLite.
        """
        return self.database.try_lock(name)

    def append_turns(
        self,
        conversation_id: str,
        new_turns: Sequence[NewTurn],
        *,
        user_id: str = DEFAULT_USER_ID,
    ) -> list[Turn]:
        """Store turns at the end of a conversation, creating it if needed.

        Args:
            conversation_id: The conversation.
            new_turns: Turns in order; each gets the next turn number.
            user_id: Owner of the conversation.

        Returns:
            The stored turns with their turn numbers and timestamps.

        Raises:
            InvalidInputError: If an id or a turn is malformed (nothing is stored).
            ConversationNotFoundError: If the conversation belongs to another user.
            StorageError: If the database fails.
        """
        validate_id(conversation_id)
        validate_id(user_id, "user id")
        validate_new_turns(new_turns, max_chars=self._max_chars)
        now = utcnow()

        key = stored_id(user_id, conversation_id)

        def work(conn: Connection) -> list[Turn]:
            state = self._lock_conversation(conn, conversation_id, user_id, now)
            first = (state.turn_count or 0) + 1
            stored = [
                Turn(
                    conversation_id=conversation_id,
                    turn_number=first + offset,
                    role=turn.role,
                    content=turn.content,
                    timestamp=as_utc(turn.timestamp) if turn.timestamp else now,
                    tokens=turn.tokens,
                )
                for offset, turn in enumerate(new_turns)
            ]
            statements = _append_statements(self.database.dialect)
            conn.execute(statements.add_turns, [turn_values(key, turn) for turn in stored])
            conn.execute(
                statements.count,
                {
                    "cid": key,
                    "new_turn_count": stored[-1].turn_number,
                    "new_total_tokens": (state.total_tokens or 0)
                    + sum(turn.content_tokens for turn in stored),
                    "new_last_message_at": naive_utc(max(turn.timestamp for turn in stored)),
                },
            )
            if self.queue_embeddings:
                enqueue_range(conn, key, first, stored[-1].turn_number)
            return stored

        return self.database.write(work)

    def add_summary(
        self,
        conversation_id: str,
        summary_text: str,
        turn_range: tuple[int, int],
        *,
        token_count: int | None = None,
        running_summary: str | None = None,
        user_id: str,
        dated: datetime | None = None,
    ) -> Summary | None:
        """Store the summary of a turn range, and optionally the new running summary.

        Both are written in one transaction. A range whose start is already summarized is
        not written again (consolidation is idempotent).

        Args:
            conversation_id: The conversation.
            summary_text: The summary of turns ``turn_range[0]..turn_range[1]``.
            turn_range: First and last turn number, inclusive.
            token_count: Tokens of the summary.
            running_summary: New value of ``conversations.summary``.
            user_id: The conversation's owner.
            dated: The summary's time (``created_at``): when what it covers was said (its
                last turn's time), so that a summary of imported history is as old as the
                history; default now.

        Returns:
            The stored summary, or ``None`` if the range was already summarized.

        Raises:
            InvalidInputError: On an empty summary or an invalid range.
            ConversationNotFoundError: If the conversation does not exist (for the user).
        """
        start, end = turn_range
        if not summary_text.strip():
            raise InvalidInputError("summary is empty: nothing to store")
        if "\x00" in summary_text or (running_summary and "\x00" in running_summary):
            raise InvalidInputError("summary contains a NUL character: remove it")
        if not 1 <= start <= end:
            raise InvalidInputError(f"invalid turn range {turn_range}: need 1 <= start <= end")
        now = as_utc(dated) if dated is not None else utcnow()
        key = stored_id(user_id, conversation_id)

        def work(conn: Connection) -> Summary | None:
            row = conn.execute(
                select(conversations.c.user_id, conversations.c.turn_count)
                .where(conversations.c.conversation_id == key)
                .with_for_update()
            ).first()
            if row is None:
                raise ConversationNotFoundError(conversation_id)
            if end > (row.turn_count or 0):
                raise InvalidInputError(
                    f"turn range {turn_range} goes past the last stored turn "
                    f"({row.turn_count or 0})"
                )
            inserted = conn.execute(
                self.database.insert(summaries)
                .values(
                    conversation_id=key,
                    summary_text=summary_text,
                    turn_range_start=start,
                    turn_range_end=end,
                    created_at=now,
                    token_count=token_count,
                )
                .on_conflict_do_nothing(index_elements=["conversation_id", "turn_range_start"])
                .returning(summaries.c.id)
            ).first()
            if inserted is None:
                return None
            if self.queue_embeddings:
                # The range's points carry its summary: rewrite their payloads.
                add_task(conn, "refresh", user_id, conversation_id, (start, end))
            if running_summary is not None:
                conn.execute(
                    update(conversations)
                    .where(conversations.c.conversation_id == key)
                    .values(summary=running_summary)
                )
            return Summary(conversation_id, summary_text, start, end, now, token_count)

        try:
            result = self.database.write(work)
        except StorageConflictError:  # a concurrent writer stored the same range first
            return None
        return result
