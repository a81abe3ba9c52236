"""Tier 3 on PostgreSQL: the vector extension, ``vector_collections`` and ``vector_points``.

With ``vector_backend=pgvector`` the turn vectors live in the tier-2 database, so several
replicas share them with the turns. On PostgreSQL with pgvector available this creates the
extension (when the migrating role may), the tables, their B-tree indexes (user and
conversation filters) and the HNSW index of 384-d vectors; see
:mod:`memory_chain.tiers.sql.vector_tables`. Without pgvector, or on SQLite, it does nothing
(the other vector backends need no table). Downgrading drops the tables, not the extension.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from alembic import op

from memory_chain.tiers.sql.vector_tables import create_vector_tables, drop_vector_tables

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_vector_tables(op.get_bind())


def downgrade() -> None:
    drop_vector_tables(op.get_bind())
