"""ChatGPT's data export: ``conversations.json``, each conversation a tree of messages.

Settings → Data controls → Export data mails a zip whose ``conversations.json`` is a JSON
array of conversations::

    {"id": "<uuid>", "conversation_id": "<uuid>", "title": "Trip to Lisbon",
     "create_time": 1714726800.12, "update_time": 1714730400.5,
     "current_node": "<node id>",
     "mapping": {"<node id>": {"id": "<node id>", "parent": "<node id>" | null,
                               "children": ["<node id>", ...],
                               "message": {"author": {"role": "user"},
                                           "create_time": 1714726800.12,
                                           "content": {"content_type": "text",
                                                       "parts": ["..."]},
                                           "recipient": "all",
                                           "metadata": {...}} | null}, ...}}

Editing a message or regenerating a reply starts a new branch of the tree; the branch kept
is the one the user last saw: from ``current_node`` up through each ``parent``. Kept are the
user's and the assistant's text messages (``content_type`` ``text``, or the text parts of a
``multimodal_text``) addressed to everyone; left out and counted are system messages,
custom instructions and other hidden messages, tool calls and their results (browsing,
code), reasoning notes, and images or files without text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from memory_chain.errors import InvalidInputError
from memory_chain.imports.model import (
    HistoryConversation,
    HistoryTurn,
    branch_to,
    dated,
    derived_id,
    epoch_time,
    sort_messages,
)

_TEXT_TYPES = frozenset({"text", "multimodal_text"})


def is_chatgpt_conversation(value: object) -> bool:
    """Whether a JSON value looks like one conversation of ``conversations.json``."""
    return isinstance(value, dict) and isinstance(value.get("mapping"), dict)


def read_chatgpt(conversations: Iterable[Any]) -> Iterator[HistoryConversation]:
    """The conversations of a ChatGPT export (see the module docstring).

    Raises:
        InvalidInputError: If an item is not a conversation; the message names it.
    """
    for index, item in enumerate(conversations):
        if not is_chatgpt_conversation(item):
            raise InvalidInputError(
                f"item {index} of conversations.json is not a ChatGPT conversation (no "
                "'mapping' of messages): pass the conversations.json of ChatGPT's export"
            )
        yield _conversation(item, index)


def _conversation(item: dict[str, Any], index: int) -> HistoryConversation:
    source_id = str(item.get("id") or item.get("conversation_id") or f"conversation-{index}")
    turns, empty, other = sort_messages(_kept(message) for message in _branch(item))
    title = item.get("title")
    return HistoryConversation(
        source="chatgpt",
        source_id=source_id,
        conversation_id=derived_id("chatgpt-", source_id),
        title=str(title) if title else None,
        turns=dated(turns, epoch_time(item.get("create_time"))),
        skipped_empty=empty,
        skipped_other=other,
    )


def _branch(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages from the root to ``current_node``, oldest first (empty nodes dropped)."""
    mapping: dict[str, Any] = item["mapping"]
    current = item.get("current_node")
    if current not in mapping:
        current = _last_leaf(mapping)
    return [
        node["message"]
        for node in branch_to(mapping, current, "parent")
        if isinstance(node.get("message"), dict)
    ]


def _last_leaf(mapping: dict[str, Any]) -> str | None:
    """The newest node without children, for an export that names no current node."""
    leaves = [
        ((node.get("message") or {}).get("create_time") or 0, key)
        for key, node in mapping.items()
        if isinstance(node, dict) and not node.get("children")
    ]
    return max(leaves)[1] if leaves else None


def _kept(message: dict[str, Any]) -> HistoryTurn | None:
    """The turn of a message memory keeps (its text, maybe empty), else ``None``."""
    role = (message.get("author") or {}).get("role")
    content = message.get("content") or {}
    metadata = message.get("metadata") or {}
    if (
        role not in ("user", "assistant")
        or message.get("recipient", "all") != "all"
        or metadata.get("is_visually_hidden_from_conversation")
        or metadata.get("is_user_system_message")
        or content.get("content_type") not in _TEXT_TYPES
    ):
        return None
    parts = content.get("parts") or []
    texts = [part for part in parts if isinstance(part, str)]
    if parts and not texts:
        return None  # images or files only
    return HistoryTurn(role, "\n".join(texts), epoch_time(message.get("create_time")))


__all__ = ["is_chatgpt_conversation", "read_chatgpt"]
