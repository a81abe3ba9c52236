"""Whole conversations, users' facts and store items read out of tier 2 for an export.

:func:`read_conversations` reads conversations with their turns and summaries, exactly as
stored, column for column, in one read transaction (a consistent snapshot); :func:`read_export`
reads them, then the facts of their users (:func:`read_facts`, every status, so the history
too), then their users' store items (:func:`read_store_items`, what agents kept in
``MemoryStore``) in the same snapshot. :mod:`memory_chain.tiers.sql.restore` writes them back.

Example:
    >>> from memory_chain.tiers.sql import create_sql_engine
    >>> from memory_chain.tiers.sql.export import count_conversations, read_conversations
    >>> source = create_sql_engine("sqlite:////tmp/mc-source.db")  # doctest: +SKIP
    >>> count_conversations(source, user_id="ana")  # doctest: +SKIP
    2
    >>> for record in read_conversations(source, user_id="ana"):  # doctest: +SKIP
    ...     print(record.info.conversation_id, len(record.turns), len(record.summaries))
    notes 12 1
    trip 4 0
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Engine, Row, Select, func, select

from memory_chain.facts.model import Fact
from memory_chain.tiers.sql.fact_writes import fact_from_row
from memory_chain.tiers.sql.models import conversations, facts, store_items, summaries, turns
from memory_chain.tiers.sql.rows import (
    ConversationRecord,
    conversation_from_row,
    conversation_scope,
    storage_errors,
    summary_from_row,
    turn_from_row,
)
from memory_chain.tiers.sql.store_items import StoredItem, item_from_row

#: Rows read per query.
_PAGE = 500


def _scoped(statement: Select[Any], user_id: str | None, conversation_id: str | None) -> Any:
    if user_id is not None:
        statement = statement.where(conversations.c.user_id == user_id)
    column = conversations.c.conversation_id
    return statement.where(*conversation_scope(column, user_id, conversation_id))


def count_conversations(
    engine: Engine, *, user_id: str | None = None, conversation_id: str | None = None
) -> int:
    """How many conversations :func:`read_conversations` would yield."""
    statement = _scoped(select(func.count()).select_from(conversations), user_id, conversation_id)
    with storage_errors(), engine.connect() as conn:
        return int(conn.execute(statement).scalar_one())


def _snapshot(conn: Connection) -> Connection:
    # One snapshot for the whole read: a turn written meanwhile must not show up in a
    # conversation whose counters were read before it. SQLite's read transaction already is.
    if conn.dialect.name == "postgresql":
        return conn.execution_options(isolation_level="REPEATABLE READ")
    return conn


def read_conversations(
    engine: Engine, *, user_id: str | None = None, conversation_id: str | None = None
) -> Iterator[ConversationRecord]:
    """Every conversation in scope with its turns and summaries, oldest conversation first.

    Conversations are read a page at a time, so memory holds one page of rows plus one
    conversation's turns.

    Args:
        engine: The tier-2 engine.
        user_id: Only this user's conversations.
        conversation_id: Only conversations of this id (of ``user_id``, or of every user).

    Yields:
        One record per conversation, in creation order.
    """
    with storage_errors(), engine.connect() as conn, _snapshot(conn).begin():
        yield from _conversation_records(conn, user_id, conversation_id)


def read_facts(
    engine: Engine, *, user_id: str | None = None, conversation_id: str | None = None
) -> Iterator[Fact]:
    """Every fact in scope, whatever its status, by user, then oldest first.

    Args:
        engine: The tier-2 engine.
        user_id: Only this user's facts.
        conversation_id: Only the facts learnt in conversations of this id (of ``user_id``,
            or of every user).

    Yields:
        The facts, ordered by user id, then ``created_at`` (then id).
    """
    with storage_errors(), engine.connect() as conn, _snapshot(conn).begin():
        yield from _fact_records(conn, user_id, conversation_id)


def read_store_items(engine: Engine, *, user_id: str | None = None) -> Iterator[StoredItem]:
    """Every store item (every user's, or ``user_id``'s), by user, namespace and key.

    Args:
        engine: The tier-2 engine.
        user_id: Only this user's items.

    Yields:
        The items, with their search text and vector as stored.
    """
    with storage_errors(), engine.connect() as conn, _snapshot(conn).begin():
        yield from _store_item_records(conn, user_id)


def read_export(
    engine: Engine, *, user_id: str | None = None, conversation_id: str | None = None
) -> Iterator[ConversationRecord | Fact | StoredItem]:
    """What an export holds: conversations, then facts, then store items.

    :func:`read_conversations`, :func:`read_facts` and :func:`read_store_items` in one
    snapshot, so a fact stored or a conversation purged meanwhile does not show up on one
    side only. Store items belong to a user, not to a conversation: an export of one
    conversation (``conversation_id``) has none.

    Args:
        engine: The tier-2 engine.
        user_id: Only this user's conversations, facts and store items.
        conversation_id: Only conversations of this id and the facts learnt in them.

    Yields:
        Every conversation in creation order, then every fact (by user, oldest first), then
        every store item (by user, namespace and key).
    """
    with storage_errors(), engine.connect() as conn, _snapshot(conn).begin():
        yield from _conversation_records(conn, user_id, conversation_id)
        yield from _fact_records(conn, user_id, conversation_id)
        if conversation_id is None:
            yield from _store_item_records(conn, user_id)


def _conversation_records(
    conn: Connection, user_id: str | None, conversation_id: str | None
) -> Iterator[ConversationRecord]:
    last_id = 0
    while True:
        page = conn.execute(
            _scoped(select(conversations), user_id, conversation_id)
            .where(conversations.c.id > last_id)
            .order_by(conversations.c.id)
            .limit(_PAGE)
        ).all()
        if not page:
            return
        for row in page:
            cid = row.conversation_id  # the stored id
            turn_rows = conn.execute(
                select(turns).where(turns.c.conversation_id == cid).order_by(turns.c.turn_number)
            ).all()
            summary_rows = conn.execute(
                select(summaries)
                .where(summaries.c.conversation_id == cid)
                .order_by(summaries.c.turn_range_start)
            ).all()
            yield ConversationRecord(
                info=conversation_from_row(row),
                turns=[turn_from_row(turn) for turn in turn_rows],
                summaries=[summary_from_row(summary) for summary in summary_rows],
            )
        last_id = page[-1].id


def _fact_records(
    conn: Connection, user_id: str | None, conversation_id: str | None
) -> Iterator[Fact]:
    statement = select(facts).order_by(facts.c.user_id, facts.c.created_at, facts.c.id)
    if user_id is not None:
        statement = statement.where(facts.c.user_id == user_id)
    if conversation_id is not None:  # facts hold the client's conversation id
        statement = statement.where(facts.c.conversation_id == conversation_id)
    yield from (fact_from_row(row) for row in _paged(conn, statement))


def _store_item_records(conn: Connection, user_id: str | None) -> Iterator[StoredItem]:
    # The primary key's order: unique (no ties) and read along the index.
    statement = select(store_items).order_by(
        store_items.c.user_id, store_items.c.namespace, store_items.c.key
    )
    if user_id is not None:
        statement = statement.where(store_items.c.user_id == user_id)
    yield from (item_from_row(row) for row in _paged(conn, statement))


def _paged(conn: Connection, statement: Select[Any]) -> Iterator[Row[Any]]:
    offset = 0
    while True:  # pages of one snapshot: offsets are stable
        page = conn.execute(statement.limit(_PAGE).offset(offset)).all()
        yield from page
        if len(page) < _PAGE:
            return
        offset += len(page)


__all__ = [
    "count_conversations",
    "read_conversations",
    "read_export",
    "read_facts",
    "read_store_items",
]
