"""The plain format: a message per JSON line or CSV row: conversation, role, content, timestamp.

For chat logs from anywhere else, written by a short script. Each message names its
conversation; messages of a conversation are kept in file order (they need not be
adjacent). JSON Lines::

    {"conversation": "lisbon-trip", "role": "user", "content": "We fly on 3 May.",
     "timestamp": "2024-04-20T09:00:00Z", "title": "Trip to Lisbon"}

CSV, with a header row (columns in any order, more columns ignored)::

    conversation,role,content,timestamp,title
    lisbon-trip,user,We fly on 3 May.,2024-04-20T09:00:00Z,Trip to Lisbon

* ``conversation`` (required): the conversation's name in the file. Memory's conversation id
  is ``import-`` and the name (a hash of it if it has characters ids do not take).
* ``role`` (required): ``user`` or ``assistant`` (``human`` and ``ai`` too); other roles
  (``system``, ``tool``) are left out and counted.
* ``content``: the text; an empty message is left out and counted.
* ``timestamp``: ISO 8601 (UTC without an offset) or epoch seconds; empty: the time of the
  message before it.
* ``title`` (optional): the conversation's title (the first one given counts).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from memory_chain.errors import InvalidInputError
from memory_chain.imports.model import (
    HistoryConversation,
    HistoryTurn,
    dated,
    derived_id,
    epoch_time,
)
from memory_chain.schemas import Role, as_utc

PLAIN_COLUMNS = ("conversation", "role", "content", "timestamp")
_ROLES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
}


def is_plain_row(value: object) -> bool:
    """Whether a JSON value looks like one message of the plain format."""
    return isinstance(value, dict) and {"conversation", "role"} <= value.keys()


@dataclass
class _Building:
    title: str | None = None
    turns: list[HistoryTurn] = field(default_factory=list)
    empty: int = 0
    other: int = 0


def read_plain_rows(
    rows: Iterable[tuple[str, Mapping[str, Any]]], source: Literal["jsonl", "csv"]
) -> Iterator[HistoryConversation]:
    """The conversations of plain-format messages.

    Args:
        rows: ``(where, row)`` pairs: where the row is (for messages), and its fields.
        source: ``"jsonl"`` or ``"csv"``.

    Raises:
        InvalidInputError: If a row has no conversation or role, or a malformed timestamp;
            the message says where.
    """
    building: dict[str, _Building] = {}
    for where, row in rows:
        name = row.get("conversation")
        role = row.get("role")
        if not isinstance(name, str | int) or str(name).strip() == "":
            raise InvalidInputError(f"{where}: 'conversation' is missing: name the conversation")
        if not isinstance(role, str) or not role.strip():
            raise InvalidInputError(f"{where}: 'role' is missing: use user or assistant")
        conversation = building.setdefault(str(name), _Building())
        title = row.get("title")
        if conversation.title is None and isinstance(title, str) and title.strip():
            conversation.title = title.strip()
        stored_role = _ROLES.get(role.strip().lower())
        content = row.get("content")
        if stored_role is None or (content is not None and not isinstance(content, str)):
            conversation.other += 1
            continue
        if not content or not content.strip():
            conversation.empty += 1
            continue
        timestamp = _timestamp(row.get("timestamp"), where)
        conversation.turns.append(HistoryTurn(stored_role, content, timestamp))
    for name, conversation in building.items():
        yield HistoryConversation(
            source=source,
            source_id=name,
            conversation_id=derived_id("import-", name),
            title=conversation.title,
            turns=dated(conversation.turns, None),
            skipped_empty=conversation.empty,
            skipped_other=conversation.other,
        )


def csv_rows(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of a plain-format CSV (a header row first), with their line numbers.

    Raises:
        InvalidInputError: If the header lacks ``conversation`` or ``role``.
    """
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip().lower() for name in reader.fieldnames or ()]
    missing = [name for name in ("conversation", "role", "content") if name not in header]
    if missing:
        raise InvalidInputError(
            f"the CSV header has no {', '.join(missing)} column: the columns are "
            f"{', '.join(PLAIN_COLUMNS)} (and optionally title)"
        )
    reader.fieldnames = header
    for row in reader:
        yield f"CSV line {reader.line_num}", dict(row)


def _timestamp(value: object, where: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_time(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return epoch_time(float(text))
        except ValueError:
            pass
        try:
            return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise InvalidInputError(
        f"{where}: timestamp {value!r} is neither ISO 8601 (2024-04-20T09:00:00Z) nor epoch seconds"
    )


__all__ = ["PLAIN_COLUMNS", "csv_rows", "is_plain_row", "read_plain_rows"]
