"""Whole conversations, users' facts and store items read out of tier 2 for an export.

:func:`read_conversations` reads conversations with their turns and summaries, exactly as
stored, column for column; :func:`read_facts` the facts of their users (every status, so the
history too); :func:`read_store_items` the users' store items (what agents kept in
``MemoryStore``); :func:`read_export` all three, in that order.
:mod:`memory_chain.tiers.sql.restore` writes them back.

An export is read in short transactions, each one on a pooled connection given back before
anything read is handed on: a download goes at its client's pace, and a slow client (or twenty)
must not hold the connections every other request needs. What an export then gives:

* **each conversation as of one moment**: its row, its turns and its summaries are read in one
  transaction, so its counters agree with its turns and every summary covers stored turns;
* **each user's facts as of one moment**: all of them (every status) and their sources in one
  transaction, so a fact superseded meanwhile is not exported both as current and as
  replaced by one missing;
* **each page of store items as of one moment** (items do not refer to each other);
* not the whole export as of one moment: a conversation, fact or item written while the
  export runs may or may not be in it, and one deleted meanwhile may still be. Conversations
  are paged by their row id, store items by their key (keyset pagination, not offsets), so
  none is skipped or repeated whatever is written meanwhile.

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
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, Select, func, select, tuple_

from memory_chain.facts.model import Fact
from memory_chain.tiers.sql.fact_sources import said_in, with_sources
from memory_chain.tiers.sql.fact_writes import fact_from_row
from memory_chain.tiers.sql.models import (
    conversations,
    fact_sources,
    facts,
    store_items,
    summaries,
    turns,
)
from memory_chain.tiers.sql.rows import (
    ConversationRecord,
    conversation_from_row,
    conversation_scope,
    storage_errors,
    summary_from_row,
    turn_from_row,
)
from memory_chain.tiers.sql.store_items import StoredItem, item_from_row

#: Conversation ids read per transaction (each conversation is then read in its own).
_PAGE = 500
#: Store items read per transaction (a value may have 64,000 characters).
_ITEM_PAGE = 100
#: The facts' columns an export reads (not their vectors: an import embeds them again).
_FACT_COLUMNS = [column for column in facts.c if column.name != "embedding"]


def _scoped(statement: Select[Any], user_id: str | None, conversation_id: str | None) -> Any:
    if user_id is not None:
        statement = statement.where(conversations.c.user_id == user_id)
    column = conversations.c.conversation_id
    return statement.where(*conversation_scope(column, user_id, conversation_id))


@contextmanager
def _reading(engine: Engine) -> Iterator[Connection]:
    """One short read transaction, as of one moment; its connection goes back to the pool.

    Never yield rows to a caller from inside it: the caller may be a client reading slowly.
    """
    with storage_errors(), engine.connect() as conn:
        if conn.dialect.name == "postgresql":  # SQLite's read transaction is a snapshot
            conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn


def count_conversations(
    engine: Engine, *, user_id: str | None = None, conversation_id: str | None = None
) -> int:
    """How many conversations :func:`read_conversations` would yield (now)."""
    statement = _scoped(select(func.count()).select_from(conversations), user_id, conversation_id)
    with _reading(engine) as conn:
        return int(conn.execute(statement).scalar_one())


def read_conversations(
    engine: Engine, *, user_id: str | None = None, conversation_id: str | None = None
) -> Iterator[ConversationRecord]:
    """Every conversation in scope with its turns and summaries, oldest conversation first.

    Each conversation is read in one transaction of its own (see the module docstring);
    memory holds one page of ids plus one conversation's rows.

    Args:
        engine: The tier-2 engine.
        user_id: Only this user's conversations.
        conversation_id: Only conversations of this id (of ``user_id``, or of every user).

    Yields:
        One record per conversation, in creation order.
    """
    last_id = 0
    while True:
        with _reading(engine) as conn:
            page = list(
                conn.execute(
                    _scoped(select(conversations.c.id), user_id, conversation_id)
                    .where(conversations.c.id > last_id)
                    .order_by(conversations.c.id)
                    .limit(_PAGE)
                ).scalars()
            )
        if not page:
            return
        for row_id in page:
            with _reading(engine) as conn:
                record = _conversation_record(conn, row_id)
            if record is not None:  # purged since the page was read
                yield record
        last_id = page[-1]


def _conversation_record(conn: Connection, row_id: int) -> ConversationRecord | None:
    row = conn.execute(select(conversations).where(conversations.c.id == row_id)).first()
    if row is None:
        return None
    cid = row.conversation_id  # the stored id
    turn_rows = conn.execute(
        select(turns).where(turns.c.conversation_id == cid).order_by(turns.c.turn_number)
    ).all()
    summary_rows = conn.execute(
        select(summaries)
        .where(summaries.c.conversation_id == cid)
        .order_by(summaries.c.turn_range_start)
    ).all()
    return ConversationRecord(
        info=conversation_from_row(row),
        turns=[turn_from_row(turn) for turn in turn_rows],
        summaries=[summary_from_row(summary) for summary in summary_rows],
    )


def read_facts(
    engine: Engine, *, user_id: str | None = None, conversation_id: str | None = None
) -> Iterator[Fact]:
    """Every fact in scope, whatever its status, by user, then oldest first.

    Each user's facts are read in one transaction (see the module docstring) and held in
    memory while they are handed on.

    Args:
        engine: The tier-2 engine.
        user_id: Only this user's facts.
        conversation_id: Only the facts said in conversations of this id (of ``user_id``,
            or of every user): those it is one of the sources of.

    Yields:
        The facts, ordered by user id, then ``created_at`` (then id), each with its
        sources (:attr:`~memory_chain.facts.model.Fact.sources`), read in the same
        transaction.
    """
    users = [user_id] if user_id is not None else _users_with_facts(engine, conversation_id)
    for user in users:
        statement = (
            select(*_FACT_COLUMNS)
            .where(facts.c.user_id == user)
            .order_by(facts.c.created_at, facts.c.id)
        )
        if conversation_id is not None:  # sources hold the client's conversation id
            statement = statement.where(facts.c.id.in_(said_in(user, [conversation_id])))
        with _reading(engine) as conn:
            found = [fact_from_row(row) for row in conn.execute(statement)]
            found = with_sources(conn, user, found)
        yield from found


def _users_with_facts(engine: Engine, conversation_id: str | None) -> Iterator[str]:
    """Every user with facts (in conversations of ``conversation_id``), in order, one by one."""
    last = ""
    while True:
        statement = select(facts.c.user_id).where(facts.c.user_id > last)
        if conversation_id is not None:
            statement = select(fact_sources.c.user_id).where(
                fact_sources.c.user_id > last, fact_sources.c.conversation_id == conversation_id
            )
        column = statement.selected_columns[0]
        with _reading(engine) as conn:
            user = conn.execute(statement.order_by(column).limit(1)).scalar()
        if user is None:
            return
        yield user
        last = user


def read_store_items(engine: Engine, *, user_id: str | None = None) -> Iterator[StoredItem]:
    """Every store item (every user's, or ``user_id``'s), by user, namespace and key.

    Read a page at a time (see the module docstring), after the last key read.

    Args:
        engine: The tier-2 engine.
        user_id: Only this user's items.

    Yields:
        The items, with their search text and vector as stored.
    """
    # The primary key's order: unique (no ties) and read along the index.
    key = tuple_(store_items.c.user_id, store_items.c.namespace, store_items.c.key)
    after: tuple[str, str, str] | None = None
    while True:
        statement = select(store_items).order_by(
            store_items.c.user_id, store_items.c.namespace, store_items.c.key
        )
        if user_id is not None:
            statement = statement.where(store_items.c.user_id == user_id)
        if after is not None:
            statement = statement.where(key > tuple_(*after))
        with _reading(engine) as conn:
            page = conn.execute(statement.limit(_ITEM_PAGE)).all()
        yield from (item_from_row(row) for row in page)
        if len(page) < _ITEM_PAGE:
            return
        last = page[-1]
        after = (last.user_id, last.namespace, last.key)


def read_export(
    engine: Engine, *, user_id: str | None = None, conversation_id: str | None = None
) -> Iterator[ConversationRecord | Fact | StoredItem]:
    """What an export holds: conversations, then facts, then store items.

    :func:`read_conversations`, :func:`read_facts` and :func:`read_store_items`, one after
    the other, with the consistency the module docstring describes. Store items belong to a
    user, not to a conversation: an export of one conversation (``conversation_id``) has none.

    Args:
        engine: The tier-2 engine.
        user_id: Only this user's conversations, facts and store items.
        conversation_id: Only conversations of this id and the facts said in them.

    Yields:
        Every conversation in creation order, then every fact (by user, oldest first), then
        every store item (by user, namespace and key).
    """
    yield from read_conversations(engine, user_id=user_id, conversation_id=conversation_id)
    yield from read_facts(engine, user_id=user_id, conversation_id=conversation_id)
    if conversation_id is None:
        yield from read_store_items(engine, user_id=user_id)


__all__ = [
    "count_conversations",
    "read_conversations",
    "read_export",
    "read_facts",
    "read_store_items",
]
