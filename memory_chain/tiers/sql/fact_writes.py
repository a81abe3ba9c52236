"""The statements of a fact change, run inside the transaction that decided it.

:class:`~memory_chain.tiers.sql.facts.FactStore` opens one write transaction per change,
holding the user's fact lock (:func:`facts_lock`), reads the user's facts here
(:func:`current_facts`, :func:`fact_of`) and in :mod:`.fact_adds` (found by index), asks the
rulebook (:mod:`memory_chain.facts.rules`) what to do, and carries the decision out here
(:func:`carry_out`, :func:`edit_row`, :func:`retire`). Nothing here decides; each function
writes what it is told to, and the rows' conversions (:func:`fact_from_row`,
:func:`fact_values`, with the lookup keys of :mod:`.fact_keys`) live here too.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

import numpy as np
from sqlalchemy import Connection, insert, select, update

from memory_chain.facts.model import Fact, FactKind, FactOrigin, FactStatus, own_source
from memory_chain.facts.reconcile import Known
from memory_chain.facts.rules import Decision, FactChange
from memory_chain.schemas import as_utc
from memory_chain.tiers.sql.fact_keys import key_values, subject_digest, text_key
from memory_chain.tiers.sql.fact_sources import add_sources, copy_sources, said_again
from memory_chain.tiers.sql.models import facts
from memory_chain.tiers.sql.rows import naive_utc

#: A fact's columns as read whole: all but its vector and lookup keys, which a read of a
#: fact does not show (a vector is 1.5 KB with a 384-d model).
FACT_COLUMNS = tuple(
    column for column in facts.c if column.name not in ("embedding", "text_key", "subject_key")
)


def facts_lock(user_id: str) -> str:
    """The name of the lock every change of ``user_id``'s facts holds (see :mod:`.locks`)."""
    return f"facts:{user_id}"


def vector_bytes(vector: Sequence[float]) -> bytes:
    """A vector as stored: normalized, float32 little-endian."""
    array = np.asarray(vector, dtype="<f4")
    norm = float(np.linalg.norm(array))
    return (array / norm if norm else array).astype("<f4").tobytes()


def vector_of(blob: bytes | None) -> np.ndarray | None:
    """A stored vector, or ``None`` for none."""
    return None if not blob else np.frombuffer(blob, dtype="<f4")


def fact_from_row(row: Any) -> Fact:
    """A ``facts`` row as a :class:`Fact`."""
    return Fact(
        id=row.id,
        user_id=row.user_id,
        text=row.text,
        kind=cast(FactKind, row.kind),
        origin=cast(FactOrigin, row.origin),
        status=cast(FactStatus, row.status),
        created_at=as_utc(row.created_at),
        valid_from=as_utc(row.valid_from),
        subject=row.subject,
        conversation_id=row.conversation_id,
        turns=(row.first_turn, row.last_turn) if row.first_turn is not None else None,
        confidence=row.confidence,
        invalidated_at=as_utc(row.invalidated_at) if row.invalidated_at else None,
        superseded_by=row.superseded_by,
        key=row.store_key,
    )


def fact_values(fact: Fact, embedding: bytes | None) -> dict[str, Any]:
    """The row of a :class:`Fact`."""
    return {
        "id": fact.id,
        "user_id": fact.user_id,
        "text": fact.text,
        "kind": fact.kind,
        "subject": fact.subject,
        "origin": fact.origin,
        "status": fact.status,
        "conversation_id": fact.conversation_id,
        "first_turn": fact.turns[0] if fact.turns else None,
        "last_turn": fact.turns[1] if fact.turns else None,
        "confidence": fact.confidence,
        "created_at": naive_utc(fact.created_at),
        "valid_from": naive_utc(fact.valid_from),
        "invalidated_at": naive_utc(fact.invalidated_at) if fact.invalidated_at else None,
        "superseded_by": fact.superseded_by,
        "embedding": embedding,
        "store_key": fact.key,
        "text_key": text_key(fact.text),
        "subject_key": subject_digest(fact.subject),
    }


def replace_status(fact: Fact, superseded_by: str, now: datetime) -> Fact:
    """``fact`` as it is once superseded by ``superseded_by``."""
    return replace(fact, status="superseded", invalidated_at=now, superseded_by=superseded_by)


# -- reads inside the transaction ---------------------------------------------------------------


def current_facts(conn: Connection, user_id: str) -> list[Known]:
    """The user's current facts, with their vectors."""
    rows = conn.execute(
        select(facts).where(facts.c.user_id == user_id, facts.c.status == "current")
    ).all()
    return [Known(fact_from_row(row), vector_of(row.embedding)) for row in rows]


def fact_of(conn: Connection, user_id: str, fact_id: str, *, current: bool = False) -> Any:
    """The user's ``facts`` row of that id (only a current one with ``current``), or ``None``."""
    statement = select(facts).where(facts.c.user_id == user_id, facts.c.id == fact_id)
    if current:
        statement = statement.where(facts.c.status == "current")
    return conn.execute(statement).first()


