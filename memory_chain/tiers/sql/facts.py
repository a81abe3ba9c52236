"""The users' facts in tier 2, the source of truth: add, edit, dismiss, list, rank.

Each fact is a row of ``facts`` (migration 0010) with its vector beside it. A user's facts
are few (tens, hundreds), read whole for every chat turn's profile, so they are scored where
they are read, exactly (a dot product per fact), rather than kept in step with a second store:
there is nothing to lose between two stores, the facts work with tier 3 off or down, and on
PostgreSQL replicas share them with nothing else to run. Without an embedding model the
facts are kept and listed all the same, reconciled and ranked by their words and dates only.

Changes keep history: an edit keeps the fact's id (clients hold it) and files the old text
as a superseded copy; a newer value of the same subject supersedes the older fact; a
dismissal marks the fact. Only a purge of the conversation a fact came from, or of the user,
deletes rows. The same fact said again adds no row, but a known fact that lacks a subject or
kind takes the new one's (an explicit "remember that ..." is saved without; the extractor
later finds the same fact with them): that fills in what the fact is about, not what it
says, so no history is kept; and if the subject shows that the fact and another are values
of one subject, the newer supersedes the older.

Example:
    >>> facts = FactStore(store.database, embed=embeddings.embed_documents)  # doctest: +SKIP
    >>> facts.add("ana", FactDraft("My wife is Ana", kind="relationship")).action  # doctest: +SKIP
    'added'
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, cast

import numpy as np
from sqlalchemy import Connection, delete, func, insert, select, update

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.facts.grounding import names
from memory_chain.facts.model import (
    KINDS,
    MAX_FACT_CHARS,
    ORIGINS,
    STATUSES,
    Fact,
    FactDraft,
    FactKind,
    FactOrigin,
    FactStatus,
)
from memory_chain.facts.reconcile import (
    Decision,
    Known,
    decide,
    filled,
    normalized,
    same_as,
    updated_by_subject,
)
from memory_chain.schemas import as_utc, utcnow, validate_id
from memory_chain.storable import check_text
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.models import facts
from memory_chain.tiers.sql.rows import naive_utc

logger = logging.getLogger(__name__)

#: Embeds texts (an ``Embeddings.embed_documents``).
Embed = Callable[[list[str]], list[list[float]]]

#: Facts a profile reads whole, the most relevant first: more than a prompt's facts section
#: holds (15 % of memory's room: about 40 one-line facts in an 8k window).
PROFILE_LIMIT = 64

#: A cosine at which a "forget ..." request names a fact its words do not.
FORGET_COSINE = 0.6

#: Supersessions followed from a retired fact to the one that holds now (a chain is short:
#: one per change of a subject's value).
MAX_SUPERSESSIONS = 32


@dataclass(frozen=True, slots=True)
class FactChange:
    """What adding a fact did.

    Attributes:
        action: ``"added"``, ``"same"`` (the user has it already: no row added) or
            ``"superseded"`` (added, and ``replaced`` retired).
        fact: The new fact, or the one already known (with the subject and kind it lacked
            filled in; superseded, if that showed a newer value of its subject).
        replaced: The fact it superseded (for ``"same"``: the one the known fact, given its
            subject, superseded).
    """

    action: Literal["added", "same", "superseded"]
    fact: Fact
    replaced: Fact | None = None


@dataclass(frozen=True, slots=True)
class RankedFact:
    """A current fact and how relevant it is to the message (``None``: not scored)."""

    fact: Fact
    score: float | None


def _vector_bytes(vector: Sequence[float]) -> bytes:
    array = np.asarray(vector, dtype="<f4")
    norm = float(np.linalg.norm(array))
    return (array / norm if norm else array).astype("<f4").tobytes()


def _vector(blob: bytes | None) -> np.ndarray | None:
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
    }


def checked_text(text: object) -> str:
    """A fact's text, trimmed.

    Raises:
        InvalidInputError: If it is not a string, empty, or too long.
    """
    if not isinstance(text, str):
        raise InvalidInputError("a fact's text must be a string")
    cleaned = check_text(text, "a fact's text").strip()
    if not cleaned:
        raise InvalidInputError("a fact's text must not be empty")
    if len(cleaned) > MAX_FACT_CHARS:
        raise InvalidInputError(
            f"a fact's text has {len(cleaned):,} characters, more than {MAX_FACT_CHARS:,}: "
            "state it in a sentence or two"
        )
    return cleaned


def checked_kind(kind: object) -> FactKind:
    """A fact's kind.

    Raises:
        InvalidInputError: If it is not one of :data:`~memory_chain.facts.model.KINDS`.
    """
    if kind not in KINDS:
        raise InvalidInputError(f"unknown fact kind {kind!r}: use one of {', '.join(KINDS)}")
    return cast(FactKind, kind)


class FactStore:
    """The users' facts (see the module docstring).

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
            conversation_id: Only those learnt in this conversation.
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
            statement = statement.where(facts.c.conversation_id == conversation_id)
        if limit is not None:
            statement = statement.limit(limit)
        return [fact_from_row(row) for row in self.database.read(statement)]

    def retired(
        self, user_id: str, conversation_ids: Collection[str]
    ) -> list[tuple[Fact, Fact | None]]:
        """The user's retired facts learnt in these conversations, each with what holds now.

        Args:
            user_id: Whose.
            conversation_ids: Where the facts were learnt.

        Returns:
            The superseded and dismissed facts, each with the current fact that replaced it
            (through every later supersession), or ``None`` when nothing holds in its place
            (dismissed, or its replacement dismissed since).
        """
        if not conversation_ids:
            return []
        rows = self.database.read(
            select(facts).where(
                facts.c.user_id == user_id,
                facts.c.status != "current",
                facts.c.conversation_id.in_(sorted(set(conversation_ids))),
            )
        )
        retired = [fact_from_row(row) for row in rows]
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
        blobs = {row.id: _vector_bytes(v) for row, v in zip(rows, embedded, strict=True)}

        def work(conn: Connection) -> None:
            for row in rows:  # only if the text is still the one embedded
                conn.execute(
                    update(facts)
                    .where(facts.c.id == row.id, facts.c.text == row.text)
                    .values(embedding=blobs[row.id])
                )

        self.database.write(work)
        return {fact_id: np.frombuffer(blob, dtype="<f4") for fact_id, blob in blobs.items()}

    # -- writing ---------------------------------------------------------------------------

    def _embedding(self, text: str) -> bytes | None:
        """``text``'s vector as stored (normalized float32), or ``None`` without one."""
        if self.embed is None:
            return None
        try:
            return _vector_bytes(self.embed([text])[0])
        except MemoryChainError as exc:
            logger.warning("not embedded (facts are matched by their words): %s", exc)
            return None

    def add(
        self,
        user_id: str,
        draft: FactDraft,
        *,
        replaces: str | None = None,
        fact_id: str | None = None,
        keep: Collection[str] = (),
    ) -> FactChange:
        """Add a fact, reconciled with the user's current ones (:mod:`.reconcile`).

        An extracted fact (origin ``"extracted"``) that says what a retired fact of the user
        said (superseded or dismissed: the same words, or a cosine of at least
        :data:`~memory_chain.facts.reconcile.SAME_COSINE`) is not stored: extraction reads
        old turns again, and a small model repeats a corrected value from the correction
        itself ("my niece is Lucia, not Lucja"); the user's own saves and the API's may
        bring a retired fact back. The answer is then ``"same"`` with the retired fact.

        A newer value of a subject that started to hold *before* the current one
        (``valid_from``: an older conversation consolidated late) does not retire it: it is
        stored as already superseded by it (``"added"``, the fact in the history).

        Args:
            user_id: Whose.
            draft: The fact.
            replaces: A current fact of the user this one corrects (superseded whatever the
                rule says).
            fact_id: Store the fact under this id (a key the client chose, as in LangGraph's
                store) rather than a new one. The fact is then always stored: one the user
                has already is superseded by it instead of kept, so that the id names a
                current fact.
            keep: Ids of facts the subject rule must not supersede (facts learnt from the
                same range of turns: said together, they hold together).

        Raises:
            InvalidInputError: On a malformed fact, if ``replaces`` is not a current fact of
                the user, or if ``fact_id`` is malformed or names a stored fact.
        """
        validate_id(user_id, "user id")
        if fact_id is not None:
            validate_id(fact_id, "fact id")
        text = checked_text(draft.text)
        kind = checked_kind(draft.kind)
        if draft.origin not in ORIGINS:
            raise InvalidInputError(f"unknown fact origin {draft.origin!r}")
        embedding = self._embedding(text)
        vector = _vector(embedding)
        now = utcnow()

        def work(conn: Connection) -> FactChange:
            if (
                fact_id is not None
                and conn.execute(select(facts.c.id).where(facts.c.id == fact_id)).first()
            ):
                # Ids are unique across users; whose fact it is, is not said.
                raise InvalidInputError(
                    f"the fact id {fact_id!r} is taken (by a stored fact, current or past): "
                    "choose another, e.g. uuid.uuid4().hex"
                )
            rows = conn.execute(
                select(facts).where(facts.c.user_id == user_id, facts.c.status == "current")
            ).all()
            known = [Known(fact_from_row(row), _vector(row.embedding)) for row in rows]
            if replaces is not None:
                decided = _correction(
                    conn, replaces, (text, vector), draft, known, now=now, fact_id=fact_id
                )
            else:
                decided = decide(text, draft.subject, vector, known, keep=keep)
                if decided.action != "same" and draft.origin == "extracted" and fact_id is None:
                    retired = _retired_same(conn, user_id, text, vector)
                    if retired is not None:
                        decided = FactChange("same", retired)
            if isinstance(decided, FactChange):
                return decided
            decision_action, old = decided.action, decided.target
            by_subject = replaces is None and decision_action == "supersede"
            if decision_action == "same" and fact_id is not None:
                decision_action = "supersede"  # the client's id must name the fact
            if decision_action == "same" and old is not None:
                return _learn(conn, old, (draft.subject, kind), known, now)
            fact = Fact(
                id=fact_id or uuid.uuid4().hex,
                user_id=user_id,
                text=text,
                kind=kind,
                origin=draft.origin,
                status="current",
                created_at=now,
                valid_from=as_utc(draft.valid_from) if draft.valid_from else now,
                subject=draft.subject,
                conversation_id=draft.conversation_id,
                turns=draft.turns,
                confidence=draft.confidence,
            )
            conn.execute(insert(facts).values(**fact_values(fact, embedding)))
            if by_subject and old is not None and _held_since(fact) < _held_since(old):
                # Learnt late (an older conversation consolidated after a newer one): the
                # value that started to hold later stays; this one goes into the history.
                _retire(conn, fact.id, "superseded", now, superseded_by=old.id)
                return FactChange("added", replace_status(fact, old.id, now))
            if decision_action == "supersede" and old is not None:
                _retire(conn, old.id, "superseded", now, superseded_by=fact.id)
                return FactChange("superseded", fact, replace_status(old, fact.id, now))
            return FactChange("added", fact)

        change: FactChange = self.database.write(work)
        return change

    def edit(
        self, user_id: str, fact_id: str, *, text: str | None = None, kind: str | None = None
    ) -> Fact | None:
        """Change a current fact's text or kind; the old version is kept as history.

        The fact keeps its id; a copy of what it said before is stored as superseded by it.

        Returns:
            The edited fact, or ``None`` if the user has no current fact with that id.

        Raises:
            InvalidInputError: On a malformed text or kind, or when neither is given.
        """
        if text is None and kind is None:
            raise InvalidInputError("give the fact's new text, its new kind, or both")
        new_text = checked_text(text) if text is not None else None
        new_kind = checked_kind(kind) if kind is not None else None
        embedding = self._embedding(new_text) if new_text is not None else None
        now = utcnow()

        def work(conn: Connection) -> Fact | None:
            row = conn.execute(
                select(facts).where(
                    facts.c.user_id == user_id, facts.c.id == fact_id, facts.c.status == "current"
                )
            ).first()
            if row is None:
                return None
            old = fact_from_row(row)
            history = replace(
                old,
                id=uuid.uuid4().hex,
                status="superseded",
                invalidated_at=now,
                superseded_by=old.id,
            )
            conn.execute(insert(facts).values(**fact_values(history, row.embedding)))
            values: dict[str, Any] = {"valid_from": naive_utc(now), "origin": "api"}
            if new_text is not None:
                values.update(text=new_text, embedding=embedding)
            if new_kind is not None:
                values["kind"] = new_kind
            conn.execute(update(facts).where(facts.c.id == fact_id).values(**values))
            updated = conn.execute(select(facts).where(facts.c.id == fact_id)).one()
            return fact_from_row(updated)

        edited: Fact | None = self.database.write(work)
        return edited

    def dismiss(self, user_id: str, fact_id: str) -> Fact | None:
        """Dismiss a fact: it leaves every prompt and stays in the history.

        Returns:
            The fact (dismissing twice is not an error), or ``None`` if the user has none
            with that id.
        """
        now = utcnow()

        def work(conn: Connection) -> Fact | None:
            row = conn.execute(
                select(facts).where(facts.c.user_id == user_id, facts.c.id == fact_id)
            ).first()
            if row is None:
                return None
            if row.status == "current":
                _retire(conn, fact_id, "dismissed", now)
                row = conn.execute(select(facts).where(facts.c.id == fact_id)).one()
            return fact_from_row(row)

        dismissed: Fact | None = self.database.write(work)
        return dismissed

    def forget_matching(self, user_id: str, text: str) -> list[Fact]:
        """Dismiss the current facts a "forget ..." request names.

        The facts holding every content word of the request, by stem
        (:func:`~memory_chain.facts.grounding.names`: "that I smoke" names "I smoke a few
        cigarettes a day" and "I quit smoking last year": the user wants smoking off the
        record), or its whole text; else the one most similar to it (a cosine of at least
        :data:`FORGET_COSINE`: "my ex-husband lives in Ostwick" for "My ex-husband Femi
        moved to Ostwick").

        Returns:
            The facts dismissed.
        """
        wanted = normalized(text)
        if not wanted:
            return []
        current = self.profile(user_id, _vector(self._embedding(text)), limit=None)
        named = [
            r.fact for r in current if wanted in normalized(r.fact.text) or names(text, r.fact.text)
        ]
        if not named:
            best = current[0] if current else None
            if best is not None and best.score is not None and best.score >= FORGET_COSINE:
                named = [best.fact]
        return [f for fact in named if (f := self.dismiss(user_id, fact.id)) is not None]

    # -- export and import -----------------------------------------------------------------

    def restore(self, facts_: Sequence[Fact]) -> int:
        """Store facts as they were exported (ids, statuses and dates kept).

        A fact whose id is stored already is left as it is (an import is idempotent).

        Returns:
            How many were stored.
        """
        if not facts_:
            return 0
        for fact in facts_:
            validate_id(fact.user_id, "user id")
            checked_text(fact.text)
            checked_kind(fact.kind)

        def work(conn: Connection) -> int:
            ids = [fact.id for fact in facts_]
            known = set(conn.execute(select(facts.c.id).where(facts.c.id.in_(ids))).scalars())
            fresh = [fact for fact in facts_ if fact.id not in known]
            for fact in fresh:
                conn.execute(insert(facts).values(**fact_values(fact, None)))
            return len(fresh)

        stored: int = self.database.write(work)
        return stored

    def delete_user(self, user_id: str) -> int:
        """Delete every fact of a user (rows, history included); how many there were."""

        def work(conn: Connection) -> int:
            return int(conn.execute(delete(facts).where(facts.c.user_id == user_id)).rowcount)

        deleted: int = self.database.write(work)
        return deleted


