"""Tier 1 as a LangChain chat history: written through to tier 2, filled from it on a miss.

:class:`BufferChatMessageHistory` reads a conversation's last turns from the
:class:`~.cache.TurnBuffer`; with a source (:class:`TurnSource`, tier 2) it stores new
messages there first and loads the last turns from there when they are not cached
(:func:`load_into`); without one it is a plain in-memory buffer.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from memory_chain.config import DEFAULT_USER_ID
from memory_chain.deprecation import warn_history_deprecated
from memory_chain.messages import to_message, to_new_turns
from memory_chain.schemas import (
    ConversationInfo,
    ConversationMetadata,
    NewTurn,
    Turn,
    as_utc,
    utcnow,
    validate_id,
    validate_new_turns,
)
from memory_chain.tiers.buffer.cache import TurnBuffer
from memory_chain.tokens import TokenCounter


class TurnSource(Protocol):
    """What tier 1 needs from tier 2 (``SQLStore`` provides it)."""

    def append_turns(
        self, conversation_id: str, new_turns: Sequence[NewTurn], *, user_id: str = ...
    ) -> list[Turn]:
        """Store turns and return them numbered."""
        ...

    def recent_turns(self, conversation_id: str, count: int, *, user_id: str) -> list[Turn]:
        """The last ``count`` turns, oldest first."""
        ...

    def get_conversation(self, conversation_id: str, *, user_id: str) -> ConversationInfo | None:
        """A conversation's row."""
        ...

    def delete_conversation(self, conversation_id: str, *, user_id: str) -> bool:
        """Remove a conversation."""
        ...


def load_into(
    buffer: TurnBuffer,
    source: TurnSource,
    conversation_id: str,
    user_id: str,
    *,
    limit: int | None = None,
) -> list[BaseMessage]:
    """Fill the buffer from tier 2 and return the conversation's cached messages.

    Args:
        buffer: Tier 1.
        source: Tier 2.
        conversation_id: The conversation.
        user_id: Its owner.
        limit: Load at most this many of the last turns (never more than the buffer holds);
            the memory manager passes what consolidation left in tier 1.
    """
    info = source.get_conversation(conversation_id, user_id=user_id)
    if info is None:
        return []
    count = buffer.max_turns if limit is None else max(0, min(limit, buffer.max_turns))
    recent = source.recent_turns(conversation_id, count, user_id=user_id)
    metadata = ConversationMetadata(
        created_at=info.created_at,
        last_updated=info.last_message_at or info.created_at,
        turn_count=recent[-1].turn_number if recent else info.turn_count,
        total_tokens=info.total_tokens,
    )
    buffer.put(conversation_id, recent, metadata, user_id=user_id)
    cached = buffer.get_messages(conversation_id, user_id)
    # None only if a tiny buffer evicted the entry at once.
    return cached if cached is not None else [to_message(turn) for turn in recent]


class BufferChatMessageHistory(BaseChatMessageHistory):
    """Tier-1 chat history: the last turns of one conversation, from the buffer.

    With a ``source`` (tier 2) it is a write-through cache: new messages are stored in SQL
    first, then cached; a miss reloads the last turns from SQL. Without one it is a plain
    in-memory buffer (turn numbers assigned locally), useful in notebooks and tests.

    Building one warns (``LangChainDeprecationWarning``): langchain-core deprecated chat
    histories; it works on langchain-core 1.x (:mod:`memory_chain.deprecation`).

    Args:
        buffer: The shared :class:`TurnBuffer`.
        conversation_id: The conversation.
        source: Tier 2, or ``None`` for a memory-only buffer.
        user_id: Owner of the conversation.
        counter: Counts tokens of messages without model-reported usage.
        max_message_chars: Longest content accepted without a source (the source has its own).
    """

    def __init__(
        self,
        buffer: TurnBuffer,
        conversation_id: str,
        *,
        source: TurnSource | None = None,
        user_id: str = DEFAULT_USER_ID,
        counter: TokenCounter | None = None,
        max_message_chars: int = 200_000,
    ) -> None:
        warn_history_deprecated("BufferChatMessageHistory")
        self.buffer = buffer
        self.conversation_id = validate_id(conversation_id)
        self.user_id = validate_id(user_id, "user id")
        self.source = source
        self.counter = counter
        self.max_message_chars = max_message_chars
        self._local_lock = threading.Lock()

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The last turns of the conversation, oldest first."""
        cached = self.buffer.get_messages(self.conversation_id, self.user_id)
        if cached is not None:
            return cached
        if self.source is None:
            return []
        return load_into(self.buffer, self.source, self.conversation_id, self.user_id)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages (in tier 2 first when there is a source), then cache them."""
        new_turns = to_new_turns(messages, self.counter)
        if self.source is not None:
            stored = self.source.append_turns(self.conversation_id, new_turns, user_id=self.user_id)
            self.buffer.extend(self.conversation_id, stored, user_id=self.user_id)
            return
        validate_new_turns(new_turns, max_chars=self.max_message_chars)
        with self._local_lock:
            meta = self.buffer.metadata(self.conversation_id, self.user_id)
            last = meta.turn_count if meta else 0
            now = utcnow()
            stored = [
                Turn(
                    conversation_id=self.conversation_id,
                    turn_number=last + offset + 1,
                    role=turn.role,
                    content=turn.content,
                    timestamp=as_utc(turn.timestamp) if turn.timestamp else now,
                    tokens=turn.tokens,
                )
                for offset, turn in enumerate(new_turns)
            ]
            self.buffer.extend(self.conversation_id, stored, user_id=self.user_id)

    def clear(self) -> None:
        """Forget the conversation here and, with a source, delete it from tier 2."""
        self.buffer.invalidate(self.conversation_id, user_id=self.user_id)
        if self.source is not None:
            self.source.delete_conversation(self.conversation_id, user_id=self.user_id)
