"""The tier-2 schema (conversations, turns, summaries) and its keyword-search indexes.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Full-text tables of SQLite: contentless FTS5 tables kept in step by triggers. Besides the
# text, each row indexes a "scope" of two tokens, "c<hex conversation id>" and "u<hex user
# id>", so a search within one conversation or one user intersects with that scope inside the
# index instead of ranking every match in the database first.
_FTS = (("conversation_turns", "content"), ("conversation_summaries", "summary_text"))


def _scope(row: str) -> str:
    owner = f"(SELECT user_id FROM conversations WHERE conversation_id = {row}.conversation_id)"
    return f"'c' || hex({row}.conversation_id) || ' u' || hex(COALESCE({owner}, ''))"


def _sqlite_has_fts5() -> bool:
    options = op.get_bind().exec_driver_sql("PRAGMA compile_options").scalars().all()
    return "ENABLE_FTS5" in options


def _create_sqlite_fts() -> None:
    for table, column in _FTS:
        fts = f"{table}_fts"
        op.execute(
            f"CREATE VIRTUAL TABLE {fts} USING fts5(body, scope, content='', "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        add = (
            f"INSERT INTO {fts}(rowid, body, scope) VALUES (new.id, new.{column}, {_scope('new')});"
        )
        # A contentless table deletes a row given the values it indexed.
        remove = (
            f"INSERT INTO {fts}({fts}, rowid, body, scope) "
            f"VALUES ('delete', old.id, old.{column}, {_scope('old')});"
        )
        op.execute(f"CREATE TRIGGER {table}_fts_ai AFTER INSERT ON {table} BEGIN {add} END")
        op.execute(f"CREATE TRIGGER {table}_fts_ad AFTER DELETE ON {table} BEGIN {remove} END")
        op.execute(
            f"CREATE TRIGGER {table}_fts_au AFTER UPDATE OF {column} ON {table} "
            f"BEGIN {remove} {add} END"
        )


def _create_postgres_fts() -> None:
    for table, column in _FTS:
        op.execute(
            f"CREATE INDEX {table}_fts ON {table} "
            f"USING gin (to_tsvector('english'::regconfig, {column}))"
        )


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("conversation_id", sa.Text, nullable=False, unique=True),
        sa.Column("user_id", sa.Text),
        sa.Column("created_at", sa.TIMESTAMP, server_default=sa.func.current_timestamp()),
        sa.Column("last_message_at", sa.TIMESTAMP),
        sa.Column("turn_count", sa.Integer, server_default=sa.text("0")),
        sa.Column("total_tokens", sa.Integer, server_default=sa.text("0")),
        sa.Column("summary", sa.Text),
        sa.Column("status", sa.Text, server_default=sa.text("'active'")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "conversation_turns",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "conversation_id",
            sa.Text,
            sa.ForeignKey("conversations.conversation_id"),
            nullable=False,
        ),
        sa.Column("turn_number", sa.Integer, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("timestamp", sa.TIMESTAMP, server_default=sa.func.current_timestamp()),
        sa.Column("tokens_prompt", sa.Integer),
        sa.Column("tokens_completion", sa.Integer),
        sa.Column("tokens_total", sa.Integer),
        sa.UniqueConstraint("conversation_id", "turn_number"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "conversation_summaries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "conversation_id",
            sa.Text,
            sa.ForeignKey("conversations.conversation_id"),
            nullable=False,
        ),
        sa.Column("summary_text", sa.Text, nullable=False),
        sa.Column("turn_range_start", sa.Integer, nullable=False),
        sa.Column("turn_range_end", sa.Integer, nullable=False),
        sa.Column("created_at", sa.TIMESTAMP, server_default=sa.func.current_timestamp()),
        sa.Column("token_count", sa.Integer),
        sqlite_autoincrement=True,
    )
    op.create_index("idx_conversations_user", "conversations", ["user_id"])
    op.create_index("idx_conversation_id", "conversation_turns", ["conversation_id"])
    op.create_index("idx_timestamp", "conversation_turns", ["timestamp"])
    op.create_index("idx_summary_conv", "conversation_summaries", ["conversation_id"])
    op.create_index(
        "uq_summary_range",
        "conversation_summaries",
        ["conversation_id", "turn_range_start"],
        unique=True,
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite" and _sqlite_has_fts5():
        _create_sqlite_fts()
    elif dialect == "postgresql":
        _create_postgres_fts()


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for table, _column in _FTS:
        if dialect == "sqlite":
            for suffix in ("ai", "ad", "au"):
                op.execute(f"DROP TRIGGER IF EXISTS {table}_fts_{suffix}")
            op.execute(f"DROP TABLE IF EXISTS {table}_fts")
        elif dialect == "postgresql":
            op.execute(f"DROP INDEX IF EXISTS {table}_fts")
    op.drop_table("conversation_summaries")
    op.drop_table("conversation_turns")
    op.drop_table("conversations")
