"""One line of an export file, whatever it holds: a conversation, a fact or a store item.

Each kind has its own module (:mod:`.format` for conversations and facts, :mod:`.items` for
store items); this one dispatches on a line's ``format``: :func:`export_line` writes one,
:func:`line_from_json` reads one, :func:`check_line` checks it against the store's rules and
:func:`describe` names it in an error message.

Example:
    >>> item = line_from_json({"format": "memory-chain/fact", "version": 3,
    ...                        "id": "5b0c6f1e9d7a4c3b8e2f1a0d9c8b7a65", "user_id": "ana",
    ...                        "text": "Prefers window seats."})
    >>> check_line(item, max_chars=200_000)
    >>> export_line(item)[:40]
    '{"format":"memory-chain/fact","version":'
"""

from __future__ import annotations

import json
from datetime import datetime

from memory_chain.errors import InvalidInputError
from memory_chain.facts.model import Fact
from memory_chain.tiers.sql.restore import check_fact, check_record
from memory_chain.tiers.sql.rows import ConversationRecord
from memory_chain.tiers.sql.store_items import StoredItem, encode_namespace
from memory_chain.transfer.fact_lines import fact_from_json, fact_to_json
from memory_chain.transfer.fields import read_object
from memory_chain.transfer.format import (
    FACT_FORMAT,
    FORMAT,
    STORE_ITEM_FORMAT,
    record_from_json,
    record_to_json,
)
from memory_chain.transfer.items import (
    check_store_item,
    store_item_from_json,
    store_item_to_json,
)

#: What one line holds.
Line = ConversationRecord | Fact | StoredItem


def export_line(item: Line) -> str:
    """One conversation, fact or store item as a line of the export format, with its newline."""
    if isinstance(item, Fact):
        obj = fact_to_json(item)
    elif isinstance(item, StoredItem):
        obj = store_item_to_json(item)
    else:
        obj = record_to_json(item)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def line_from_json(value: object, *, now: datetime | None = None) -> Line:
    """Read one line's JSON object: a conversation, a fact or a store item, as ``format`` says.

    Args:
        value: The parsed JSON value.
        now: The time given to timestamps the object leaves out (default: now).

    Returns:
        The conversation (:func:`~.format.record_from_json`), the fact
        (:func:`~.format.fact_from_json`) or the store item
        (:func:`~.items.store_item_from_json`).

    Raises:
        InvalidInputError: If the object is none of them, or is malformed.
    """
    obj = read_object(value, "the line")
    kind = obj.get("format")
    if kind == FACT_FORMAT:
        return fact_from_json(obj, now=now)
    if kind == STORE_ITEM_FORMAT:
        return store_item_from_json(obj, now=now)
    if kind != FORMAT:
        raise InvalidInputError(
            f"format is {kind!r}, expected {FORMAT!r}, {FACT_FORMAT!r} or "
            f"{STORE_ITEM_FORMAT!r}: is this a file written by `memory-chain export`?"
        )
    return record_from_json(obj, now=now)


def check_line(item: Line, *, max_chars: int) -> None:
    """Check a line's conversation, fact or store item against the store's rules.

    Args:
        item: What :func:`line_from_json` read.
        max_chars: Longest accepted turn content.

    Raises:
        InvalidInputError: As :func:`~memory_chain.tiers.sql.restore.check_record`,
            :func:`~memory_chain.tiers.sql.restore.check_fact` or
            :func:`~.items.check_store_item` do.
    """
    if isinstance(item, Fact):
        check_fact(item)
    elif isinstance(item, StoredItem):
        check_store_item(item)
    else:
        check_record(item, max_chars=max_chars)


def describe(value: object) -> str:
    """What a line is, to start its error message with (``""`` if it does not say).

    Args:
        value: The line's parsed JSON value, well-formed or not.
    """
    if not isinstance(value, dict):
        return ""
    if value.get("format") == FACT_FORMAT:
        fact_id = value.get("id")
        return f"fact {fact_id!r}: " if isinstance(fact_id, str) else "fact: "
    if value.get("format") == STORE_ITEM_FORMAT:
        key, namespace = value.get("key"), value.get("namespace")
        named = f"store item {key!r}" if isinstance(key, str) else "store item"
        if isinstance(namespace, list) and all(isinstance(label, str) for label in namespace):
            named += f" in namespace {encode_namespace(namespace)}"
        return f"{named}: "
    cid = value.get("conversation_id")
    return f"conversation {cid!r}: " if isinstance(cid, str) else ""


__all__ = ["Line", "check_line", "describe", "export_line", "line_from_json"]
