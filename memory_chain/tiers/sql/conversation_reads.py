"""The store's reads of conversations, turns and summaries, by the ids clients use.

:class:`ConversationReads` is part of :class:`~memory_chain.tiers.sql.store.SQLStore`; these
methods live here to keep one concern per module. Every read names its user: a conversation
is found under its stored id (:func:`~memory_chain.tiers.sql.rows.stored_id`), and what it
returns carries the id the client uses.
"""

from __future__ import annotations

from sqlalchemy import func, select

from memory_chain.schemas import ConversationInfo, ConversationStatus, Summary, Turn
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.models import conversations, facts, summaries, turns
from memory_chain.tiers.sql.rows import (
    conversation_from_row,
    stored_id,
    summary_from_row,
    turn_from_row,
)


class ConversationReads:
    """Reads of tier 2, for :class:`SQLStore` (which provides the attribute below)."""

    database: Database

    def get_conversation(self, conversation_id: str, *, user_id: str) -> ConversationInfo | None:
        """A conversation's row, or ``None`` if ``user_id`` has no conversation of that id."""
        key = stored_id(user_id, conversation_id)
        rows = self.database.read(
            select(conversations).where(conversations.c.conversation_id == key)
        )
        return conversation_from_row(rows[0]) if rows else None

    def list_conversations(
        self,
        *,
        user_id: str | None,
        status: ConversationStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[ConversationInfo]:
        """Conversations, most recently active first."""
        statement = select(conversations)
        if user_id is not None:
            statement = statement.where(conversations.c.user_id == user_id)
        if status is not None:
            statement = statement.where(conversations.c.status == status)
        statement = statement.order_by(
            func.coalesce(conversations.c.last_message_at, conversations.c.created_at).desc(),
            conversations.c.id.desc(),
        )
        rows = self.database.read(statement.limit(max(limit, 0)).offset(max(offset, 0)))
        return [conversation_from_row(row) for row in rows]

    def get_turns(
        self,
        conversation_id: str,
        *,
        user_id: str,
        after: int = 0,
        limit: int | None = None,
    ) -> list[Turn]:
        """Turns with number greater than ``after``, oldest first, at most ``limit``."""
        statement = select(turns).where(
            turns.c.conversation_id == stored_id(user_id, conversation_id),
            turns.c.turn_number > after,
        )
        statement = statement.order_by(turns.c.turn_number)
        if limit is not None:
            statement = statement.limit(max(limit, 0))
        return [turn_from_row(row) for row in self.database.read(statement)]

    def recent_turns(self, conversation_id: str, count: int, *, user_id: str) -> list[Turn]:
        """The last ``count`` turns, oldest first."""
        key = stored_id(user_id, conversation_id)
        statement = select(turns).where(turns.c.conversation_id == key)
        statement = statement.order_by(turns.c.turn_number.desc()).limit(max(count, 0))
        return [turn_from_row(row) for row in reversed(self.database.read(statement))]

    def counts(self) -> dict[str, int]:
        """How many conversations, turns, summaries and facts are stored (every user)."""
        with self.database.connect() as conn:
            return {
                table.name: conn.execute(select(func.count()).select_from(table)).scalar_one()
                for table in (conversations, turns, summaries, facts)
            }

    def get_summaries(self, conversation_id: str, *, user_id: str) -> list[Summary]:
        """Every stored range summary, in turn order."""
        key = stored_id(user_id, conversation_id)
        statement = select(summaries).where(summaries.c.conversation_id == key)
        rows = self.database.read(statement.order_by(summaries.c.turn_range_start))
        return [summary_from_row(row) for row in rows]
