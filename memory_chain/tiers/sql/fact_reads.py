"""Reading the users' facts in tier 2: list them, follow their history, rank them.

:class:`FactReader` is the reading half of :class:`~memory_chain.tiers.sql.facts.FactStore`
(which adds the changes): reads need no lock, and see what the last change committed. A
user's facts are few (tens, hundreds), read whole for every chat turn's profile, so they are
scored where they are read, exactly (a dot product per fact), rather than kept in step with a
second store. Facts stored while no embedding model was at hand are embedded when first
ranked with one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, select, update

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.facts.model import STATUSES, Fact
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.fact_sources import said_in
from memory_chain.tiers.sql.fact_writes import fact_from_row, vector_bytes
from memory_chain.tiers.sql.models import fact_sources, facts

logger = logging.getLogger(__name__)

#: Embeds texts (an ``Embeddings.embed_documents``).
Embed = Callable[[list[str]], list[list[float]]]

#: Facts a profile reads whole, the most relevant first: more than a prompt's facts section
#: holds (15 % of memory's room: about 40 one-line facts in an 8k window).
PROFILE_LIMIT = 64

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
    """

    def __init__(self, database: Database, *, embed: Embed | None = None) -> None:
        self.database = database
        self.embed = embed

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
            select(facts)
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
        rows = self.database.read(
            select(
                facts,
                source.conversation_id.label("said_in"),
                source.first_turn.label("said_first"),
                source.last_turn.label("said_last"),
            )
            .join(fact_sources, source.fact_id == facts.c.id)
            .where(
                source.user_id == user_id,
                source.conversation_id.in_(sorted(set(conversation_ids))),
                facts.c.status != "current",
            )
        )
        retired = [
            replace(
                fact_from_row(row),
                conversation_id=row.said_in,
                turns=(row.said_first, row.said_last) if row.said_first is not None else None,
            )
            for row in rows
        ]
        known = {fact.id: fact for fact in retired}
        wanted = {f.superseded_by for f in retired if f.superseded_by} - known.keys()
        for _ in range(MAX_SUPERSESSIONS):
            if not wanted:
                break
            later = self.database.read(
                select(facts).where(facts.c.user_id == user_id, facts.c.id.in_(sorted(wanted)))
            )
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

        Every current fact is scored (one matrix product over the stored vectors); only the
        best ``limit`` are read whole. Facts without a vector (stored while no embedding
        model was at hand) are embedded now when one is, and kept; those still unscored
        follow the scored ones, newest first. Without ``vector``: newest first.
        """
        keys = self.database.read(
            select(facts.c.id, facts.c.text, facts.c.embedding)
            .where(facts.c.user_id == user_id, facts.c.status == "current")
            .order_by(facts.c.valid_from.desc(), facts.c.id)
        )
        if not keys:
            return []
        scores: dict[str, float] = {}
        if vector is not None:
            query = np.asarray(vector, dtype="<f4")
            size = query.nbytes
            missing = [row for row in keys if not row.embedding]
            if missing and self.embed is not None:
                for fact_id, embedded in self._embed_missing(missing).items():
                    scores[fact_id] = float(embedded @ query)
            have = [row for row in keys if row.embedding and len(row.embedding) == size]
            if have:
                matrix = np.frombuffer(b"".join(row.embedding for row in have), dtype="<f4")
                products = matrix.reshape(len(have), -1) @ query
                scores.update(
                    (row.id, float(score)) for row, score in zip(have, products, strict=True)
                )
        # Stable: unscored facts keep their newest-first order after the scored ones.
        order = sorted((row.id for row in keys), key=lambda i: -scores.get(i, -2.0))
        chosen = order[:limit] if limit is not None else order
        rows = self.database.read(select(facts).where(facts.c.id.in_(chosen)))
        by_id = {row.id: fact_from_row(row) for row in rows}
        return [RankedFact(by_id[i], scores.get(i)) for i in chosen if i in by_id]

    def _embed_missing(self, rows: Sequence[Any]) -> dict[str, np.ndarray]:
        assert self.embed is not None
        try:
            embedded = self.embed([row.text for row in rows])
        except MemoryChainError as exc:
            logger.warning("facts not embedded (ranked by date): %s", exc)
            return {}
        blobs = {row.id: vector_bytes(v) for row, v in zip(rows, embedded, strict=True)}

        def work(conn: Connection) -> None:
            for row in rows:  # only if the text is still the one embedded
                conn.execute(
                    update(facts)
                    .where(facts.c.id == row.id, facts.c.text == row.text)
                    .values(embedding=blobs[row.id])
                )

        self.database.write(work)
        return {fact_id: np.frombuffer(blob, dtype="<f4") for fact_id, blob in blobs.items()}

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

    def _embed_unscored(self, user_id: str) -> None:
        """Embed the user's current facts stored without a vector."""
        rows = self.database.read(
            select(facts.c.id, facts.c.text).where(
                facts.c.user_id == user_id,
                facts.c.status == "current",
                facts.c.embedding.is_(None),
            )
        )
        if rows and self.embed is not None:
            self._embed_missing(rows)
