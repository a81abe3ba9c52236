"""Adding a fact inside its transaction: the facts it is decided from, found by index, and room.

The rulebook (:func:`memory_chain.facts.rules.decide`) needs, of the user's facts, only those
the new fact can be: the same (its words, or a cosine of at least
:data:`~memory_chain.facts.reconcile.SAME_COSINE`), a value of the same subject, the fact it
claims to correct, and for an extracted fact the past facts of the same words. Each is found
here without reading the user's other facts (:func:`candidates`, :func:`past_same`): the
words and the subject by their indexed keys (:mod:`.fact_keys`), the most similar vector by
one matrix product over the user's current vectors, which the process keeps between reads
(:mod:`.fact_matrix`), and which it keeps as they are after the add (the matrix the
decision leaves: the new fact in, the retired one out). An add costs index lookups and
that product; it reads the user's vectors only when another writer changed them since:
linear in the profile at worst, where every add used to read every fact (n adds:
quadratic).

A past fact is recognized by its words only (case, spacing and end punctuation aside): a
user's history grows without bound, and comparing a vector with all of it is what this
avoids. An extracted rephrasing of a retired fact is filed as a new fact.

A decision that would make one more current fact is refused when the user has
``max_facts`` current facts already (:class:`~memory_chain.errors.FactLimitError`): in the
transaction that decided it, holding the user's lock, so that concurrent adds cannot pass
the limit together.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, select

from memory_chain import metrics
from memory_chain.errors import FactLimitError
from memory_chain.facts.model import Fact
from memory_chain.facts.reconcile import SAME_COSINE, Known
from memory_chain.facts.rules import Decision, FactChange, decide
from memory_chain.tiers.sql.fact_keys import subject_digest, text_key
from memory_chain.tiers.sql.fact_matrix import FactMatrices, read_version
from memory_chain.tiers.sql.fact_writes import carry_out, fact_from_row, fact_of, vector_of
from memory_chain.tiers.sql.models import facts
from memory_chain.tiers.sql.rows import in_chunks


def candidates(
    conn: Connection, new: Fact, vector: np.ndarray | None, similar: str | None
) -> list[Known]:
    """The user's current facts ``new`` may be (same words or subject, or ``similar``).

    Index lookups: the facts of ``new``'s words, those of its subject (when it names one
    that decides), and ``similar``, the id of the most similar current fact when it is
    similar enough to be the same. One query each (an ``OR`` of them SQLite answers by
    reading every current fact of the user). Oldest first, as they were written.
    """
    user_id = new.user_id
    mine = (facts.c.user_id == user_id, facts.c.status == "current")
    lookups = [select(facts).where(*mine, facts.c.text_key == text_key(new.text))]
    about = subject_digest(new.subject)
    if about is not None:
        lookups.append(select(facts).where(*mine, facts.c.subject_key == about))
    if similar is not None:
        lookups.append(select(facts).where(facts.c.id == similar))
    found: dict[str, Any] = {}
    for lookup in lookups:
        found.update((row.id, row) for row in conn.execute(lookup).all())
    rows = sorted(
        (row for row in found.values() if row.user_id == user_id and row.status == "current"),
        key=lambda row: (row.created_at, row.id),
    )
    return [Known(fact_from_row(row), vector_of(row.embedding)) for row in rows]


def past_same(conn: Connection, user_id: str, text: str) -> list[Known]:
    """The user's superseded and dismissed facts of these words (case, spacing aside)."""
    rows = conn.execute(
        select(facts)
        .where(
            facts.c.user_id == user_id,
            facts.c.text_key == text_key(text),
            facts.c.status != "current",
        )
        .order_by(facts.c.created_at, facts.c.id)
    ).all()
    return [Known(fact_from_row(row), vector_of(row.embedding)) for row in rows]


def adds_one(decision: Decision) -> bool:
    """Whether carrying ``decision`` out makes one more current fact."""
    return decision.store == "current" and decision.retire is None


def add_fact(
    conn: Connection,
    new: Fact,
    embedding: bytes | None,
    *,
    replaces: str | None,
    keep: Collection[str],
    matrices: FactMatrices,
    max_facts: int,
) -> FactChange:
    """Decide what ``new`` does from the user's facts as ``conn`` reads them, and do it.

    Args:
        conn: The transaction, holding the user's lock.
        new: The fact as it would be stored.
        embedding: Its vector, as stored.
        replaces: The id of the fact it claims to correct, if any.
        keep: Ids of facts the subject rule must not retire.
        matrices: The process's cache of the users' current vectors.
        max_facts: The most current facts the user may have.

    Raises:
        FactLimitError: The decision adds a current fact and the user has ``max_facts``.
    """
    user_id = new.user_id
    vector = vector_of(embedding)
    matrix = matrices.get(conn, user_id)
    target = fact_of(conn, user_id, replaces) if replaces is not None else None
    decision = decide(
        new,
        vector,
        candidates(conn, new, vector, matrix.similar(vector, SAME_COSINE)),
        target=fact_from_row(target) if target is not None else None,
        past=lambda: past_same(conn, user_id, new.text),
        keyed=new.key is not None,
        keep=keep,
    )
    if adds_one(decision):
        check_room(user_id, len(matrix.ids), 1, max_facts, origin=new.origin)
    # A writer that holds no lock may have changed the facts since they were read: then the
    # matrix is not kept (the next read reads the facts again).
    unchanged = read_version(conn, user_id) == matrix.version
    change = carry_out(conn, decision, new, embedding)
    version = read_version(conn, user_id)
    if unchanged and version != matrix.version:  # this change wrote it
        removed = [decision.retire.id] if decision.retire is not None else []
        added = [(new.id, new.valid_from, embedding)] if decision.store == "current" else []
        touched = [f.id for f in (decision.known, decision.retire_for) if f is not None]
        after = matrix.changed(version, removed=removed, added=added, touched=touched)
        matrices.keep(user_id, after)
    return change


def check_room(user_id: str, current: int, adding: int, max_facts: int, *, origin: str) -> None:
    """Refuse ``adding`` current facts to a user with ``current`` when that passes ``max_facts``.

    Raises:
        FactLimitError: If they would pass the limit (counted by ``origin``).
    """
    if current + adding <= max_facts:
        return
    metrics.FACTS_REFUSED.labels(origin).inc(adding)
    raise FactLimitError(user_id, max_facts, current, adding)


def count_current(conn: Connection, user_ids: Collection[str]) -> dict[str, int]:
    """How many current facts each of these users has."""
    counts = dict.fromkeys(user_ids, 0)
    for chunk in in_chunks(sorted(counts)):
        rows = conn.execute(
            select(facts.c.user_id, func.count())
            .where(facts.c.user_id.in_(chunk), facts.c.status == "current")
            .group_by(facts.c.user_id)
        ).all()
        counts.update((row[0], int(row[1])) for row in rows)
    return counts
