"""Reading the users' facts in tier 2: list them, follow their history, rank them.

:class:`FactReader` is the reading half of :class:`~memory_chain.tiers.sql.facts.FactStore`
(which adds the changes): reads need no lock, and see what the last change committed. A
chat turn's profile scores every current fact of the user exactly (one matrix product over
their vectors) and reads only the best whole; the vectors stay in the process between turns
while the user's fact version says they are the database's (:mod:`.fact_matrix`), so a turn
reads one version row and a page of facts however many the user has. No read embeds: facts
stored without a vector (imported, or while no model answered) are embedded in the
background (:meth:`~memory_chain.tiers.sql.facts.FactStore.embed_pending`), and ranked
after the scored ones, newest first, until then. Lists of ids are bound a chunk at a time
(:func:`~.rows.in_chunks`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy import func, select

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.facts.model import STATUSES, Fact
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.fact_matrix import FactMatrices
from memory_chain.tiers.sql.fact_sources import said_in
from memory_chain.tiers.sql.fact_writes import FACT_COLUMNS, fact_from_row, vector_bytes
from memory_chain.tiers.sql.models import fact_sources, facts
from memory_chain.tiers.sql.rows import in_chunks

logger = logging.getLogger(__name__)

#: Embeds texts (an ``Embeddings.embed_documents``).
Embed = Callable[[list[str]], list[list[float]]]

#: Facts a profile reads whole, the most relevant first: more than a prompt's facts section
#: holds (15 % of memory's room: about 40 one-line facts in an 8k window).
PROFILE_LIMIT = 64

#: The process's cache of the users' current facts, by default (``memory_fact_cache_mb``):
#: 64 MB hold 25 users' 1,000-fact profiles (384-d vectors), or 1,300 users' of 20 facts.
FACT_CACHE_BYTES = 64 * 2**20


#: Supersessions followed from a retired fact to the one that holds now (a chain is short:
#: one per change of a subject's value).
MAX_SUPERSESSIONS = 32


@dataclass(frozen=True, slots=True)
class RankedFact:
    """A current fact and how relevant it is to the message (``None``: not scored)."""

    fact: Fact
    score: float | None


class FactReader:
    """The users' facts, read (see the module docstring).

    Creating one does no I/O.

    Args:
        database: Tier 2.
        embed: Embeds texts for reconciliation and ranking (``None``: words and dates
            only).
        cache_bytes: Most bytes of users' current fact vectors kept between reads
            (:class:`~.fact_matrix.FactMatrices`; the least recently read users' go first).
    """

    def __init__(
        self,
        database: Database,
        *,
        embed: Embed | None = None,
        cache_bytes: int = FACT_CACHE_BYTES,
    ) -> None:
        self.database = database
        self.embed = embed
        self.matrices = FactMatrices(cache_bytes)

    # -- reading ---------------------------------------------------------------------------

    def get(self, user_id: str, fact_id: str) -> Fact | None:
        """One of the user's facts, whatever its status."""
        rows = self.database.read(
            select(facts).where(facts.c.user_id == user_id, facts.c.id == fact_id)
        )
        return fact_from_row(rows[0]) if rows else None

    def of_user(
        self,
        user_id: str,
        *,
        statuses: Sequence[str] = ("current",),
        conversation_id: str | None = None,
        limit: int | None = None,
    ) -> list[Fact]:
        """The user's facts with these statuses, newest first.

        Args:
            user_id: Whose.
            statuses: Which (``"current"``, ``"superseded"``, ``"dismissed"``).
            conversation_id: Only those said in this conversation (one of their sources).
            limit: At most this many.
        """
        unknown = set(statuses) - set(STATUSES)
        if unknown:
            raise InvalidInputError(
                f"unknown fact status {sorted(unknown)[0]!r}: use {', '.join(STATUSES)}"
            )
        statement = (
            select(*FACT_COLUMNS)
            .where(facts.c.user_id == user_id, facts.c.status.in_(list(statuses)))
            .order_by(facts.c.valid_from.desc(), facts.c.created_at.desc(), facts.c.id)
        )
        if conversation_id is not None:
            statement = statement.where(facts.c.id.in_(said_in(user_id, [conversation_id])))
        if limit is not None:
            statement = statement.limit(limit)
        return [fact_from_row(row) for row in self.database.read(statement)]

    def retired(
        self, user_id: str, conversation_ids: Collection[str]
    ) -> list[tuple[Fact, Fact | None]]:
        """The user's retired facts said in these conversations, each with what holds now.

        Args:
            user_id: Whose.
            conversation_ids: Where the facts were learnt.

        Returns:
            The superseded and dismissed facts, each with the current fact that replaced it
            (through every later supersession), or ``None`` when nothing holds in its place
            (dismissed, or its replacement dismissed since). A fact said in several of the
            conversations comes once for each, its ``conversation_id`` and ``turns`` that
            source's, so that every turn that said it is found.
        """
        if not conversation_ids:
            return []
        source = fact_sources.c
        retired: list[Fact] = []
        with self.database.connect() as conn:
            for chunk in in_chunks(sorted(set(conversation_ids))):
                rows = conn.execute(
                    select(
                        *FACT_COLUMNS,
                        source.conversation_id.label("said_in"),
                        source.first_turn.label("said_first"),
                        source.last_turn.label("said_last"),
                    )
                    .join(fact_sources, source.fact_id == facts.c.id)
                    .where(
                        source.user_id == user_id,
                        source.conversation_id.in_(chunk),
                        facts.c.status != "current",
                    )
                ).all()
                retired += [
                    replace(
                        fact_from_row(row),
                        conversation_id=row.said_in,
                        turns=(row.said_first, row.said_last)
                        if row.said_first is not None
                        else None,
                    )
                    for row in rows
                ]
            known = {fact.id: fact for fact in retired}
            wanted = {f.superseded_by for f in retired if f.superseded_by} - known.keys()
            for _ in range(MAX_SUPERSESSIONS):
                if not wanted:
                    break
                later: list[Any] = []
                for chunk in in_chunks(sorted(wanted)):
                    later += conn.execute(
                        select(*FACT_COLUMNS).where(
                            facts.c.user_id == user_id, facts.c.id.in_(chunk)
                        )
                    ).all()
                known.update((row.id, fact_from_row(row)) for row in later)
                wanted = {row.superseded_by for row in later if row.superseded_by} - known.keys()

        def now(fact: Fact) -> Fact | None:
            for _ in range(MAX_SUPERSESSIONS):
                if fact.current:
                    return fact
                if fact.superseded_by is None or fact.superseded_by not in known:
                    return None
                fact = known[fact.superseded_by]
            return None

        return [(fact, now(fact)) for fact in retired]

    def count(self, user_id: str | None = None) -> dict[str, int]:
        """Facts by status (every user's, or one user's)."""
        statement = select(facts.c.status, func.count()).group_by(facts.c.status)
        if user_id is not None:
            statement = statement.where(facts.c.user_id == user_id)
        counts = dict.fromkeys(STATUSES, 0)
        counts.update({row[0]: row[1] for row in self.database.read(statement)})
        return counts

    def profile(
        self,
        user_id: str,
        vector: Sequence[float] | np.ndarray | None = None,
        *,
        limit: int | None = PROFILE_LIMIT,
    ) -> list[RankedFact]:
        """The user's current facts, most relevant to ``vector`` first (at most ``limit``).

        Every current fact is scored (one matrix product over the user's vectors, which the
        process keeps, with the facts, while the user's fact version stays:
        :mod:`.fact_matrix`). A read costs the version's row and the product, however many
        facts the user has; after a change by another process, one read of them all; after
        an add by this one, a read of the new fact when first shown. Facts without a vector
        yet (imported, or stored while the model was down: the background embeds them)
        follow the scored ones, newest first. Without ``vector``: newest first.
        ``limit=None`` gives them all.
        """
        query = np.asarray(vector, dtype="<f4") if vector is not None else None
        with self.database.connect() as conn:
            matrix = self.matrices.get(conn, user_id, whole=True)
            chosen = matrix.ranked(query, limit)
            shown = matrix.shown
            unread = [matrix.ids[p] for p, _ in chosen if matrix.ids[p] not in shown]
            for chunk in in_chunks(unread):
                # By their ids alone: the planner then takes the key's index (with the user
                # and status in the condition SQLite read every current fact of the user).
                rows = conn.execute(select(*FACT_COLUMNS).where(facts.c.id.in_(chunk))).all()
                shown.update(
                    (row.id, fact_from_row(row))
                    for row in rows
                    if row.user_id == user_id and row.status == "current"
                )
        return [
            RankedFact(shown[matrix.ids[position]], score)
            for position, score in chosen
            if matrix.ids[position] in shown
        ]

    def _embedding(self, text: str) -> bytes | None:
        """``text``'s vector as stored (normalized float32), or ``None`` without one."""
        return self._embeddings([text])[0]

    def _embeddings(self, texts: Sequence[str]) -> list[bytes | None]:
        """The vectors of ``texts`` as stored (one call of the model), ``None`` without one."""
        if self.embed is None or not texts:
            return [None] * len(texts)
        try:
            return [vector_bytes(vector) for vector in self.embed(list(texts))]
        except MemoryChainError as exc:
            logger.warning("not embedded (facts are matched by their words): %s", exc)
            return [None] * len(texts)
