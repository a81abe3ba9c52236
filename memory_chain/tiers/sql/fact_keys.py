"""The keys a fact is found by without reading the user's other facts: its words, its subject.

The rulebook (:mod:`memory_chain.facts.rules`) compares a new fact with the user's facts by
three tests: the same words (:func:`~memory_chain.facts.reconcile.normalized`), the same
subject (:func:`~memory_chain.facts.grounding.subject_key`), and the cosine of their vectors.
The first two are stored with each fact (migration 0015), as digests of what is compared:

* ``text_key``: :func:`text_key`, a digest of the normalized text;
* ``subject_key``: :func:`subject_digest`, a digest of the subject's key (``NULL`` for no
  subject, or a vague one, which never decides).

Both are indexed with the user, so that the facts a new fact can be the same as, or a newer
value of, are found by an index lookup however many facts the user has. A digest (32
hexadecimal digits of SHA-256), not the text: a fact may hold 2,000 characters, more than a
PostgreSQL B-tree entry takes, and every entry is the same size. Two texts of one digest
would only make the rulebook compare one more candidate: it compares the texts themselves.

The keys are computed here, in Python (the database cannot fold case as
:func:`str.casefold` does), by every write that sets a text or a subject
(:func:`key_values`). A change of ``normalized`` or ``subject_key`` needs a migration that
computes the stored keys again, as migration 0015 computed them first.
"""

from __future__ import annotations

import hashlib
from typing import Any

from memory_chain.facts.grounding import subject_key
from memory_chain.facts.reconcile import normalized


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def text_key(text: str) -> str:
    """The key of a fact's words: equal for texts the rulebook takes for the same words."""
    return _digest(normalized(text))


def subject_digest(subject: str | None) -> str | None:
    """The key of a fact's subject (``None``: none, or a vague one that never decides)."""
    key = subject_key(subject)
    return _digest(key) if key is not None else None


def key_values(*, text: str | None = None, subject: str | None = None) -> dict[str, Any]:
    """The key columns to write with a new ``text`` and/or ``subject`` (``None``: unchanged)."""
    values: dict[str, Any] = {}
    if text is not None:
        values["text_key"] = text_key(text)
    if subject is not None:
        values["subject_key"] = subject_digest(subject)
    return values
