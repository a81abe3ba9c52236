"""Where each fact was said: the ``fact_sources`` rows (migration 0014), written and read.

A fact keeps one row per conversation it was said in: the first and last turn of it that
said the fact, and when it was first said there. The fact's own ``conversation_id`` and
turns are the first of them memory learnt it from (``NULL`` for a fact added outside any
conversation); a fact said again in another conversation (the rulebook's ``same``,
``filled``, ``past``: :mod:`memory_chain.facts.rules`) gains a row, so that purging one of
the conversations leaves it to the others (:mod:`.fact_purge`). An edit's history copy
gets the fact's rows, so that it goes with the fact.

Every function runs inside the caller's transaction, which holds the user's fact lock
(:func:`~.fact_writes.facts_lock`): nothing here decides.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from sqlalchemy import Connection, insert, select, update

from memory_chain.facts.model import Fact, FactSource, sources_of
from memory_chain.schemas import as_utc
from memory_chain.tiers.sql.models import fact_sources, facts
from memory_chain.tiers.sql.rows import naive_utc

T = TypeVar("T")


def source_from_row(row: Any) -> FactSource:
    """A ``fact_sources`` row as a :class:`FactSource`."""
    turns = (row.first_turn, row.last_turn) if row.first_turn is not None else None
    return FactSource(row.conversation_id, turns, as_utc(row.said_at))


def _values(fact_id: str, user_id: str, source: FactSource) -> dict[str, Any]:
    return {
        "fact_id": fact_id,
        "user_id": user_id,
        "conversation_id": source.conversation_id,
        "first_turn": source.turns[0] if source.turns else None,
        "last_turn": source.turns[1] if source.turns else None,
        "said_at": naive_utc(source.said_at),
    }


def add_sources(conn: Connection, fact: Fact) -> None:
    """Store the sources of a new fact (:func:`~memory_chain.facts.model.sources_of`)."""
    rows = [_values(fact.id, fact.user_id, source) for source in sources_of(fact)]
    if rows:
        conn.execute(insert(fact_sources), rows)


def said_again(conn: Connection, known: Fact, source: FactSource) -> None:
    """The known fact ``known`` was said again: ``source`` is kept as one of its sources.

    Said again in a conversation it has a row for, the row's turns widen to take the new
    ones in (and the fact's own turns with it, when that is the conversation they name);
    said in a new conversation, a row is added. The fact's own ``conversation_id`` stays
    what it was (``NULL`` for a fact added by hand: that source outlives every purge).
    """
    row = conn.execute(
        select(fact_sources).where(
            fact_sources.c.fact_id == known.id,
            fact_sources.c.conversation_id == source.conversation_id,
        )
    ).first()
    if row is None:
        conn.execute(insert(fact_sources).values(**_values(known.id, known.user_id, source)))
        return
    if source.turns is None:
        return
    held = source_from_row(row).turns
    turns = source.turns
    if held is not None:
        turns = (min(held[0], turns[0]), max(held[1], turns[1]))
    if turns == held:
        return
    conn.execute(
        update(fact_sources)
        .where(
            fact_sources.c.fact_id == known.id,
            fact_sources.c.conversation_id == source.conversation_id,
        )
        .values(
            first_turn=turns[0],
            last_turn=turns[1],
            said_at=min(row.said_at, naive_utc(source.said_at)),
        )
    )
    if known.conversation_id == source.conversation_id:
        conn.execute(
            update(facts)
            .where(facts.c.id == known.id)
            .values(first_turn=turns[0], last_turn=turns[1])
        )


def copy_sources(conn: Connection, from_id: str, to_id: str) -> None:
    """Give the fact ``to_id`` (an edit's history copy) the sources of ``from_id``."""
    columns = [c for c in fact_sources.c if c.name != "fact_id"]
    rows = conn.execute(select(*columns).where(fact_sources.c.fact_id == from_id)).all()
    if rows:
        conn.execute(insert(fact_sources), [{"fact_id": to_id, **row._mapping} for row in rows])


def with_sources(conn: Connection, user_id: str, found: Sequence[Fact]) -> list[Fact]:
    """``found`` (facts of ``user_id``), each with its sources read (:attr:`Fact.sources`).

    The user's sources are read in one statement, each fact's first said first.
    """
    rows = conn.execute(
        select(fact_sources)
        .where(fact_sources.c.user_id == user_id)
        .order_by(fact_sources.c.said_at, fact_sources.c.conversation_id)
    )
    sources: dict[str, list[FactSource]] = defaultdict(list)
    for row in rows:
        sources[row.fact_id].append(source_from_row(row))
    return [replace(fact, sources=tuple(sources.get(fact.id, ()))) for fact in found]


def said_in(user_id: str, conversation_ids: Collection[str]) -> Any:
    """A subquery: the ids of the user's facts said in any of these conversations."""
    return select(fact_sources.c.fact_id).where(
        fact_sources.c.user_id == user_id,
        fact_sources.c.conversation_id.in_(sorted(set(conversation_ids))),
    )
