"""``(user_id, "conversations"[, conversation_id])`` in ``MemoryStore``: what was said, read-only.

The user's conversations as tier 2 keeps them, searched with memory_chain's own retrieval
(:meth:`MemoryManager.find <memory_chain.manager.MemoryManager.find>`, what the chat's
context and the LangServe retriever use: keyword and semantic search, fused).

* ``(user_id, "conversations")`` holds one item per conversation, keyed by its id, newest
  activity first: ``conversation_id``, ``status``, ``turn_count``, ``total_tokens``,
  ``summary`` (the running summary), ``created_at``, ``last_message_at``.
* ``(user_id, "conversations", conversation_id)`` holds the conversation's turns, keyed by
  their number (``"1"``, ``"2"``, ...), in order: ``kind`` (``"turn"``),
  ``conversation_id``, ``turn_number``, ``role``, ``content``, ``timestamp``; and its range
  summaries, keyed ``"summary-<first>-<last>"``.
* ``search`` with a query, on either namespace, runs the retrieval over the user's
  conversations or over the one conversation; the items are the turns and summaries found,
  each in its conversation's namespace, best first, with the fused score (higher is more
  relevant; comparable within one result list). Without a query it lists the namespace's
  items. A search with a filter filters the best :data:`FILTER_POOL` found.

Turns are stored by the chat, the middleware and the API, which keep tier 1, tier 3 and the
consolidation in step; so here ``put`` and ``delete`` are refused with what to use instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memory_chain.errors import InvalidInputError
from memory_chain.integrations.store_common import Hit, Query
from memory_chain.manager import MemoryManager
from memory_chain.schemas import ConversationInfo, MemoryItem, Summary, Turn, validate_id
from memory_chain.tiers.sql.store_items import CONVERSATIONS

#: Items the retrieval finds for a search with a filter, before the filter.
FILTER_POOL = 200

_SUMMARY_KEY = re.compile(r"summary-(\d+)-(\d+)")


def _summary_key(first: int, last: int) -> str:
    return f"summary-{first}-{last}"


def conversation_hit(user_id: str, info: ConversationInfo) -> Hit:
    """A conversation as an item of ``(user_id, "conversations")``."""
    value = {
        "conversation_id": info.conversation_id,
        "status": info.status,
        "turn_count": info.turn_count,
        "total_tokens": info.total_tokens,
        "summary": info.summary,
        "created_at": info.created_at.isoformat(),
        "last_message_at": info.last_message_at.isoformat() if info.last_message_at else None,
    }
    return Hit(
        namespace=(user_id, CONVERSATIONS),
        key=info.conversation_id,
        value=value,
        created_at=info.created_at,
        updated_at=info.last_message_at or info.created_at,
    )


def turn_hit(user_id: str, turn: Turn) -> Hit:
    """A stored turn as an item of its conversation's namespace."""
    value = {
        "kind": "turn",
        "conversation_id": turn.conversation_id,
        "turn_number": turn.turn_number,
        "role": turn.role,
        "content": turn.content,
        "timestamp": turn.timestamp.isoformat(),
    }
    return Hit(
        namespace=(user_id, CONVERSATIONS, turn.conversation_id),
        key=str(turn.turn_number),
        value=value,
        created_at=turn.timestamp,
        updated_at=turn.timestamp,
    )


def summary_hit(user_id: str, summary: Summary) -> Hit:
    """A range summary as an item of its conversation's namespace."""
    first, last = summary.turn_range_start, summary.turn_range_end
    value = {
        "kind": "summary",
        "conversation_id": summary.conversation_id,
        "turn_range": [first, last],
        "content": summary.summary_text,
        "timestamp": summary.created_at.isoformat(),
    }
    return Hit(
        namespace=(user_id, CONVERSATIONS, summary.conversation_id),
        key=_summary_key(first, last),
        value=value,
        created_at=summary.created_at,
        updated_at=summary.created_at,
    )


def found_hit(user_id: str, item: MemoryItem) -> Hit:
    """An item the retrieval found, in its conversation's namespace, with its score."""
    value: dict[str, Any] = {
        "kind": item.kind,
        "conversation_id": item.conversation_id,
        "turn_number": item.turn_number,
        "turn_range": list(item.turn_range) if item.turn_range else None,
        "role": item.role,
        "content": item.content,
        "timestamp": item.timestamp.isoformat(),
        "sources": list(item.sources),
    }
    if item.kind == "summary" and item.turn_range:
        key = _summary_key(*item.turn_range)
    else:
        key = str(item.turn_number)
    return Hit(
        namespace=(user_id, CONVERSATIONS, item.conversation_id),
        key=key,
        value=value,
        created_at=item.timestamp,
        updated_at=item.timestamp,
        score=item.score,
    )


def _conversation(path: tuple[str, ...]) -> str | None:
    if len(path) > 1:
        raise InvalidInputError(
            f"a conversation has no namespaces below it, got {path!r} after 'conversations': "
            "use (user_id, 'conversations') or (user_id, 'conversations', conversation_id)"
        )
    return validate_id(path[0]) if path else None


class ConversationNamespace:
    """``(user_id, "conversations"[, conversation_id])`` (see the module docstring).

    Args:
        manager: The memory manager (its retrieval, its conversations).
    """

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager

    def get(self, user_id: str, path: tuple[str, ...], key: str) -> Hit | None:
        """A conversation (key: its id), or one of its turns or summaries."""
        conversation = _conversation(path)
        if conversation is None:
            info = self.manager.conversation(validate_id(key), user_id)
            if info is None or info.status == "deleted":
                return None
            return conversation_hit(user_id, info)
        validate_id(key, "key")
        if key.isdigit():
            number = int(key)
            turns = self.manager.turns(conversation, user_id, after=number - 1, limit=1)
            return turn_hit(user_id, turns[0]) if turns and turns[0].turn_number == number else None
        if (match := _SUMMARY_KEY.fullmatch(key)) is not None:
            first, last = int(match[1]), int(match[2])
            for summary in self.manager.summaries(conversation, user_id):
                if (summary.turn_range_start, summary.turn_range_end) == (first, last):
                    return summary_hit(user_id, summary)
        return None

    def put(
        self,
        user_id: str,
        path: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Any,
    ) -> None:
        """Refused: conversations are read-only here."""
        _refuse("put")

    def delete(self, user_id: str, path: tuple[str, ...], key: str) -> None:
        """Refused: conversations are read-only here."""
        _refuse("delete")

    def search(
        self, user_id: str, path: tuple[str, ...], query: Query | None, want: int | None
    ) -> list[Hit]:
        """Retrieval with a query; else the conversations, or one conversation's turns."""
        conversation = _conversation(path)
        if query is not None:
            found = self.manager.find(
                query.text,
                user_id=user_id,
                conversation_id=conversation,
                limit=want if want is not None else FILTER_POOL,
            )
            return [found_hit(user_id, item) for item in found.items]
        if conversation is None:
            listed = self.manager.conversations(user_id, limit=want if want is not None else 10**6)
            return [conversation_hit(user_id, c) for c in listed if c.status != "deleted"]
        turns = self.manager.turns(conversation, user_id, limit=want)
        return [turn_hit(user_id, turn) for turn in turns]


def _refuse(action: str) -> None:
    raise InvalidInputError(
        f"cannot {action} in (user_id, 'conversations', ...): conversations are read-only "
        "here. Store turns through the chat, MemoryMiddleware or the API; keep facts in "
        "(user_id, 'facts') and your agent's own items in (user_id, label, ...)"
    )
