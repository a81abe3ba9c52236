"""Facts found by index, not read whole: keys of their words and subject, a version per user.

Until now every added fact read every current and past fact of its user with their vectors
(n adds cost O(n²)), and every chat turn read every current fact's text and vector. Three
things let both go by index:

* ``facts.text_key`` and ``facts.subject_key``: digests of a fact's normalized words and of
  its subject's key (:mod:`memory_chain.tiers.sql.fact_keys`), indexed with the user
  (``idx_facts_user_text``, ``idx_facts_user_subject``): the facts a new one can be the
  same as, or a newer value of, are an index lookup. Computed here for the stored facts.
* ``idx_facts_user_conversation``: a chat turn reads the retired facts learnt in the
  conversations it recalled (to note their turns as outdated): by index, not by reading
  every fact of the user.
* ``idx_facts_unembedded``: a partial index of the current facts stored without a vector
  (imported, or stored while the model was down), which the background embeds.
* ``fact_versions``: one row per user with facts, whose ``version`` (a random token) is
  replaced by triggers on ``facts`` in every transaction that inserts, updates or deletes
  one of the user's facts, whoever writes it. A process keeps each user's current fact
  vectors (and the facts it showed) in memory and reads this one row per chat turn to know
  they are still the database's (:mod:`memory_chain.tiers.sql.fact_matrix`). The row goes with the
  user's last fact. A random token, not a counter: a row deleted and made again can never
  repeat the version a process cached.

A downgrade drops the triggers, the table, the indexes and the columns.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

from memory_chain.tiers.sql.fact_keys import subject_digest, text_key

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_UNEMBEDDED = "status = 'current' AND embedding IS NULL"
_BATCH = 500

_FACTS = sa.table(
    "facts",
    sa.column("id", sa.Text),
    sa.column("text", sa.Text),
    sa.column("subject", sa.Text),
    sa.column("text_key", sa.Text),
    sa.column("subject_key", sa.Text),
)

# SQLite: 64 random bits as hexadecimal. PostgreSQL: an MD5 of a random number and the clock.
_SQLITE_RANDOM = "lower(hex(randomblob(8)))"
_PG_RANDOM = "md5(random()::text || clock_timestamp()::text)"


def _backfill_keys(conn: sa.Connection) -> None:
    """Compute the keys of the stored facts (in Python, as every write computes them)."""
    rows = conn.execute(sa.select(_FACTS.c.id, _FACTS.c.text, _FACTS.c.subject)).all()
    update = (
        sa.update(_FACTS)
        .where(_FACTS.c.id == sa.bindparam("fact_id"))
        .values(text_key=sa.bindparam("tk"), subject_key=sa.bindparam("sk"))
    )
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        conn.execute(
            update,
            [
                {"fact_id": row.id, "tk": text_key(row.text), "sk": subject_digest(row.subject)}
                for row in batch
            ],
        )


def _sqlite_triggers() -> None:
    bump = "INSERT OR REPLACE INTO fact_versions (user_id, version) VALUES ({who}, {token});"
    new = bump.format(who="NEW.user_id", token=_SQLITE_RANDOM)
    old = bump.format(who="OLD.user_id", token=_SQLITE_RANDOM)
    op.execute(f"CREATE TRIGGER facts_version_ai AFTER INSERT ON facts BEGIN {new} END")
    op.execute(f"CREATE TRIGGER facts_version_au AFTER UPDATE ON facts BEGIN {new} END")
    op.execute(
        f"CREATE TRIGGER facts_version_ad AFTER DELETE ON facts BEGIN {old} "
        "DELETE FROM fact_versions WHERE user_id = OLD.user_id AND NOT EXISTS "
        "(SELECT 1 FROM facts WHERE user_id = OLD.user_id); END"
    )


def _postgres_triggers() -> None:
    upsert = (
        "INSERT INTO fact_versions (user_id, version) VALUES ({who}, " + _PG_RANDOM + ") "
        "ON CONFLICT (user_id) DO UPDATE SET version = EXCLUDED.version;"
    )
    op.execute(
        "CREATE FUNCTION facts_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF TG_OP = 'DELETE' THEN "
        "IF EXISTS (SELECT 1 FROM facts WHERE user_id = OLD.user_id) THEN "
        + upsert.format(who="OLD.user_id")
        + " ELSE DELETE FROM fact_versions WHERE user_id = OLD.user_id; END IF; "
        "RETURN NULL; END IF; " + upsert.format(who="NEW.user_id") + " RETURN NULL; END $$"
    )
    for suffix, event in (
        ("ai", "INSERT"),
        ("au", "UPDATE"),
        ("ad", "DELETE"),
    ):
        op.execute(
            f"CREATE TRIGGER facts_version_{suffix} AFTER {event} ON facts "
            "FOR EACH ROW EXECUTE FUNCTION facts_version_bump()"
        )


def upgrade() -> None:
    op.add_column("facts", sa.Column("text_key", sa.Text))
    op.add_column("facts", sa.Column("subject_key", sa.Text))
    conn = op.get_bind()
    _backfill_keys(conn)
    op.create_index("idx_facts_user_text", "facts", ["user_id", "text_key"])
    op.create_index("idx_facts_user_subject", "facts", ["user_id", "subject_key"])
    op.create_index("idx_facts_user_conversation", "facts", ["user_id", "conversation_id"])
    op.create_index(
        "idx_facts_unembedded",
        "facts",
        ["user_id"],
        sqlite_where=sa.text(_UNEMBEDDED),
        postgresql_where=sa.text(_UNEMBEDDED),
    )
    op.create_table(
        "fact_versions",
        sa.Column("user_id", sa.Text, primary_key=True),
        sa.Column("version", sa.Text, nullable=False),
    )
    token = _PG_RANDOM if conn.dialect.name == "postgresql" else _SQLITE_RANDOM
    op.execute(
        f"INSERT INTO fact_versions (user_id, version) SELECT user_id, {token} "
        "FROM (SELECT DISTINCT user_id FROM facts) users"
    )
    if conn.dialect.name == "postgresql":
        _postgres_triggers()
    else:
        _sqlite_triggers()


def downgrade() -> None:
    """The triggers, the versions, the indexes and the keys go."""
    postgres = op.get_bind().dialect.name == "postgresql"
    for suffix in ("ai", "au", "ad"):
        op.execute(
            f"DROP TRIGGER IF EXISTS facts_version_{suffix}" + (" ON facts" if postgres else "")
        )
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS facts_version_bump()")
    op.drop_table("fact_versions")
    op.drop_index("idx_facts_unembedded", "facts")
    op.drop_index("idx_facts_user_conversation", "facts")
    op.drop_index("idx_facts_user_subject", "facts")
    op.drop_index("idx_facts_user_text", "facts")
    # Not a batch (a copy of the table, on SQLite): dropping the old copy would delete the
    # facts' sources (fact_sources, ON DELETE CASCADE). SQLite drops a column since 3.35.
    op.execute("ALTER TABLE facts DROP COLUMN subject_key")
    op.execute("ALTER TABLE facts DROP COLUMN text_key")
