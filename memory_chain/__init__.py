"""memory_chain: persistent three-tier conversation memory for LangChain chat apps.

Tier 1 (:mod:`memory_chain.tiers.buffer`) keeps each conversation's last turns in process;
tier 2 (:mod:`memory_chain.tiers.sql`) stores every turn and summary in SQL; tier 3 indexes
turns as vectors for semantic search. Importing this package does no I/O.
"""

from memory_chain.config import MemorySettings
from memory_chain.errors import (
    ConversationNotFoundError,
    InvalidInputError,
    MemoryChainError,
    SchemaNotReadyError,
    StorageError,
)
from memory_chain.schemas import ConversationInfo, KeywordHit, NewTurn, Summary, TokenUsage, Turn
from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
from memory_chain.tiers.sql import SQLChatMessageHistory, SQLStore, create_sql_engine, upgrade
from memory_chain.tokens import TokenCounter

__version__ = "0.1.0"

__all__ = [
    "BufferChatMessageHistory",
    "ConversationInfo",
    "ConversationNotFoundError",
    "InvalidInputError",
    "KeywordHit",
    "MemoryChainError",
    "MemorySettings",
    "NewTurn",
    "SQLChatMessageHistory",
    "SQLStore",
    "SchemaNotReadyError",
    "StorageError",
    "Summary",
    "TokenCounter",
    "TokenUsage",
    "Turn",
    "TurnBuffer",
    "__version__",
    "create_sql_engine",
    "upgrade",
]
