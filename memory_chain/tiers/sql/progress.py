"""How far a conversation has come: its turns, its summarized ranges, and the backlog."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Executable, Subquery, bindparam, func, select

from memory_chain.schemas import as_utc
from memory_chain.tiers.sql.models import conversations, summaries
from memory_chain.tiers.sql.rows import client_id, naive_utc, storage_errors, stored_id
from memory_chain.tiers.sql.store import SQLStore


@dataclass(frozen=True, slots=True)
class Backlog:
    """A conversation with turns that no summary covers yet."""

    conversation_id: str
    user_id: str
    summarized_through: int
    turn_count: int
    last_message_at: datetime | None


def covered() -> Subquery:
    """Per stored conversation id, the last turn a summary covers (``covered``).

    What "consolidated through" means everywhere: the backlog, ``memory-chain status``, the
    memory browser's "N of M consolidated" (the highest ``turn_range_end`` of the summaries).
    """
    return (
        select(
            summaries.c.conversation_id,
            func.max(summaries.c.turn_range_end).label("covered"),
        )
        .group_by(summaries.c.conversation_id)
        .subquery()
    )


@dataclass(frozen=True, slots=True)
class ConversationState:
    """What a cached copy of a conversation is checked against: its last turn and summary."""

    turn_count: int
    summarized_through: int


def conversation_state(
    store: SQLStore, conversation_id: str, user_id: str
) -> ConversationState | None:
    """The conversation's turn count and last summarized turn, in one indexed lookup.

    A process that caches conversations (tier 1) compares these with its copy before it
    serves it: another replica (or process) may have added turns or stored a summary since.
    ``None`` when the conversation does not exist (any more).
    """
    with storage_errors(), store.engine.connect() as conn:
        row = conn.execute(_state_statement(), {"cid": stored_id(user_id, conversation_id)}).first()
    if row is None:
        return None
    return ConversationState(int(row[0] or 0), int(row[1]))


@functools.cache
def _state_statement() -> Executable:
    # Built once, with a bind parameter: this runs on every request of a cached conversation.
    through = (
        select(func.coalesce(func.max(summaries.c.turn_range_end), 0))
        .where(summaries.c.conversation_id == conversations.c.conversation_id)
        .scalar_subquery()
    )
    return select(conversations.c.turn_count, through).where(
        conversations.c.conversation_id == bindparam("cid")
    )


def summarized_through(store: SQLStore, conversation_id: str, user_id: str) -> int:
    """The last turn number covered by a stored summary (0 when none)."""
    statement = select(func.coalesce(func.max(summaries.c.turn_range_end), 0)).where(
        summaries.c.conversation_id == stored_id(user_id, conversation_id)
    )
    with storage_errors(), store.engine.connect() as conn:
        return int(conn.execute(statement).scalar_one())


def backlog(
    store: SQLStore,
    *,
    idle_since: datetime | None = None,
    min_unsummarized: int = 1,
    limit: int = 100,
) -> list[Backlog]:
    """Active conversations with at least ``min_unsummarized`` turns no summary covers.

    Args:
        store: Tier 2.
        idle_since: Only conversations silent since then (the idle trigger).
        min_unsummarized: Fewest unsummarized turns.
        limit: Most conversations returned, the longest silent first.
    """
    ranges = covered()
    through = func.coalesce(ranges.c.covered, 0)
    conditions = [
        conversations.c.status == "active",
        conversations.c.turn_count - through >= max(min_unsummarized, 1),
    ]
    if idle_since is not None:
        conditions.append(conversations.c.last_message_at < naive_utc(idle_since))
    statement = (
        select(
            conversations.c.conversation_id,
            conversations.c.user_id,
            through.label("through"),
            conversations.c.turn_count,
            conversations.c.last_message_at,
        )
        .outerjoin(ranges, ranges.c.conversation_id == conversations.c.conversation_id)
        .where(*conditions)
        .order_by(conversations.c.last_message_at)
        .limit(limit)
    )
    with storage_errors(), store.engine.connect() as conn:
        rows = conn.execute(statement).all()
    return [
        Backlog(
            conversation_id=client_id(row.conversation_id),
            user_id=row.user_id or "",
            summarized_through=int(row.through),
            turn_count=int(row.turn_count or 0),
            last_message_at=as_utc(row.last_message_at) if row.last_message_at else None,
        )
        for row in rows
    ]
