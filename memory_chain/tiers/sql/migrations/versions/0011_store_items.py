"""The items agents keep in memory_chain's LangGraph store, in their own table.

``MemoryStore`` (:mod:`memory_chain.integrations.store`) is a LangGraph ``BaseStore``: a
user's facts and conversations are namespaces of it, and any other namespace of the user
(``(user_id, "notes")``, ``(user_id, "memories", "work")``) holds what the agent chose to
keep, with ``runtime.store.put`` in a tool or LangGraph's memory tools. ``store_items`` holds
those: one row per user, namespace and key, the value as JSON, the text a query is matched
against and its vector. Nothing is carried over (the table is new); erasing a user deletes
their rows.

Revision ID: 0011
Revises: 0010
Create Date: 2027-01-12
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_items",
        # One item per user, namespace and key; every read is a user's, and the key's
        # index, led by the user, serves them.
        sa.Column("user_id", sa.Text, primary_key=True),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("search_text", sa.Text),
        sa.Column("embedding", sa.LargeBinary),
        sa.Column("created_at", sa.TIMESTAMP, nullable=False),
        sa.Column("updated_at", sa.TIMESTAMP, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("store_items")
