"""Changes of a user's facts: add, add those said in a range, edit, dismiss, forget.

What a new fact does (nothing, fill in a known fact, supersede an older value, go into the
history, ...) is decided by :mod:`memory_chain.facts.rules` from the facts the writing
transaction reads, holding the user's lock (one change of a user's facts at a time, across
replicas): only those it can be, found by index (:mod:`.fact_adds`), so that an add costs
the same with 20 facts or 2,000; :mod:`.fact_writes` carries the decision out. A user has
at most ``max_facts`` current facts: a change that would add one more is refused
(:class:`~memory_chain.errors.FactLimitError`, 409 over HTTP), whatever door it came
through; history is not counted. Changes keep history: an edit keeps the fact's id (clients
hold it) and files the old text as a superseded copy; a superseded or dismissed fact stays,
with the moment it stopped holding. A consolidation files a range's facts in one transaction
with the check that its conversation still exists (:meth:`FactChanges.add_said`).

:class:`FactChanges` is part of :class:`~memory_chain.tiers.sql.facts.FactStore`; these
methods live here to keep one concern per module.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import TypeVar

from sqlalchemy import Connection, select

from memory_chain.errors import FactLimitError, InvalidInputError, StorageConflictError
from memory_chain.facts.checks import checked_key, checked_kind, checked_text
from memory_chain.facts.model import MAX_FACTS_PER_USER, ORIGINS, Fact, FactDraft
from memory_chain.facts.reconcile import normalized
from memory_chain.facts.rules import FactChange, named_by
from memory_chain.schemas import as_utc, utcnow, validate_id
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.fact_adds import add_fact
from memory_chain.tiers.sql.fact_reads import FACT_CACHE_BYTES, Embed, FactReader
from memory_chain.tiers.sql.fact_writes import (
    current_facts,
    edit_row,
    fact_from_row,
    fact_of,
    facts_lock,
    retire,
    vector_of,
)
from memory_chain.tiers.sql.models import conversations
from memory_chain.tiers.sql.rows import stored_id

logger = logging.getLogger(__name__)

T = TypeVar("T")


class FactChanges(FactReader):
    """The users' facts, read (:class:`~.fact_reads.FactReader`) and changed.

    Built with the arguments of :class:`~memory_chain.tiers.sql.facts.FactStore`, which
    documents them; creating one does no I/O.
    """

    def __init__(
        self,
        database: Database,
        *,
        embed: Embed | None = None,
        max_facts: int = MAX_FACTS_PER_USER,
        cache_bytes: int = FACT_CACHE_BYTES,
    ) -> None:
        super().__init__(database, embed=embed, cache_bytes=cache_bytes)
        if max_facts < 1:
            raise ValueError(f"max_facts must be at least 1, got {max_facts}")
        self.max_facts = max_facts

    # -- writing ---------------------------------------------------------------------------

    def _write(self, user_ids: Collection[str], work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one write transaction holding these users' fact locks.

        A change reads the user's facts, decides, and writes: holding the user's lock
        (:func:`~.fact_writes.facts_lock`), the changes of one user's facts run one at a time,
        on SQLite and across PostgreSQL replicas, each deciding on what the one before it
        wrote. The embeddings are computed before (they depend on the new text only).

        Raises:
            StorageConflictError: A unique key was taken meanwhile by a write that holds no
                lock (409).
        """
        try:
            return self.database.write(work, locks=[facts_lock(user) for user in user_ids])
        except StorageConflictError as exc:
            raise StorageConflictError(
                "a concurrent change stored a fact under the same id or key first: nothing "
                "was changed; send the change again"
            ) from exc

    def _new_fact(self, user_id: str, draft: FactDraft, key: str | None = None) -> Fact:
        """The draft as a new current fact, checked (a new id; ``created_at`` is now)."""
        validate_id(user_id, "user id")
        if draft.origin not in ORIGINS:
            raise InvalidInputError(f"unknown fact origin {draft.origin!r}")
        now = utcnow()
        return Fact(
            id=uuid.uuid4().hex,
            user_id=user_id,
            text=checked_text(draft.text),
            kind=checked_kind(draft.kind),
            origin=draft.origin,
            status="current",
            created_at=now,
            valid_from=as_utc(draft.valid_from) if draft.valid_from else now,
            subject=draft.subject,
            conversation_id=draft.conversation_id,
            turns=draft.turns,
            confidence=draft.confidence,
            key=checked_key(key) if key is not None else None,
        )

    def add(
        self,
        user_id: str,
        draft: FactDraft,
        *,
        replaces: str | None = None,
        keep: Collection[str] = (),
    ) -> FactChange:
        """Add a fact: what it does is :func:`memory_chain.facts.rules.decide`'s to say.

        The decision is taken from the user's facts as this transaction reads them, holding
        the user's lock, and carried out in it: the same fact again adds nothing
        (``"same"``, or ``"filled"`` with the subject and kind it lacked), a newer value of a
        subject supersedes the older (``"superseded"``), one that started to hold before the
        current value goes into the history (``"history"``), an extracted fact that says what
        a past fact said is not brought back (``"past"``); see
        :mod:`memory_chain.facts.rules` for every outcome.

        Args:
            user_id: Whose.
            draft: The fact.
            replaces: A current fact of the user this one corrects (the extractor's claim:
                when it names no current fact of the user, the subject rule decides).
            keep: Ids of facts the subject rule must not supersede (facts learnt from the
                same range of turns: said together, they hold together).

        Raises:
            InvalidInputError: On a malformed fact.
            FactLimitError: The fact would be one more current fact of a user who has
                :attr:`max_facts` (nothing is changed).
        """
        new = self._new_fact(user_id, draft)
        embedding = self._embedding(new.text)

        def work(conn: Connection) -> FactChange:
            return self._add(conn, new, embedding, replaces=replaces, keep=keep)

        return self._write([user_id], work)

    def add_said(
        self,
        user_id: str,
        conversation_id: str,
        said: Sequence[tuple[FactDraft, str | None]],
        *,
        stored_only: bool = True,
    ) -> list[FactChange] | None:
        """Add the facts said in a range of a conversation, if the conversation still exists.

        One transaction, holding the user's lock, checks that the conversation exists and
        adds every fact (each decided as :meth:`add` decides, in order; the facts of the
        range never supersede one another by subject: said together, they hold together).
        A purge holds the same lock: it runs wholly before (nothing is added) or wholly
        after (it deletes what was added), so that no fact of a purged conversation stays.
        A draft that is not a valid fact, or one past the user's limit of current facts
        (:class:`~memory_chain.errors.FactLimitError`), is left out (logged).

        Args:
            user_id: Whose.
            conversation_id: Where the facts were said (every draft's conversation).
            said: Each fact, with the current fact it corrects (``replaces``), if any.
            stored_only: Add nothing unless the conversation is stored (``False``: facts of
                turns that are not stored, as a benchmark replays them, are added all the
                same).

        Returns:
            What adding each did, or ``None`` when the conversation no longer exists.
        """
        checked: list[tuple[Fact, str | None]] = []
        for draft, replaces in said:
            try:
                new = self._new_fact(user_id, replace(draft, conversation_id=conversation_id))
            except InvalidInputError as exc:
                logger.warning("fact %r not filed: %s", draft.text, exc)
                continue
            checked.append((new, replaces))
        embeddings = self._embeddings([new.text for new, _ in checked])
        key = stored_id(user_id, conversation_id)

        def work(conn: Connection) -> list[FactChange] | None:
            exists = select(conversations.c.id).where(conversations.c.conversation_id == key)
            if stored_only and conn.execute(exists.with_for_update(read=True)).first() is None:
                return None
            changes: list[FactChange] = []
            for (new, replaces), embedding in zip(checked, embeddings, strict=True):
                keep = {change.fact.id for change in changes}
                try:
                    changes.append(self._add(conn, new, embedding, replaces=replaces, keep=keep))
                except FactLimitError as exc:  # refused before it wrote anything: the rest go on
                    logger.warning("fact %r not filed: %s", new.text, exc)
            return changes

        return self._write([user_id], work)

    def _add(
        self,
        conn: Connection,
        new: Fact,
        embedding: bytes | None,
        *,
        replaces: str | None,
        keep: Collection[str],
    ) -> FactChange:
        return add_fact(
            conn,
            new,
            embedding,
            replaces=replaces,
            keep=keep,
            matrices=self.matrices,
            max_facts=self.max_facts,
        )

    def edit(
        self, user_id: str, fact_id: str, *, text: str | None = None, kind: str | None = None
    ) -> Fact | None:
        """Change a current fact's text or kind; the old version is kept as history.

        The fact keeps its id; a copy of what it said before is stored as superseded by it.
        Two edits of one fact run one after the other: each one's text stays in the history.

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
            row = fact_of(conn, user_id, fact_id, current=True)
            if row is None:
                return None
            return edit_row(conn, row, text=new_text, kind=new_kind, embedding=embedding, now=now)

        return self._write([user_id], work)

    def dismiss(self, user_id: str, fact_id: str) -> Fact | None:
        """Dismiss a fact: it leaves every prompt and stays in the history.

        Returns:
            The fact (dismissing twice is not an error), or ``None`` if the user has none
            with that id.
        """
        now = utcnow()

        def work(conn: Connection) -> Fact | None:
            row = fact_of(conn, user_id, fact_id)
            if row is None:
                return None
            if row.status == "current":
                retire(conn, fact_id, "dismissed", now)
                row = fact_of(conn, user_id, fact_id)
            return fact_from_row(row)

        return self._write([user_id], work)

    def forget_matching(self, user_id: str, text: str) -> list[Fact]:
        """Dismiss the current facts a "forget ..." request names (:func:`~.rules.named_by`).

        Which facts is decided in the transaction that dismisses them, holding the user's
        lock: by their words, else by the cosine of those with a vector (facts stored
        without one wait for the background: :meth:`embed_pending`).

        Returns:
            The facts dismissed.
        """
        if not normalized(text):
            return []
        vector = vector_of(self._embedding(text))
        now = utcnow()

        def work(conn: Connection) -> list[Fact]:
            named = named_by(text, vector, current_facts(conn, user_id))
            for fact in named:
                retire(conn, fact.id, "dismissed", now)
            return [replace(fact, status="dismissed", invalidated_at=now) for fact in named]

        return self._write([user_id], work)