def _correction(
    conn: Connection,
    replaces: str,
    new: tuple[str, np.ndarray | None],
    draft: FactDraft,
    known: Sequence[Known],
    *,
    now: datetime,
    fact_id: str | None,
) -> Decision | FactChange:
    """A fact that corrects the current fact ``replaces``: what to do, or what was done.

    A correction the user has already (the same words or meaning as a known fact) is no new
    row: the known fact takes the corrected one's place (its subject and kind filled in).

    Raises:
        InvalidInputError: If ``replaces`` is not a current fact of the user.
    """
    target = next((k.fact for k in known if k.fact.id == replaces), None)
    if target is None:
        raise InvalidInputError(f"no current fact {replaces!r} of this user")
    text, vector = new
    kind = checked_kind(draft.kind)
    same = same_as(text, vector, known) if fact_id is None else None
    if same is None:
        return Decision("supersede", target)
    if same.id == target.id:
        return _learn(conn, same, (draft.subject, kind), known, now)
    # Known already: the known fact is what replaces it.
    _retire(conn, target.id, "superseded", now, superseded_by=same.id)
    rest = [k for k in known if k.fact.id != target.id]
    change = _learn(conn, same, (draft.subject, kind), rest, now)
    if change.replaced is not None:
        return change
    return replace(change, replaced=replace_status(target, same.id, now))


