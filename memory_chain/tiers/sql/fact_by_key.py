"""Facts under a client's key, as a LangGraph store keeps items: put, get, dismiss by key.

A key names at most one current fact of a user (:func:`~.fact_writes.keyed_row`); keys are
each user's own, and whether another user uses one is never said. Putting a key edits its
fact (the old text stays in the history) or adds one under it, decided as every change is
(:class:`~.fact_changes.FactChanges`). The LangGraph store's facts namespace
(:mod:`memory_chain.integrations.store_facts`) is the door that uses them.

:class:`FactsByKey` is part of :class:`~memory_chain.tiers.sql.facts.FactStore`; these
methods live here to keep one concern per module.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import Connection

from memory_chain.errors import InvalidInputError
from memory_chain.facts.checks import checked_key
from memory_chain.facts.model import Fact, FactDraft, FactKind
from memory_chain.schemas import utcnow
from memory_chain.tiers.sql.fact_changes import FactChanges
from memory_chain.tiers.sql.fact_writes import edit_row, fact_from_row, keyed_row, retire


class FactsByKey(FactChanges):
    """The users' facts, also by store key (see the module's docstring)."""

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
