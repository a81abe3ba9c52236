"""Tier 2: SQL storage of every turn and summary (SQLite by default, PostgreSQL by URL)."""

from memory_chain.tiers.sql.engine import create_sql_engine
from memory_chain.tiers.sql.history import SQLChatMessageHistory
from memory_chain.tiers.sql.migrate import check_schema, upgrade
from memory_chain.tiers.sql.store import SQLStore

__all__ = ["SQLChatMessageHistory", "SQLStore", "check_schema", "create_sql_engine", "upgrade"]
