"""Tier-2 tables: conversations, their turns and summaries, and the queues beside them.

The tables are created by the Alembic migrations in ``migrations/`` (``memory-chain migrate``
or :func:`memory_chain.tiers.sql.migrate.upgrade`), never by a constructor. These definitions
are what the queries are built from; a test checks that they match the migrated schema.

Besides the tables' keys: an index on ``conversations(user_id)`` (every read is scoped to a
user), a unique index on ``(conversation_id, turn_range_start)`` of ``conversation_summaries``,
so that a repeated or concurrent consolidation of one range cannot write two summaries, the
``embedding_outbox`` of turns waiting for tier 3 (migration 0002), the ``vector_tasks`` queue
(migration 0006), the claims on both queues (migration 0009), the users' ``facts`` (migration
0010) and the conversations each was said in (``fact_sources``, migration 0014), each user's
fact version (``fact_versions``, kept by triggers, migration 0015), the items
agents keep in LangGraph's store (``store_items``, migration 0011), and the
full-text indexes that keyword search uses (FTS5 tables on SQLite, GIN expression indexes on
PostgreSQL), which the migrations create outside these models.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import (
    TIMESTAMP,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of the tier-2 tables."""

    metadata = MetaData()


class ConversationRow(Base):
    """``conversations``: one row per conversation, with its running summary."""

    __tablename__ = "conversations"
    __table_args__ = (
        Index("idx_conversations_user", "user_id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(Text, unique=True, nullable=False)
    user_id: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime | None] = mapped_column(
        TIMESTAMP, server_default=func.current_timestamp()
    )
    last_message_at: Mapped[datetime | None] = mapped_column(TIMESTAMP)
    turn_count: Mapped[int | None] = mapped_column(Integer, server_default=text("0"))
    total_tokens: Mapped[int | None] = mapped_column(Integer, server_default=text("0"))
    summary: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str | None] = mapped_column(Text, server_default=text("'active'"))


class TurnRow(Base):
    """``conversation_turns``: every turn, numbered 1..N per conversation."""

    __tablename__ = "conversation_turns"
    __table_args__ = (
        UniqueConstraint("conversation_id", "turn_number"),
        Index("idx_conversation_id", "conversation_id"),
        Index("idx_timestamp", "timestamp"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        Text, ForeignKey("conversations.conversation_id"), nullable=False
    )
    turn_number: Mapped[int] = mapped_column(Integer, nullable=False)
    role: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    timestamp: Mapped[datetime | None] = mapped_column(
        TIMESTAMP, server_default=func.current_timestamp()
    )
    tokens_prompt: Mapped[int | None] = mapped_column(Integer)
    tokens_completion: Mapped[int | None] = mapped_column(Integer)
    tokens_total: Mapped[int | None] = mapped_column(Integer)


class SummaryRow(Base):
    """``conversation_summaries``: one summary per consolidated turn range."""

    __tablename__ = "conversation_summaries"
    __table_args__ = (
        Index("idx_summary_conv", "conversation_id"),
        Index("uq_summary_range", "conversation_id", "turn_range_start", unique=True),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        Text, ForeignKey("conversations.conversation_id"), nullable=False
    )
    summary_text: Mapped[str] = mapped_column(Text, nullable=False)
    turn_range_start: Mapped[int] = mapped_column(Integer, nullable=False)
    turn_range_end: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime | None] = mapped_column(
        TIMESTAMP, server_default=func.current_timestamp()
    )
    token_count: Mapped[int | None] = mapped_column(Integer)


