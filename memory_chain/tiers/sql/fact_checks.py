"""The checks of what a fact change is given: its text, store key and kind.

Every door (REST, MCP, the LangGraph store, an import) reaches them through
:class:`~memory_chain.tiers.sql.facts.FactStore`, which checks before its transaction, so a
malformed fact changes nothing.
"""

from __future__ import annotations

from typing import cast

from memory_chain.errors import InvalidInputError
from memory_chain.facts.model import KINDS, MAX_FACT_CHARS, MAX_KEY_CHARS, FactKind
from memory_chain.storable import check_text


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


def checked_key(key: object) -> str:
    """A store key, as given: any string of 1 to :data:`MAX_KEY_CHARS` characters.

    Raises:
        InvalidInputError: If it is not a string, empty, too long, or holds a character the
            database cannot store (NUL, a lone surrogate).
    """
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"a fact's key is a non-empty string, got {key!r}")
    if len(key) > MAX_KEY_CHARS:
        raise InvalidInputError(
            f"a fact's key has {len(key):,} characters, more than {MAX_KEY_CHARS}: use a "
            "shorter one (uuid.uuid4().hex takes 32)"
        )
    return check_text(key, "a fact's key")


def checked_kind(kind: object) -> FactKind:
    """A fact's kind.

    Raises:
        InvalidInputError: If it is not one of :data:`~memory_chain.facts.model.KINDS`.
    """
    if kind not in KINDS:
        raise InvalidInputError(f"unknown fact kind {kind!r}: use one of {', '.join(KINDS)}")
    return cast(FactKind, kind)
