"""Tier 2 as a LangChain chat history: every turn of one conversation, from SQL.

Example:
    >>> from memory_chain.tiers.sql import SQLChatMessageHistory, SQLStore, create_sql_engine
    >>> from memory_chain.tiers.sql import upgrade
    >>> engine = create_sql_engine("sqlite:////tmp/mc-history-example.db")
    >>> upgrade(engine)
    >>> history = SQLChatMessageHistory(SQLStore(engine), "conv-history-example")
    >>> history.clear()
    >>> history.add_user_message("What is FastAPI?")
    >>> history.messages[0].content
    'What is FastAPI?'
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from memory_chain.config import DEFAULT_USER_ID
from memory_chain.deprecation import warn_history_deprecated
from memory_chain.messages import to_message, to_new_turns
from memory_chain.schemas import validate_id
from memory_chain.tiers.sql.store import SQLStore
from memory_chain.tokens import TokenCounter


class SQLChatMessageHistory(BaseChatMessageHistory):
    """Every stored turn of one conversation (or its last ``max_messages``).

    ``add_messages`` stores a whole batch in one transaction; ``clear`` deletes the
    conversation with its turns and summaries. The async methods are langchain-core's: they
    run these in a worker thread, since SQLAlchemy's engine here is a blocking one.

    Building one warns (``LangChainDeprecationWarning``): langchain-core deprecated chat
    histories; it works on langchain-core 1.x (:mod:`memory_chain.deprecation`).

    Args:
        store: The tier-2 store.
        conversation_id: The conversation.
        user_id: Owner of the conversation; reads of another user's conversation are empty.
        counter: Counts tokens of messages without model-reported usage.
        max_messages: Return only the last this many messages.
    """

    def __init__(
        self,
        store: SQLStore,
        conversation_id: str,
        *,
        user_id: str = DEFAULT_USER_ID,
        counter: TokenCounter | None = None,
        max_messages: int | None = None,
    ) -> None:
        warn_history_deprecated("SQLChatMessageHistory")
        self.store = store
        self.conversation_id = validate_id(conversation_id)
        self.user_id = validate_id(user_id, "user id")
        self.counter = counter
        self.max_messages = max_messages

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The conversation's messages, oldest first."""
        if self.max_messages is not None:
            turns = self.store.recent_turns(
                self.conversation_id, self.max_messages, user_id=self.user_id
            )
        else:
            turns = self.store.get_turns(self.conversation_id, user_id=self.user_id)
        return [to_message(turn) for turn in turns]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages in one transaction."""
        self.store.append_turns(
            self.conversation_id, to_new_turns(messages, self.counter), user_id=self.user_id
        )

    def clear(self) -> None:
        """Delete the conversation, its turns and its summaries."""
        self.store.delete_conversation(self.conversation_id, user_id=self.user_id)
