"""The users' facts in tier 2, the source of truth: add, put, edit, dismiss, forget, restore.

Each fact is a row of ``facts`` (migrations 0010, 0013) with its vector beside it; reading
them (list, history, the profile ranked for a prompt) is :mod:`.fact_reads`'s, which
:class:`FactStore` extends with every change. Without an embedding model the facts are kept
and listed all the same, reconciled and ranked by their words and dates only.

What a new fact does (nothing, fill in a known fact, supersede an older value, go into the
history, ...) is decided by :mod:`memory_chain.facts.rules` from the facts the writing
transaction reads, holding the user's lock (one change of a user's facts at a time, across
replicas): only those it can be, found by index (:mod:`.fact_adds`), so that an add costs
the same with 20 facts or 2,000; :mod:`.fact_writes` carries the decision out. A user has
at most ``max_facts`` current facts: a change that would add one more is refused
(:class:`~memory_chain.errors.FactLimitError`, 409 over HTTP), whatever door it came
through; history is not counted. Facts stored without a vector are embedded in the
background (:meth:`FactStore.embed_pending`). Changes keep history: an edit keeps
the fact's id (clients hold it) and files the old text as a superseded copy; a superseded or
dismissed fact stays, with the moment it stopped holding. Each conversation a fact was said
in is kept (:mod:`.fact_sources`); only a purge of the last of them, or of the user, deletes
a fact (:mod:`.fact_purge`). A consolidation files a range's facts in one transaction with
the check that its conversation still exists (:meth:`FactStore.add_said`).

Example:
    >>> facts = FactStore(store.database, embed=embeddings.embed_documents)  # doctest: +SKIP
    >>> facts.add("ana", FactDraft("My wife is Ana", kind="relationship")).action  # doctest: +SKIP
    'added'
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import TypeVar

from sqlalchemy import Connection, delete, insert, select

from memory_chain.errors import FactLimitError, InvalidInputError, StorageConflictError
from memory_chain.facts.checks import checked_key, checked_kind, checked_text
from memory_chain.facts.model import (
    MAX_FACTS_PER_USER,
    ORIGINS,
    Fact,
    FactDraft,
    FactKind,
)
from memory_chain.facts.reconcile import normalized
from memory_chain.facts.rules import FactChange, named_by
from memory_chain.schemas import as_utc, utcnow, validate_id
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.fact_adds import add_fact, check_room, count_current
from memory_chain.tiers.sql.fact_reads import FACT_CACHE_BYTES, Embed, FactReader
from memory_chain.tiers.sql.fact_sources import add_sources
from memory_chain.tiers.sql.fact_vectors import EMBED_BATCH, embed_pending
from memory_chain.tiers.sql.fact_writes import (
    current_facts,
    edit_row,
    fact_from_row,
    fact_of,
    fact_values,
    facts_lock,
    keyed_row,
    retire,
    vector_of,
)
from memory_chain.tiers.sql.models import conversations, fact_sources, facts
from memory_chain.tiers.sql.rows import in_chunks, stored_id

logger = logging.getLogger(__name__)

T = TypeVar("T")


class FactStore(FactReader):
    """The users' facts: read (:class:`~.fact_reads.FactReader`), and changed.

    Creating one does no I/O.

    Args:
        database: Tier 2.
        embed: Embeds texts for reconciliation and ranking (``None``: words and dates
            only).
        max_facts: The most current facts a user may have: a change that would add one
            more is refused (:class:`~memory_chain.errors.FactLimitError`), whoever asks.
            History (superseded and dismissed facts) is not counted.
        cache_bytes: Most bytes of users' current fact vectors kept between reads.
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

    def put(
        self, user_id: str, key: str, text: str, *, kind: FactKind | None, subject: str | None
    ) -> Fact:
        """Put a fact under a store key, as a LangGraph store's ``put`` does.

        Keys are each user's own: two users may use one key, and whether another user does
        is never said. In one transaction holding the user's lock, the user's current fact
        under ``key`` (:func:`~.fact_writes.keyed_row`) is edited (its old text stays in the
        history), or a fact is added under it: always stored, so that the key names a
        current fact (the same fact kept already, or an older value of its subject, is
        superseded by it: :mod:`memory_chain.facts.rules`). A key whose fact was dismissed
        or superseded names nothing current: putting it again adds a fact under it.

        Args:
            user_id: Whose.
            key: The client's key (any string of up to :data:`MAX_KEY_CHARS` characters,
                no NUL).
            text: The fact.
            kind: Its kind (``None``: ``"other"`` for a new fact, unchanged for a known one).
            subject: What it is about (set when the fact is added; ``None``: none, or
                unchanged).

        Returns:
            The current fact under ``key``.

        Raises:
            InvalidInputError: On a malformed fact or key, or a subject changed on the fact
                under the key.
            FactLimitError: A new fact under ``key`` would be one more current fact of a
                user who has :attr:`max_facts` (an edit is never refused).
        """
        draft = FactDraft(text, kind=kind or "other", origin="api", subject=subject)
        new = self._new_fact(user_id, draft, key)
        embedding = self._embedding(new.text)

        def work(conn: Connection) -> Fact:
            row = keyed_row(conn, user_id, key)
            if row is None:
                return self._add(conn, new, embedding, replaces=None, keep=()).fact
            known = fact_from_row(row)
            if subject is not None and subject != known.subject:
                raise InvalidInputError(
                    f"the fact under key {key[:80]!r} is about {known.subject!r}; a subject is "
                    "set when a fact is added: put the new fact under a new key (it "
                    "supersedes this one)"
                )
            new_text = new.text if new.text != known.text else None
            new_kind = kind if kind is not None and kind != known.kind else None
            if new_text is None and new_kind is None:
                return known
            return edit_row(
                conn, row, text=new_text, kind=new_kind, embedding=embedding, now=new.created_at
            )

        return self._write([user_id], work)

    def by_key(self, user_id: str, key: str) -> Fact | None:
        """The user's current fact under a store key (:func:`~.fact_writes.keyed_row`)."""
        checked_key(key)
        with self.database.connect() as conn:
            row = keyed_row(conn, user_id, key)
        return fact_from_row(row) if row is not None else None

    def dismiss_key(self, user_id: str, key: str) -> Fact | None:
        """Dismiss the user's current fact under a store key; ``None`` if there is none."""
        checked_key(key)
        now = utcnow()

        def work(conn: Connection) -> Fact | None:
            row = keyed_row(conn, user_id, key)
            if row is None:
                return None
            retire(conn, row.id, "dismissed", now)
            return replace(fact_from_row(row), status="dismissed", invalidated_at=now)

        return self._write([user_id], work)

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

    # -- export and import -----------------------------------------------------------------

    def restore(self, facts_: Sequence[Fact]) -> int:
        """Store facts as they were exported (ids, statuses, dates and sources kept; no vectors).

        A fact read without sources (a file written before they were exported) gets the
        one its ``conversation_id`` and turns name.

        A fact whose id is stored already is left as it is (an import is idempotent). The
        transaction holds the lock of every user whose facts it stores. The facts are
        embedded later, in the background (:meth:`embed_pending`).

        Returns:
            How many were stored.

        Raises:
            FactLimitError: The current facts among them would take a user past
                :attr:`max_facts` (nothing is stored).
        """
        if not facts_:
            return 0
        for fact in facts_:
            validate_id(fact.user_id, "user id")
            checked_text(fact.text)
            checked_kind(fact.kind)

        def work(conn: Connection) -> int:
            known: set[str] = set()
            for chunk in in_chunks([fact.id for fact in facts_]):
                known.update(
                    conn.execute(select(facts.c.id).where(facts.c.id.in_(chunk))).scalars()
                )
            fresh = [fact for fact in facts_ if fact.id not in known]
            adding: dict[str, int] = {}
            for fact in fresh:
                if fact.current:
                    adding[fact.user_id] = adding.get(fact.user_id, 0) + 1
            for user_id, current in count_current(conn, adding).items():
                check_room(user_id, current, adding[user_id], self.max_facts, origin="import")
            if fresh:
                conn.execute(insert(facts), [fact_values(fact, None) for fact in fresh])
            for fact in fresh:
                add_sources(conn, fact)
            return len(fresh)

        return self._write({fact.user_id for fact in facts_}, work)

    def embed_pending(self, batch: int = EMBED_BATCH) -> int:
        """Embed up to ``batch`` current facts stored without a vector (any user's).

        Run by the tier-3 backfill thread (:mod:`.fact_vectors`), never by a request.

        Returns:
            How many were embedded (0 without an embedding model).
        """
        if self.embed is None:
            return 0
        return embed_pending(self.database, self.embed, batch=batch)

    def delete_user(self, user_id: str) -> int:
        """Delete every fact of a user (rows, history included); how many there were."""

        def work(conn: Connection) -> int:
            conn.execute(delete(fact_sources).where(fact_sources.c.user_id == user_id))
            return int(conn.execute(delete(facts).where(facts.c.user_id == user_id)).rowcount)

        return self._write([user_id], work)