def _retired_same(
    conn: Connection, user_id: str, text: str, vector: np.ndarray | None
) -> Fact | None:
    """The user's superseded or dismissed fact that says what ``text`` says, if any."""
    rows = conn.execute(
        select(facts).where(facts.c.user_id == user_id, facts.c.status != "current")
    ).all()
    retired = [Known(fact_from_row(row), _vector(row.embedding)) for row in rows]
    return same_as(text, vector, retired)


def _learn(
    conn: Connection,
    fact: Fact,
    draft: tuple[str | None, FactKind],
    known: Sequence[Known],
    now: datetime,
) -> FactChange:
    """The same fact said again: ``fact`` takes the subject and kind it lacks (:func:`filled`).

    With a subject now, it may be one of two values of that subject
    (:func:`~memory_chain.facts.reconcile.updated_by_subject`): the one that started to hold
    later (``valid_from``, then ``created_at``) supersedes the other.

    Args:
        conn: The transaction.
        fact: The known fact.
        draft: The subject and kind the same fact came with now.
        known: The user's current facts (``fact`` among them), with their vectors.
        now: The time of the change.
    """
    values = filled(fact, *draft)
    if not values:
        return FactChange("same", fact)
    conn.execute(update(facts).where(facts.c.id == fact.id).values(**values))
    fact = replace(
        fact,
        subject=values.get("subject", fact.subject),
        kind=cast(FactKind, values.get("kind", fact.kind)),
    )
    if "subject" not in values:
        return FactChange("same", fact)
    own = next((k.vector for k in known if k.fact.id == fact.id), None)
    others = [k for k in known if k.fact.id != fact.id]
    rival = updated_by_subject(fact.subject, own, others)
    if rival is None:
        return FactChange("same", fact)
    newer, older = sorted((fact, rival), key=_held_since, reverse=True)
    _retire(conn, older.id, "superseded", now, superseded_by=newer.id)
    if older is fact:
        return FactChange("same", replace_status(fact, newer.id, now))
    return FactChange("same", fact, replace_status(rival, fact.id, now))


def _held_since(fact: Fact) -> tuple[datetime, datetime, str]:
    """The order of two values of a subject: the newer has the later ``valid_from``.

    Then the later ``created_at``, then the id (the same answer every time).
    """
    return (fact.valid_from, fact.created_at, fact.id)


def _retire(
    conn: Connection,
    fact_id: str,
    status: FactStatus,
    now: datetime,
    *,
    superseded_by: str | None = None,
) -> None:
    conn.execute(
        update(facts)
        .where(facts.c.id == fact_id)
        .values(status=status, invalidated_at=naive_utc(now), superseded_by=superseded_by)
    )


def replace_status(fact: Fact, superseded_by: str, now: datetime) -> Fact:
    """``fact`` as it is once superseded by ``superseded_by``."""
    return replace(fact, status="superseded", invalidated_at=now, superseded_by=superseded_by)
