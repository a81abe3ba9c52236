"""The composed chat history: the running summary and the recent turns of one conversation.

For ``RunnableWithMessageHistory``: tier 1 and tier 2 each have a history of their own
(:class:`~memory_chain.tiers.buffer.BufferChatMessageHistory`,
:class:`~memory_chain.tiers.sql.SQLChatMessageHistory`); this one is what a chat model should
see, and it stores new messages through the memory manager, so they reach every tier and the
consolidation triggers.

Example:
    >>> history = manager.history("trip", "ana")  # doctest: +SKIP
    >>> history.add_user_message("We fly on 3 May")  # doctest: +SKIP
    >>> history.messages[-1].content  # doctest: +SKIP
    'We fly on 3 May'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, SystemMessage

from memory_chain.deprecation import warn_history_deprecated
from memory_chain.messages import to_message
from memory_chain.schemas import Turn, validate_id
from memory_chain.tiers.buffer import CachedSummary


class ConversationMemory(Protocol):
    """What the history reads and writes through: the memory manager is one.

    Taken as a protocol so that this module stays below the manager (which builds
    histories, :meth:`MemoryManager.history <memory_chain.manager.MemoryManager.history>`).
    """

    def working_memory(
        self, conversation_id: str, user_id: str
    ) -> tuple[list[Turn], CachedSummary]:
        """The conversation's recent turns and running summary."""
        ...

    def add_turns(
        self, conversation_id: str, user_id: str, turns: Sequence[BaseMessage], /
    ) -> object:
        """Store messages in every tier."""
        ...

    def delete_conversation(self, conversation_id: str, user_id: str) -> bool:
        """Purge the conversation from every tier."""
        ...


class MemoryChatMessageHistory(BaseChatMessageHistory):
    """The composed history: the running summary (as a system message) and recent turns.

    Works with ``RunnableWithMessageHistory`` (pass both ``input_messages_key`` and
    ``history_messages_key``): new messages are stored through the manager, so they reach
    every tier and consolidation triggers.

    Building one warns (``LangChainDeprecationWarning``): langchain-core deprecated chat
    histories; it works on langchain-core 1.x (:mod:`memory_chain.deprecation`).

    Args:
        manager: The memory manager (or anything with its :class:`ConversationMemory`
            methods).
        conversation_id: The conversation.
        user_id: Its owner.
    """

    def __init__(self, manager: ConversationMemory, conversation_id: str, *, user_id: str) -> None:
        warn_history_deprecated("MemoryChatMessageHistory")
        self.manager = manager
        self.conversation_id = validate_id(conversation_id)
        self.user_id = validate_id(user_id, "user id")

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Summary of the conversation so far, then its recent turns."""
        recent, state = self.manager.working_memory(self.conversation_id, self.user_id)
        summary = state.text
        messages: list[BaseMessage] = []
        if summary:
            messages.append(SystemMessage(f"Summary of the conversation so far: {summary}"))
        messages.extend(to_message(turn) for turn in recent)
        return messages

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages in every tier."""
        self.manager.add_turns(self.conversation_id, self.user_id, list(messages))

    def clear(self) -> None:
        """Delete the conversation from every tier."""
        self.manager.delete_conversation(self.conversation_id, self.user_id)
