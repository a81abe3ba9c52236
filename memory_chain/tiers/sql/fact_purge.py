"""What a purge does to a user's facts: their sources in the purged conversations go.

Run inside the purge's transaction (:meth:`ConversationLifecycle.delete_conversation
<memory_chain.tiers.sql.lifecycle.ConversationLifecycle.delete_conversation>`, retention
through it), which holds the user's fact lock (:func:`~.fact_writes.facts_lock`): a fact
change or a consolidation filing a range's facts waits for it, or it for them, so that an
erasure always lands after (or before) a filing, never in the middle of one.

* The purged conversations' ``fact_sources`` rows go.
* A fact with sources left stays; if its own ``conversation_id`` named a purged
  conversation, it names the first remaining source instead (so that no fact points at a
  purged conversation).
* A fact learnt in conversations with none left is deleted, with its edit-history copies
  (they share its sources). One added outside any conversation (its ``conversation_id``
  ``NULL``: by hand, or through the store) stays: that source is no conversation's.
* The facts a deleted fact superseded are re-linked as the rulebook says
  (:func:`memory_chain.facts.rules.relinked`): to its superseder, back to current, or
  dismissed with it; none points at a fact that is gone.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, delete, select, update

from memory_chain.facts.rules import relinked
from memory_chain.tiers.sql.fact_writes import fact_from_row
from memory_chain.tiers.sql.models import fact_sources, facts
from memory_chain.tiers.sql.rows import in_chunks, naive_utc


def forget_conversations(conn: Connection, user_id: str, conversation_ids: Collection[str]) -> int:
    """Take the purged conversations away from the user's facts (see the module docstring).

    Args:
        conn: The purge's transaction, holding the user's fact lock.
        user_id: Whose conversations.
        conversation_ids: The purged conversations (the client's ids).

    Returns:
        How many facts were deleted.
    """
    purged = set(conversation_ids)
    touched: set[str] = set()
    mine = fact_sources.c.user_id == user_id
    for chunk in in_chunks(sorted(set(purged))):
        in_chunk = fact_sources.c.conversation_id.in_(chunk)
        touched.update(conn.execute(select(fact_sources.c.fact_id).where(mine, in_chunk)).scalars())
        # A fact whose own columns name the conversation, should it lack the row.
        touched.update(
            conn.execute(
                select(facts.c.id).where(
                    facts.c.user_id == user_id, facts.c.conversation_id.in_(chunk)
                )
            ).scalars()
        )
        conn.execute(delete(fact_sources).where(mine, in_chunk))
    if not touched:
        return 0
    rows = _rows(conn, facts.c.id, touched)
    left = _first_sources(conn, touched)
    doomed: list[Any] = []
    for row in rows:
        source = left.get(row.id)
        if source is None:
            if row.conversation_id in purged:
                doomed.append(row)
        elif row.conversation_id in purged:
            conn.execute(
                update(facts)
                .where(facts.c.id == row.id)
                .values(
                    conversation_id=source.conversation_id,
                    first_turn=source.first_turn,
                    last_turn=source.last_turn,
                )
            )
    if doomed:
        _delete(conn, user_id, doomed)
    return len(doomed)


def _rows(conn: Connection, column: Any, values: Collection[str]) -> list[Any]:
    """The ``facts`` rows whose ``column`` is one of ``values``."""
    found: list[Any] = []
    for chunk in in_chunks(sorted(set(values))):
        found += conn.execute(select(facts).where(column.in_(chunk))).all()
    return found


def _first_sources(conn: Connection, fact_ids: Collection[str]) -> dict[str, Any]:
    """Each fact's first said remaining source row (facts with none left are absent)."""
    first: dict[str, Any] = {}
    for chunk in in_chunks(sorted(set(fact_ids))):
        rows = conn.execute(
            select(fact_sources)
            .where(fact_sources.c.fact_id.in_(chunk))
            .order_by(fact_sources.c.said_at, fact_sources.c.conversation_id)
        )
        for row in rows:
            first.setdefault(row.fact_id, row)
    return first


def _delete(conn: Connection, user_id: str, doomed: list[Any]) -> None:
    """Delete the facts ``doomed`` and re-link the facts they superseded."""
    ids = {row.id for row in doomed}
    pointing = [
        row
        for row in _rows(conn, facts.c.superseded_by, ids)
        if row.id not in ids and row.user_id == user_id
    ]
    held = conn.execute(
        select(facts.c.id, facts.c.store_key).where(
            facts.c.user_id == user_id,
            facts.c.status == "current",
            facts.c.store_key.is_not(None),
        )
    ).all()
    keys = [row.store_key for row in held if row.id not in ids]
    changes = relinked(
        [fact_from_row(row) for row in doomed], [fact_from_row(row) for row in pointing], keys
    )
    for chunk in in_chunks(sorted(set(ids))):
        # Their sources go with them (none is left, but an edit copy may hold one).
        conn.execute(delete(fact_sources).where(fact_sources.c.fact_id.in_(chunk)))
        conn.execute(delete(facts).where(facts.c.id.in_(chunk)))
    # After the deletions: a fact that holds again may take the key a deleted one held.
    for fact in changes:
        conn.execute(
            update(facts)
            .where(facts.c.id == fact.id)
            .values(
                status=fact.status,
                superseded_by=fact.superseded_by,
                invalidated_at=naive_utc(fact.invalidated_at) if fact.invalidated_at else None,
                store_key=fact.key,
            )
        )
