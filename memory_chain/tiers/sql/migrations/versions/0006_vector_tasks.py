"""Tier-3 work besides embedding, queued durably: deletions and payload refreshes.

``vector_tasks`` holds what the tier-3 backfill must still do to the vector store other than
embed queued turns: remove the points and facts of a purged conversation or user (or one
dismissed fact), and rewrite the payloads of a turn range once its summary is stored. A task
is written in the transaction that makes it necessary (the purge, the summary) and removed
only once the vector store has done it, so a vector store that is down delays it and never
loses it, exactly as ``embedding_outbox`` does for new turns.

``dismissed_facts`` names the "remember this" turns a user asked to forget: they stay turns of
their conversation, but the backfill (and a reindex) never files them as facts again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "vector_tasks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("conversation_id", sa.Text),
        sa.Column("first_turn", sa.Integer),
        sa.Column("last_turn", sa.Integer),
        sa.Column("created_at", sa.TIMESTAMP, server_default=sa.func.current_timestamp()),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "dismissed_facts",
        sa.Column("conversation_id", sa.Text, primary_key=True),
        sa.Column("turn_number", sa.Integer, primary_key=True),
        sa.Column("dismissed_at", sa.TIMESTAMP, server_default=sa.func.current_timestamp()),
    )


def downgrade() -> None:
    op.drop_table("dismissed_facts")
    op.drop_table("vector_tasks")
