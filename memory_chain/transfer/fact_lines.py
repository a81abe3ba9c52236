"""The fact line of ``memory-chain export`` / ``import``: one fact a user's memory holds.

The line is documented with the others in :mod:`.format`: every field of
:func:`~memory_chain.facts.model.fact_json`; ``key`` only for a fact put under a store key,
``sources`` only for a fact said in more than one conversation. Lines written before either
field are read as they were: an id that was a store key gets the id migration 0013 would
have given it, and a fact without ``sources`` has the one its ``conversation_id`` and
``turns`` name.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, cast

from memory_chain.errors import InvalidInputError
from memory_chain.facts.model import (
    FACT_ID,
    Fact,
    FactKind,
    FactOrigin,
    FactSource,
    FactStatus,
    fact_json,
    keyed_id,
    own_source,
)
from memory_chain.schemas import utcnow
from memory_chain.transfer.fields import (
    check_fields,
    check_version,
    format_timestamp,
    read_int,
    read_list,
    read_object,
    read_str,
    read_time,
)
from memory_chain.transfer.format import FACT_FORMAT, FACT_VERSIONS, VERSION

#: What a store key looked like when it was a fact's id (before the ``key`` field).
_STORE_KEY = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
_FACT_FIELDS = frozenset(
    {
        "format",
        "version",
        "id",
        "user_id",
        "text",
        "kind",
        "origin",
        "status",
        "subject",
        "conversation_id",
        "turns",
        "confidence",
        "created_at",
        "valid_from",
        "invalidated_at",
        "superseded_by",
        "key",
        "sources",
    }
)
_SOURCE_FIELDS = frozenset({"conversation_id", "turns", "said_at"})


def fact_to_json(fact: Fact) -> dict[str, Any]:
    """A fact as the JSON object of one line (without its vector; ``key`` only if it has one).

    A fact put under no store key has no ``key`` field, and one whose sources are the one
    its ``conversation_id`` and ``turns`` name (or none) no ``sources`` field, so that such
    lines stay the same in every version (and readable by the versions before them).
    """
    line = {"format": FACT_FORMAT, "version": VERSION, **fact_json(fact, format_timestamp)}
    if line["key"] is None:
        del line["key"]
    own = own_source(fact)
    if fact.sources in ((), (own,)):
        del line["sources"]
    return line


def _turn_range(value: object, where: str = "turns") -> tuple[int, int] | None:
    if value is None:
        return None
    pair = read_list(value, where)
    if len(pair) != 2:
        raise InvalidInputError(
            f"{where} must be [first, last] (two turn numbers) or null, got {len(pair)} values"
        )
    first = cast(int, read_int(pair[0], f"{where}[0]"))
    return first, cast(int, read_int(pair[1], f"{where}[1]"))


def _confidence(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(
            f"confidence must be a number between 0 and 1 or null, got {value!r}"
        )
    return float(value)


def _source(value: object, index: int, now: datetime) -> FactSource:
    where = f"sources[{index}]"
    obj = read_object(value, where)
    check_fields(obj, _SOURCE_FIELDS, f"{where}: ")
    return FactSource(
        conversation_id=read_str(obj.get("conversation_id"), f"{where}.conversation_id") or "",
        turns=_turn_range(obj.get("turns"), f"{where}.turns"),
        said_at=read_time(obj.get("said_at"), f"{where}.said_at", now),
    )


def _sources(value: object, now: datetime) -> tuple[FactSource, ...]:
    if value is None:
        return ()
    return tuple(_source(s, i, now) for i, s in enumerate(read_list(value, "sources")))


def fact_from_json(value: object, *, now: datetime | None = None) -> Fact:
    """Read one fact line's JSON object (see the module docstring for the format).

    Args:
        value: The parsed JSON value.
        now: The ``created_at`` of a fact that leaves it out (default: now).

    Returns:
        The fact; :func:`~memory_chain.tiers.sql.restore.check_fact` checks it against the
        store's rules.

    Raises:
        InvalidInputError: If the object is not a fact of a format version that has facts,
            or a field has the wrong type; the message names the field.
    """
    now = now or utcnow()
    obj = read_object(value, "the line")
    if obj.get("format") != FACT_FORMAT:
        raise InvalidInputError(f"format is {obj.get('format')!r}, expected {FACT_FORMAT!r}")
    check_version(obj, FACT_VERSIONS, "facts")
    check_fields(obj, _FACT_FIELDS, "")
    created_at = read_time(obj.get("created_at"), "created_at", now)
    invalidated_at = obj.get("invalidated_at")
    user_id = read_str(obj.get("user_id"), "user_id") or ""
    fact_id = read_str(obj.get("id"), "id") or ""
    key = read_str(obj.get("key"), "key", optional=True)
    superseded_by = read_str(obj.get("superseded_by"), "superseded_by", optional=True)
    if key is None and _STORE_KEY.fullmatch(fact_id) and not FACT_ID.fullmatch(fact_id):
        # Written before keys had their own field: the id was the store key.
        fact_id, key = keyed_id(user_id, fact_id), fact_id
    if (
        superseded_by is not None
        and _STORE_KEY.fullmatch(superseded_by)
        and not FACT_ID.fullmatch(superseded_by)
    ):
        superseded_by = keyed_id(user_id, superseded_by)
    return Fact(
        id=fact_id,
        user_id=user_id,
        text=read_str(obj.get("text"), "text") or "",
        kind=cast(FactKind, read_str(obj.get("kind", "other"), "kind")),
        origin=cast(FactOrigin, read_str(obj.get("origin", "api"), "origin")),
        status=cast(FactStatus, read_str(obj.get("status", "current"), "status")),
        created_at=created_at,
        valid_from=read_time(obj.get("valid_from"), "valid_from", created_at),
        subject=read_str(obj.get("subject"), "subject", optional=True),
        conversation_id=read_str(obj.get("conversation_id"), "conversation_id", optional=True),
        turns=_turn_range(obj.get("turns")),
        confidence=_confidence(obj.get("confidence")),
        invalidated_at=(
            None
            if invalidated_at is None
            else read_time(invalidated_at, "invalidated_at", created_at)
        ),
        superseded_by=superseded_by,
        key=key,
        sources=_sources(obj.get("sources"), created_at),
    )


__all__ = ["fact_from_json", "fact_to_json"]
