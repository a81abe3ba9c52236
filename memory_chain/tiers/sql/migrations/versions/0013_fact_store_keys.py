"""Each user's LangGraph store keys of facts are their own, apart from the facts' ids.

Until now a fact put with ``MemoryStore.put((user, "facts"), key, ...)`` was stored with
the key as its id, and ids are unique across users: one user's key was refused to another
("the fact id 'diet' is taken"), a key could not be put again once its fact was dismissed
or superseded, and a key that was not 32 hexadecimal digits could not be named through REST
or MCP (which take fact ids) nor imported. Now ``store_key`` holds the key and the id is
memory_chain's own: a key names at most one *current* fact of its user (a partial unique
index, on SQLite and PostgreSQL alike), any number of past ones.

Facts stored under a key that is not a fact id (not 32 lowercase hexadecimal digits) get one,
derived from their user and key (:func:`memory_chain.facts.model.keyed_id`, as an import of
an older export derives it), keep the key in ``store_key``, and the links of their history
(``superseded_by``) follow. A 32-digit key cannot be told from an id memory_chain chose:
such facts keep their id and no key, and the store still finds them by it.

Revision ID: 0013
Revises: 0012
Create Date: 2027-01-20
"""

import re

import sqlalchemy as sa
from alembic import op

from memory_chain.facts.model import keyed_id

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_FACT_ID = re.compile(r"[0-9a-f]{32}")
_CURRENT_KEYS = "status = 'current' AND store_key IS NOT NULL"


_FACTS = sa.table(
    "facts",
    sa.column("id", sa.Text),
    sa.column("user_id", sa.Text),
    sa.column("status", sa.Text),
    sa.column("superseded_by", sa.Text),
    sa.column("store_key", sa.Text),
)


def _rename(conn: sa.Connection, user_id: str, old: str, new: str, key: str | None) -> None:
    """Give the fact ``old`` the id ``new`` (and ``key``); its history's links follow."""
    facts = _FACTS
    conn.execute(sa.update(facts).where(facts.c.id == old).values(id=new, store_key=key))
    conn.execute(
        sa.update(facts)
        .where(facts.c.user_id == user_id, facts.c.superseded_by == old)
        .values(superseded_by=new)
    )


def upgrade() -> None:
    op.add_column("facts", sa.Column("store_key", sa.Text))
    conn = op.get_bind()
    for row in conn.execute(sa.select(_FACTS.c.id, _FACTS.c.user_id)).all():
        if not _FACT_ID.fullmatch(row.id):
            _rename(conn, row.user_id, row.id, keyed_id(row.user_id, row.id), row.id)
    op.create_index(
        "uq_facts_user_store_key",
        "facts",
        ["user_id", "store_key"],
        unique=True,
        sqlite_where=sa.text(_CURRENT_KEYS),
        postgresql_where=sa.text(_CURRENT_KEYS),
    )


def downgrade() -> None:
    """Keys go; a current fact's key becomes its id again where no fact has that id."""
    conn = op.get_bind()
    facts = _FACTS
    keyed = conn.execute(
        sa.select(facts.c.id, facts.c.user_id, facts.c.store_key).where(
            facts.c.status == "current", facts.c.store_key.is_not(None)
        )
    ).all()
    for row in keyed:
        taken = conn.execute(sa.select(facts.c.id).where(facts.c.id == row.store_key)).first()
        if taken is None and len(row.store_key) <= 128:
            _rename(conn, row.user_id, row.id, row.store_key, None)
    op.drop_index("uq_facts_user_store_key", "facts")
    with op.batch_alter_table("facts") as batch:
        batch.drop_column("store_key")
