"""Claims on the tier-3 queues: which worker holds a queued item, and until when.

Several replicas share one database, and each runs a tier-3 backfill over the same two
queues, ``embedding_outbox`` (turns to embed) and ``vector_tasks`` (deletions and payload
refreshes). Without claims every replica embedded the same queued turns. Each queued row now
records the worker that claimed it (``claimed_by``) and when its claim expires
(``claimed_until``); a worker that dies leaves its claims to expire and another takes the
items (see :mod:`memory_chain.tiers.sql.claims`). Existing rows start unclaimed.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_QUEUES = ("embedding_outbox", "vector_tasks")


def upgrade() -> None:
    for table in _QUEUES:
        op.add_column(table, sa.Column("claimed_by", sa.Text))
        op.add_column(table, sa.Column("claimed_until", sa.TIMESTAMP))


def downgrade() -> None:
    for table in _QUEUES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("claimed_until")
            batch.drop_column("claimed_by")
