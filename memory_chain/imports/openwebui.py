"""Open WebUI's chat export: "Export All Chats", one chat's "Export chat (.json)", the API.

Settings → Data Controls → "Export All Chats" saves a JSON array of chats, as
``GET /api/v1/chats/all`` returns them (that route streams one chat per line, JSON Lines);
a chat's menu → Download → "Export chat (.json)" saves an array of that one chat, as
``GET /api/v1/chats/{id}`` returns it. Each chat (Open WebUI 0.12)::

    {"id": "<chat id>", "user_id": "<account id>", "title": "Trip to Lisbon",
     "created_at": 1714726800, "updated_at": 1714730400, "archived": false, ...,
     "chat": {"title": "Trip to Lisbon", "models": ["..."],
              "history": {"currentId": "<message id>",
                          "messages": {"<message id>": {"id": "...", "parentId": null,
                                                        "childrenIds": ["..."],
                                                        "role": "user", "content": "...",
                                                        "timestamp": 1714726800}, ...}},
              "messages": [...], "timestamp": 1714726800000}}

Older exports hold the ``chat`` object alone; both are read. The messages kept are those of
the branch the user last saw: from ``history.currentId`` up through each ``parentId`` (a
regenerated reply or an edited message leaves its other branches out); without a history,
the ``messages`` list. The chat keeps its id as the conversation id, which is how the
proxy names an Open WebUI chat (``X-OpenWebUI-Chat-Id``): a chat already held through the
proxy is recognised, and only what memory lacks is added.
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
from memory_chain.schemas import ID_PATTERN


def is_open_webui_chat(value: object) -> bool:
    """Whether a JSON value looks like one chat of an Open WebUI export."""
    if not isinstance(value, dict):
        return False
    inner = value.get("chat")
    chat: dict[str, Any] = inner if isinstance(inner, dict) else value
    return isinstance(chat.get("history"), dict) or (
        isinstance(chat.get("messages"), list) and "mapping" not in chat and "title" in chat
    )


def read_open_webui(chats: Iterable[Any]) -> Iterator[HistoryConversation]:
    """The conversations of an Open WebUI export (see the module docstring).

    Args:
        chats: The export's chats (the JSON array's items, or the JSON Lines' objects).

    Raises:
        InvalidInputError: If an item is not a chat; the message names it.
    """
    for index, item in enumerate(chats):
        if not is_open_webui_chat(item):
            raise InvalidInputError(
                f"item {index} of the Open WebUI export is not a chat (no 'chat' object with "
                "a 'history' or 'messages'): export again from Open WebUI, or pass --format"
            )
        yield _conversation(item, index)


def _conversation(item: dict[str, Any], index: int) -> HistoryConversation:
    wrapped = isinstance(item.get("chat"), dict)
    chat: dict[str, Any] = item["chat"] if wrapped else item
    source_id = str(item.get("id") or chat.get("id") or f"chat-{index}")
    # The chat id as it is, as the proxy names the chat; a hash only if it is no valid id.
    conversation_id = (
        source_id if ID_PATTERN.fullmatch(source_id) else derived_id("owui-", source_id)
    )
    turns, empty, other = sort_messages(_kept(message) for message in _branch(chat))
    started = epoch_time(item.get("created_at")) or epoch_time(chat.get("timestamp"))
    title = item.get("title") or chat.get("title")
    owner = item.get("user_id") if wrapped else None
    return HistoryConversation(
        source="open-webui",
        source_id=source_id,
        conversation_id=conversation_id,
        title=str(title) if title else None,
        turns=dated(turns, started),
        owner=str(owner) if owner else None,
        skipped_empty=empty,
        skipped_other=other,
    )


def _branch(chat: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of the branch last seen, oldest first."""
    history = chat.get("history")
    if isinstance(history, dict) and isinstance(history.get("messages"), dict):
        messages: dict[str, Any] = history["messages"]
        current = history.get("currentId")
        if current not in messages:
            current = _latest_leaf(messages)
        return branch_to(messages, current, "parentId")
    listed = chat.get("messages")
    return [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []


def _kept(message: dict[str, Any]) -> HistoryTurn | None:
    """The turn of a user or assistant message (its text, maybe empty), else ``None``."""
    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else _text_of(content)
    if role not in ("user", "assistant") or text is None:
        return None
    return HistoryTurn(role, text, epoch_time(message.get("timestamp")))


def _latest_leaf(messages: dict[str, Any]) -> str | None:
    """The newest message without children (Open WebUI's own repair of a lost currentId)."""
    leaves = [
        (m.get("timestamp") or 0, key)
        for key, m in messages.items()
        if isinstance(m, dict) and not m.get("childrenIds")
    ]
    return max(leaves)[1] if leaves else None


def _text_of(content: object) -> str | None:
    """The text parts of a list-shaped content (OpenAI style), or ``None`` if it has none."""
    if not isinstance(content, list):
        return None
    parts = [
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") == "text"
    ]
    return "\n".join(parts) if parts else None


__all__ = ["is_open_webui_chat", "read_open_webui"]
