"""``(user_id, "facts")`` in ``MemoryStore``: the user's facts, as memory_chain keeps them.

The facts are the rows :class:`~memory_chain.tiers.sql.facts.FactStore` keeps (the chat's
profile, ``/v1/facts``), not a copy. An item's key is the key the fact was put under, or, for
a fact put under none (learnt from a chat, saved on request, added through REST or MCP), its
id; its value the fact's fields (:func:`fact_value`): ``text``, ``kind``, ``subject``,
``origin``, ``status``, ``conversation_id``, ``turns``, ``confidence``, ``created_at``,
``valid_from``, ``invalidated_at``, ``superseded_by`` (times as ISO 8601 strings, UTC).

Keys are each user's own, any string of up to 512 characters (no NUL): two users may put the
same key, and neither can learn that the other does. A fact keeps the id memory_chain gave
it (32 hexadecimal digits, what REST and MCP name it by, listed with its ``key``).

* ``get`` gives the current fact under the key; a superseded or dismissed one is history,
  not an item. When the fact under a key is superseded by a newer value of its subject (a
  move learnt from a chat, a correction), the newer fact takes the key: ``get`` answers what
  holds now (``superseded_by`` of the history says what it replaced).
* ``put`` with ``{"text": ..., "kind": ...}`` (``"content"`` is taken for ``"text"``, as
  LangGraph's memory tools write it; ``kind`` defaults to ``"other"``; ``subject`` may be
  set when the fact is added) edits the user's current fact under that key (its old text
  stays in the history), or adds a fact under it, reconciled with the user's other facts
  (one it repeats, or whose ``subject`` it shares, is superseded by it). The other fields
  of a value read back may be sent again; they are set by memory_chain and left as they are.
* ``delete`` dismisses the fact: it leaves every prompt and stays in the history; the key
  is free again (a ``put`` adds a new fact under it).
* ``search`` lists the current facts, newest first, or with a query the most similar first
  (cosine of the embedding model that embeds turns; without one, the share of the query's
  words each fact holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_chain.errors import InvalidInputError
from memory_chain.facts.checks import checked_kind, checked_text
from memory_chain.facts.model import Fact, FactKind, fact_json
from memory_chain.integrations.store_common import Hit, Query
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.store_items import FACTS

#: Fields of a fact's value that memory_chain sets: accepted in a ``put``, and ignored.
READ_ONLY = frozenset(
    {
        "origin",
        "status",
        "conversation_id",
        "turns",
        "confidence",
        "created_at",
        "valid_from",
        "invalidated_at",
        "superseded_by",
    }
)
#: Fields a ``put`` sets.
WRITABLE = frozenset({"text", "content", "kind", "subject"})


def fact_value(fact: Fact) -> dict[str, Any]:
    """A fact as an item's value (JSON: times as ISO 8601 strings; the key is the item's)."""
    hidden = ("id", "user_id", "key", "sources")
    return {k: v for k, v in fact_json(fact).items() if k not in hidden}


def item_key(fact: Fact) -> str:
    """The store key of a fact: the key it was put under, else its id."""
    return fact.key if fact.key is not None else fact.id


def _hit(user_id: str, fact: Fact, score: float | None = None) -> Hit:
    return Hit(
        namespace=(user_id, FACTS),
        key=item_key(fact),
        value=fact_value(fact),
        created_at=fact.created_at,
        updated_at=fact.valid_from,
        score=score,
    )


def _no_path(path: tuple[str, ...]) -> None:
    if path:
        raise InvalidInputError(
            f"(user_id, 'facts') has no namespaces below it, got {path!r} after 'facts': "
            "keep facts in (user_id, 'facts'), or your own items in (user_id, label, ...)"
        )


def _fields(value: object) -> tuple[str, FactKind | None, str | None]:
    """The text, kind and subject a ``put`` asks for."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"a fact's value is an object like {{'text': ..., 'kind': ...}}, got {value!r}"
        )
    unknown = sorted(set(value) - WRITABLE - READ_ONLY)
    if unknown:
        raise InvalidInputError(
            f"unknown fields {unknown} in a fact: set 'text' (or 'content'), 'kind' and "
            "'subject'; keep anything else in a namespace of your own (user_id, label)"
        )
    texts = {value[name] for name in ("text", "content") if value.get(name) is not None}
    if len(texts) != 1:
        raise InvalidInputError(
            "a fact needs its text: {'text': 'My wife is Ana'} ('content' is taken too, "
            "but not both with different texts)"
        )
    text = checked_text(texts.pop())
    kind = checked_kind(value["kind"]) if value.get("kind") is not None else None
    subject = value.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise InvalidInputError(f"a fact's subject is a string, got {subject!r}")
    return text, kind, subject


class FactNamespace:
    """``(user_id, "facts")`` (see the module docstring).

    Args:
        facts: The users' facts.
        embeddings: The model that ranks them for a query (``None``: their words).
    """

    def __init__(self, facts: FactStore, embeddings: Embeddings | None) -> None:
        self.facts = facts
        self.embeddings = embeddings

    def get(self, user_id: str, path: tuple[str, ...], key: str) -> Hit | None:
        """The user's current fact under ``key``, or ``None``."""
        _no_path(path)
        fact = self.facts.by_key(user_id, key)
        return _hit(user_id, fact) if fact is not None else None

    def put(
        self,
        user_id: str,
        path: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Any,
    ) -> None:
        """Edit the user's current fact under ``key``, or add a fact under it.

        ``index`` is not used: facts are embedded whole, as the chat ranks them.

        Raises:
            InvalidInputError: On a malformed key or value, or a subject changed on an
                existing fact.
        """
        _no_path(path)
        text, kind, subject = _fields(value)
        self.facts.put(user_id, key, text, kind=kind, subject=subject)

    def delete(self, user_id: str, path: tuple[str, ...], key: str) -> None:
        """Dismiss the fact under ``key`` (kept in the history); the key is free again."""
        _no_path(path)
        self.facts.dismiss_key(user_id, key)

    def search(
        self, user_id: str, path: tuple[str, ...], query: Query | None, want: int | None
    ) -> list[Hit]:
        """The current facts: newest first, or the most relevant to the query first."""
        _no_path(path)
        vector = query.vector() if query is not None else None
        if query is not None and vector is None:  # no model: the query's words, over all
            ranked = self.facts.profile(user_id, None, limit=None)
            return [_hit(user_id, r.fact, query.words_score(r.fact.text)) for r in ranked]
        ranked = self.facts.profile(user_id, vector, limit=want)
        return [_hit(user_id, r.fact, r.score) for r in ranked]
