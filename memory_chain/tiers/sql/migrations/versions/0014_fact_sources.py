"""Every conversation a fact was said in, so that a fact outlives the purge of one of them.

Until now a fact kept one source (``facts.conversation_id`` and its turns), and purging that
conversation deleted the fact, though the user had said it in another conversation too.
``fact_sources`` keeps one row per fact and conversation it was said in: the fact's id and
user, the conversation (the client's id, as ``facts.conversation_id``), the first and last
turn of that conversation it was said in, and when it was first said there. A purge removes
the conversation's rows; a fact learnt in conversations that has none left goes, one with
others left keeps them (:mod:`memory_chain.tiers.sql.fact_sources`).

``facts.conversation_id`` and its turns stay: where the fact was first said among the
conversations it is still sourced in (``NULL`` for a fact added outside any conversation,
by hand or through the store, which no purge removes). Each fact stored with a conversation
gets its one source from them; when it was said is the earlier of ``valid_from`` (the turn's
time for a learnt fact) and ``created_at`` (``valid_from`` of an edited fact is the edit).
A downgrade drops the table: each fact keeps the source in its own columns.

No foreign key to ``facts``: whatever deletes a fact deletes its sources in the same
transaction (:mod:`memory_chain.tiers.sql.fact_purge`, the user's erasure). A cascading key
would empty the table whenever a later migration rebuilds ``facts`` on SQLite (a batch
``ALTER``: SQLite drops the old table, and with foreign keys on, a drop deletes its rows
first, cascading).

A purge used to leave the facts a purged fact had superseded pointing at it. Such a fact
(``superseded_by`` names no fact) was already treated as dismissed (nothing held in its
place: recalled turns stating it were left out), and whether its superseder was current
when it went is no longer known: it becomes dismissed (``superseded_by`` cleared), as
:func:`memory_chain.facts.rules.relinked` leaves what a deleted dismissed fact superseded.

Revision ID: 0014
Revises: 0013
Create Date: 2027-01-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fact_sources",
        sa.Column("fact_id", sa.Text, primary_key=True),
        sa.Column("conversation_id", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("first_turn", sa.Integer),
        sa.Column("last_turn", sa.Integer),
        sa.Column("said_at", sa.TIMESTAMP, nullable=False),
    )
    op.create_index("idx_fact_sources_user_conv", "fact_sources", ["user_id", "conversation_id"])
    op.execute(
        "INSERT INTO fact_sources (fact_id, conversation_id, user_id, first_turn, last_turn, "
        "said_at) SELECT id, conversation_id, user_id, first_turn, last_turn, "
        "CASE WHEN valid_from < created_at THEN valid_from ELSE created_at END "
        "FROM facts WHERE conversation_id IS NOT NULL"
    )
    op.execute(
        "UPDATE facts SET status = 'dismissed', superseded_by = NULL "
        "WHERE superseded_by IS NOT NULL AND superseded_by NOT IN (SELECT id FROM facts)"
    )


def downgrade() -> None:
    """The sources go; each fact keeps the one its own columns name."""
    op.drop_index("idx_fact_sources_user_conv", "fact_sources")
    op.drop_table("fact_sources")