def keyed_row(conn: Connection, user_id: str, key: str) -> Any:
    """The user's current ``facts`` row under a store key, or ``None``.

    The fact put under ``key`` (``store_key``); else, when ``key`` is the id of a current fact
    put under no key (learnt, saved or added by hand, or put before keys had their own
    column), that fact: the store lists such facts under their ids.
    """
    mine = (facts.c.user_id == user_id, facts.c.status == "current")
    row = conn.execute(select(facts).where(*mine, facts.c.store_key == key)).first()
    if row is None:
        row = conn.execute(
            select(facts).where(*mine, facts.c.id == key, facts.c.store_key.is_(None))
        ).first()
    return row


# -- writes -------------------------------------------------------------------------------------


def retire(
    conn: Connection,
    fact_id: str,
    status: FactStatus,
    now: datetime,
    *,
    superseded_by: str | None = None,
) -> None:
    """Mark a fact superseded (by ``superseded_by``) or dismissed, from ``now`` on."""
    conn.execute(
        update(facts)
        .where(facts.c.id == fact_id)
        .values(status=status, invalidated_at=naive_utc(now), superseded_by=superseded_by)
    )


def carry_out(
    conn: Connection, decision: Decision, new: Fact, embedding: bytes | None
) -> FactChange:
    """Write what ``decision`` says about the new fact ``new``; what was done.

    A keyed fact retired in favour of one without a key hands its key on, so that the key
    names what holds now (the retired fact keeps it too, as history); the retirement is
    written first, so that one current fact has the key at any time. A new fact is stored
    with its source; a known fact said again (no new row: ``same``, ``filled``, ``past``,
    ``corrected`` through it) keeps the new fact's conversation as one more source
    (:func:`~.fact_sources.said_again`), so that it outlives the purge of either.

    Args:
        conn: The transaction that read the facts the decision was taken from.
        decision: The rulebook's decision.
        new: The new fact as it would be stored (its ``created_at`` is the change's time).
        embedding: Its vector, as stored.
    """
    now = new.created_at
    fact = decision.known
    if decision.store is not None:
        fact = new
        if decision.store == "superseded" and decision.held_by is not None:
            fact = replace_status(new, decision.held_by.id, now)
    if fact is None:
        raise ValueError(f"a {decision.action!r} decision neither stores nor names a fact")
    changes: dict[str, Any] = dict(decision.fill)
    replaced = None
    retired = decision.retire
    if retired is not None:
        holder = decision.retire_for or fact
        retire(conn, retired.id, "superseded", now, superseded_by=holder.id)
        if retired.id == fact.id:
            fact = replace_status(fact, holder.id, now)
        else:
            replaced = replace_status(retired, holder.id, now)
            if retired.key is not None and fact.key is None:
                changes["store_key"] = retired.key
        if retired.key is not None and holder.key is None and holder.id != fact.id:
            conn.execute(update(facts).where(facts.c.id == holder.id).values(store_key=retired.key))
    fact = replace(
        fact,
        subject=changes.get("subject", fact.subject),
        kind=cast(FactKind, changes.get("kind", fact.kind)),
        key=changes.get("store_key", fact.key),
    )
    if decision.store is not None:
        conn.execute(insert(facts).values(**fact_values(fact, embedding)))
        add_sources(conn, fact)
    else:
        if changes:
            keys = key_values(subject=changes.get("subject"))
            conn.execute(update(facts).where(facts.c.id == fact.id).values(**changes, **keys))
        source = own_source(new)
        if source is not None:  # the known fact said again: one more place it was said
            said_again(conn, fact, source)
    return FactChange(decision.action, fact, replaced, stored=decision.store is not None)


def edit_row(
    conn: Connection,
    row: Any,
    *,
    text: str | None,
    kind: FactKind | None,
    embedding: bytes | None,
    now: datetime,
) -> Fact:
    """Edit a current fact's row: it keeps its id; a copy of what it said goes into the history.

    Args:
        conn: The transaction that read ``row``.
        row: The current fact's row.
        text: Its new text (``None``: unchanged), with ``embedding``, its vector.
        kind: Its new kind (``None``: unchanged).
        embedding: The new text's vector.
        now: The time of the edit (the fact holds as edited from then on).
    """
    old = fact_from_row(row)
    history = replace(
        old, id=uuid.uuid4().hex, status="superseded", invalidated_at=now, superseded_by=old.id
    )
    conn.execute(insert(facts).values(**fact_values(history, row.embedding)))
    copy_sources(conn, old.id, history.id)  # the copy goes with the fact
    values: dict[str, Any] = {"valid_from": naive_utc(now), "origin": "api"}
    if text is not None:
        values.update(text=text, embedding=embedding, **key_values(text=text))
    if kind is not None:
        values["kind"] = kind
    conn.execute(update(facts).where(facts.c.id == old.id).values(**values))
    return fact_from_row(conn.execute(select(facts).where(facts.c.id == old.id)).one())