class OutboxRow(Base):
    """``embedding_outbox``: turns stored in tier 2 and not yet embedded into tier 3.

    ``claimed_by`` and ``claimed_until`` name the worker embedding a turn now and when its
    claim expires (:mod:`memory_chain.tiers.sql.claims`).
    """

    __tablename__ = "embedding_outbox"

    turn_id: Mapped[int] = mapped_column(
        Integer,
        ForeignKey("conversation_turns.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    )
    enqueued_at: Mapped[datetime | None] = mapped_column(
        TIMESTAMP, server_default=func.current_timestamp()
    )
    claimed_by: Mapped[str | None] = mapped_column(Text)
    claimed_until: Mapped[datetime | None] = mapped_column(TIMESTAMP)


class VectorTaskRow(Base):
    """``vector_tasks``: tier-3 work other than embedding, waiting for the vector store.

    Claimed like the outbox's turns (``claimed_by``, ``claimed_until``).
    """

    __tablename__ = "vector_tasks"
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(Text, nullable=False)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    conversation_id: Mapped[str | None] = mapped_column(Text)
    first_turn: Mapped[int | None] = mapped_column(Integer)
    last_turn: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime | None] = mapped_column(
        TIMESTAMP, server_default=func.current_timestamp()
    )
    claimed_by: Mapped[str | None] = mapped_column(Text)
    claimed_until: Mapped[datetime | None] = mapped_column(TIMESTAMP)


#: The rows a store key must be unique among: a user's current facts that have one.
_CURRENT_KEYS = "status = 'current' AND store_key IS NOT NULL"
#: The rows the background embeds: current facts stored without a vector (migration 0015).
_UNEMBEDDED = "status = 'current' AND embedding IS NULL"


class FactRow(Base):
    """``facts``: what memory knows about each user, current and past (migration 0010).

    A fact is current until it is superseded (``superseded_by`` names the fact that replaced
    it) or dismissed (the user deleted it); either way the row stays, with the moment it
    stopped being valid, so the history is kept and an export carries it. ``embedding`` is
    the fact's vector (float32, little-endian), empty until it is embedded. ``store_key`` is
    the key a LangGraph store put it under (migration 0013). ``text_key`` and ``subject_key``
    are digests of its normalized words and of its subject's key, by which a new fact finds
    the facts it can be the same as or a newer value of (migration 0015,
    :mod:`memory_chain.tiers.sql.fact_keys`).
    """

    __tablename__ = "facts"
    __table_args__ = (
        Index("idx_facts_user_status", "user_id", "status"),
        Index("idx_facts_user_text", "user_id", "text_key"),
        Index("idx_facts_user_subject", "user_id", "subject_key"),
        Index("idx_facts_user_conversation", "user_id", "conversation_id"),
        Index(
            "idx_facts_unembedded",
            "user_id",
            sqlite_where=text(_UNEMBEDDED),
            postgresql_where=text(_UNEMBEDDED),
        ),
        # A store key names one current fact of its user at most (migration 0013).
        Index(
            "uq_facts_user_store_key",
            "user_id",
            "store_key",
            unique=True,
            sqlite_where=text(_CURRENT_KEYS),
            postgresql_where=text(_CURRENT_KEYS),
        ),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    kind: Mapped[str] = mapped_column(Text, nullable=False)
    subject: Mapped[str | None] = mapped_column(Text)
    origin: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False)
    conversation_id: Mapped[str | None] = mapped_column(Text)
    first_turn: Mapped[int | None] = mapped_column(Integer)
    last_turn: Mapped[int | None] = mapped_column(Integer)
    confidence: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(TIMESTAMP, nullable=False)
    valid_from: Mapped[datetime] = mapped_column(TIMESTAMP, nullable=False)
    invalidated_at: Mapped[datetime | None] = mapped_column(TIMESTAMP)
    superseded_by: Mapped[str | None] = mapped_column(Text)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary)
    store_key: Mapped[str | None] = mapped_column(Text)
    text_key: Mapped[str | None] = mapped_column(Text)
    subject_key: Mapped[str | None] = mapped_column(Text)


class FactVersionRow(Base):
    """``fact_versions``: the version of each user's facts (migration 0015).

    A random token, replaced by triggers on ``facts`` in every transaction that inserts,
    updates or deletes one of the user's facts; the row goes with the user's last fact. A
    process's cache of each user's facts is checked against it
    (:mod:`memory_chain.tiers.sql.fact_matrix`).
    """

    __tablename__ = "fact_versions"

    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[str] = mapped_column(Text, nullable=False)


class FactSourceRow(Base):
    """``fact_sources``: each conversation a fact was said in (migration 0014).

    One row per fact and conversation (the client's id, as ``facts.conversation_id``): the
    first and last turn of the conversation that said it, and when it was first said there.
    A purge of the conversation removes its rows, and a fact learnt in conversations with
    none left goes (:mod:`memory_chain.tiers.sql.fact_sources`); a fact's own
    ``conversation_id`` and turns are its first source still kept (``NULL``: it was added
    outside any conversation). Indexed by ``(user_id, conversation_id)`` for the purge.
    """

    __tablename__ = "fact_sources"
    __table_args__ = (Index("idx_fact_sources_user_conv", "user_id", "conversation_id"),)

    # No foreign key: see migration 0014 (a rebuild of ``facts`` on SQLite would cascade).
    fact_id: Mapped[str] = mapped_column(Text, primary_key=True)
    conversation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    first_turn: Mapped[int | None] = mapped_column(Integer)
    last_turn: Mapped[int | None] = mapped_column(Integer)
    said_at: Mapped[datetime] = mapped_column(TIMESTAMP, nullable=False)


class StoreItemRow(Base):
    """``store_items``: what agents keep in memory_chain's LangGraph store (migration 0011).

    One row per item of a user's own namespaces (``MemoryStore``,
    :mod:`memory_chain.integrations.store`): ``namespace`` is the path below the user, as a
    JSON array of labels; ``value`` the item, as JSON. ``search_text`` is the text a query
    is matched against (``NULL`` when the item was stored with ``index=False``) and
    ``embedding`` its vector (float32, little-endian, normalized), empty until embedded.
    """

    __tablename__ = "store_items"

    # The key, led by the user, is the index every read (a user's) uses.
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    namespace: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    search_text: Mapped[str | None] = mapped_column(Text)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(TIMESTAMP, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(TIMESTAMP, nullable=False)


conversations = cast(Table, ConversationRow.__table__)
turns = cast(Table, TurnRow.__table__)
summaries = cast(Table, SummaryRow.__table__)
outbox = cast(Table, OutboxRow.__table__)
vector_tasks = cast(Table, VectorTaskRow.__table__)
facts = cast(Table, FactRow.__table__)
fact_sources = cast(Table, FactSourceRow.__table__)
fact_versions = cast(Table, FactVersionRow.__table__)
store_items = cast(Table, StoreItemRow.__table__)
