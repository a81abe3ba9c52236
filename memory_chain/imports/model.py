"""What every chat-history reader produces: conversations of dated turns, and what was left out.

A reader (:mod:`.openwebui`, :mod:`.chatgpt`, :mod:`.plain`) turns an export into
:class:`HistoryConversation` objects: the conversation's id in memory (derived from the
source's own id, so that importing the same export again finds it), its title, the owner the
source names (Open WebUI's account id; ``None`` for single-user exports), and the user and
assistant turns with their own times. Messages that are not stored are counted, never a
reason to refuse the rest: empty ones in ``skipped_empty``, the others (system prompts, tool
calls and results, hidden messages, images and files without text) in ``skipped_other``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from memory_chain.schemas import ID_PATTERN, Role

#: The formats ``memory-chain import`` reads (``memory-chain`` is its own JSON Lines export).
HistoryFormat = Literal["memory-chain", "open-webui", "chatgpt", "jsonl", "csv"]
FORMATS: tuple[HistoryFormat, ...] = ("memory-chain", "open-webui", "chatgpt", "jsonl", "csv")


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    """A user or assistant message of an imported conversation, with its own time."""

    role: Role
    content: str
    timestamp: datetime | None = None


@dataclass(frozen=True, slots=True)
class HistoryConversation:
    """One conversation of an export, ready to store.

    Attributes:
        source: The format it was read from.
        source_id: Its id in the export (a chat id, a ChatGPT conversation id, the
            ``conversation`` column).
        conversation_id: Its id in memory, derived from ``source_id``.
        title: Its title, if the export has one.
        owner: The account the export names as its owner (Open WebUI), else ``None``.
        turns: The user and assistant turns, oldest first.
        skipped_empty: Messages without text (left out).
        skipped_other: Messages memory does not keep as turns (system, tool, hidden,
            non-text); left out.
    """

    source: HistoryFormat
    source_id: str
    conversation_id: str
    title: str | None
    turns: tuple[HistoryTurn, ...]
    owner: str | None = None
    skipped_empty: int = 0
    skipped_other: int = 0


def branch_to(nodes: dict[str, Any], current: object, parent_key: str) -> list[dict[str, Any]]:
    """The nodes of a message tree from its root down to ``current``, oldest first.

    Both ChatGPT's and Open WebUI's exports keep every edit and regeneration as a tree of nodes
    that name their parent; the branch the user last saw is the path up from its last node.
    The walk stops at a missing or malformed node and never loops (a cycle ends it).
    """
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while isinstance(current, str) and current in nodes and current not in seen:
        seen.add(current)
        node = nodes[current]
        if not isinstance(node, dict):
            break
        path.append(node)
        current = node.get(parent_key)
    return path[::-1]


def derived_id(prefix: str, source_id: str) -> str:
    """A conversation id from a source's id: ``<prefix><id>``, or a hash if that is no id.

    Ids that memory accepts as they are (letters, digits, ``._:@-``, at most 128 characters)
    are kept readable; anything else (spaces, slashes, very long names) becomes
    ``<prefix>`` and 32 hex digits of its SHA-256, the same every time.
    """
    candidate = f"{prefix}{source_id}"
    if ID_PATTERN.fullmatch(candidate):
        return candidate
    return prefix + hashlib.sha256(source_id.encode()).hexdigest()[:32]


def epoch_time(value: object) -> datetime | None:
    """A UTC time from epoch seconds (or milliseconds, for values past the year 5138)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    seconds = value / 1000 if value > 1e11 else value
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def sort_messages(
    messages: Iterable[HistoryTurn | None],
) -> tuple[list[HistoryTurn], int, int]:
    """The turns with text, the count of empty ones, the count of others (``None``).

    Every reader maps each message of the branch kept to a :class:`HistoryTurn` (memory
    keeps user and assistant text) or ``None`` (a message it does not keep), and sorts
    them here, so that empty and other messages are counted alike in every format.
    """
    turns: list[HistoryTurn] = []
    empty = other = 0
    for message in messages:
        if message is None:
            other += 1
        elif not message.content.strip():
            empty += 1
        else:
            turns.append(message)
    return turns, empty, other


def dated(turns: list[HistoryTurn], fallback: datetime | None) -> tuple[HistoryTurn, ...]:
    """Give undated turns the time of the turn before them (the first: ``fallback``)."""
    out: list[HistoryTurn] = []
    last = fallback
    for turn in turns:
        undated = turn.timestamp is None and last is not None
        kept = HistoryTurn(turn.role, turn.content, last) if undated else turn
        last = kept.timestamp or last
        out.append(kept)
    return tuple(out)


__all__ = [
    "FORMATS",
    "HistoryConversation",
    "HistoryFormat",
    "HistoryTurn",
    "dated",
    "derived_id",
    "epoch_time",
    "sort_messages",
]
