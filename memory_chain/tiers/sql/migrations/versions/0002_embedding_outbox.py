"""Embedding outbox: turns waiting to be embedded into tier 3.

A row is added in the same transaction as its turn and removed once the turn's point is
stored in tier 3, so a vector-store outage or a crash delays tier 3 but never loses a turn.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "embedding_outbox",
        sa.Column(
            "turn_id",
            sa.Integer,
            sa.ForeignKey("conversation_turns.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("enqueued_at", sa.TIMESTAMP, server_default=sa.func.current_timestamp()),
    )


def downgrade() -> None:
    op.drop_table("embedding_outbox")
