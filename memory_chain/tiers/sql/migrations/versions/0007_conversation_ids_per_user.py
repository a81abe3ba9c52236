"""Conversation ids are each user's own: stored as ``"<user_id>/<conversation_id>"``.

Conversation ids used to be global: a user creating a conversation under an id another user
already had got 404 where a free id got 201, so anyone could probe which ids exist, and one
user's id blocked everyone else's (two Open WebUI users whose chats got the same id, a name
such as "notes"). Now every user has their own namespace. The schema is unchanged
(``conversations.conversation_id`` stays the one unique key the turns and summaries refer
to); the stored value is prefixed with the owner and a ``/``, which no user id contains, and
everything above tier 2 sees the id the client chose, as before. Clients change nothing.

This migration rewrites the stored ids of existing conversations: a copy of each
conversation row under its new id (in the old order, so exports keep their order), the turns,
summaries and dismissed facts moved to it, the old row deleted; on SQLite the full-text
indexes' scope tokens are rebuilt. Tier-3 point ids now include the owner too, so each
conversation gets a ``forget`` task: the backfill deletes its old points and facts and embeds
its turns again under the new ids (searchable again as the backfill goes; what is not
embedded yet is still found by keyword search). Rows without an owner are left as they were
(no API could reach them).

Downgrading strips the owners again; it refuses when two users have a conversation of the
same id (the old schema cannot hold both).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_CHILDREN = ("conversation_turns", "conversation_summaries", "dismissed_facts")
_COPIED = "user_id, created_at, last_message_at, turn_count, total_tokens, summary, status"
_TOKENIZE = "tokenize='porter unicode61 remove_diacritics 2'"


def _rekey(old: str, new: str, chosen: str) -> None:
    """Move the conversations ``chosen`` selects from the id ``old`` to ``new`` (SQL terms)."""
    op.execute(
        f"INSERT INTO conversations (conversation_id, {_COPIED}) "
        f"SELECT {new}, {_COPIED} FROM conversations c WHERE {chosen} ORDER BY c.id"
    )
    for table in _CHILDREN:
        op.execute(
            f"UPDATE {table} SET conversation_id = (SELECT {new} FROM conversations c "
            f"WHERE {old} = {table}.conversation_id AND {chosen}) "
            f"WHERE conversation_id IN (SELECT {old} FROM conversations c WHERE {chosen})"
        )
    # Tier 3 re-embeds every moved conversation under its new point ids.
    op.execute(
        "INSERT INTO vector_tasks (kind, user_id, conversation_id, created_at) "
        f"SELECT 'forget', c.user_id, {_client('c')}, CURRENT_TIMESTAMP "
        f"FROM conversations c WHERE {chosen} ORDER BY c.id"
    )
    op.execute(
        "DELETE FROM conversations WHERE conversation_id IN "
        f"(SELECT {old} FROM conversations c WHERE {chosen})"
    )


def _client(alias: str) -> str:
    """The client's id of a stored one, in SQL (the part after the first '/', if any)."""
    column = f"{alias}.conversation_id"
    find = "strpos" if op.get_bind().dialect.name == "postgresql" else "instr"
    at = f"{find}({column}, '/')"
    return f"CASE WHEN {at} > 0 THEN substr({column}, {at} + 1) ELSE {column} END"


def _scope(row: str) -> str:
    owner = f"(SELECT user_id FROM conversations WHERE conversation_id = {row}.conversation_id)"
    return f"'c' || hex({row}.conversation_id) || ' u' || hex(COALESCE({owner}, ''))"


def _has_table(name: str) -> bool:
    found = op.get_bind().exec_driver_sql(
        f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{name}'"
    )
    return found.first() is not None


def _reindex_sqlite_scopes() -> None:
    """Recompute the scope tokens ("c<hex stored id> u<hex owner>") the FTS5 rows carry."""
    if op.get_bind().dialect.name != "sqlite":
        return
    if _has_table("conversation_turns_fts"):
        # A regular FTS5 table (migration 0003): its rows can be updated in place.
        op.execute(
            f"UPDATE conversation_turns_fts SET scope = (SELECT {_scope('t')} "
            "FROM conversation_turns t WHERE t.id = conversation_turns_fts.rowid)"
        )
    if _has_table("conversation_summaries_fts"):
        # Contentless (migration 0001): rebuilt from the summaries; its triggers stay.
        op.execute("DROP TABLE conversation_summaries_fts")
        op.execute(
            "CREATE VIRTUAL TABLE conversation_summaries_fts USING fts5(body, scope, "
            f"content='', {_TOKENIZE})"
        )
        op.execute(
            "INSERT INTO conversation_summaries_fts(rowid, body, scope) "
            f"SELECT s.id, s.summary_text, {_scope('s')} FROM conversation_summaries s"
        )


def upgrade() -> None:
    _rekey(
        old="c.conversation_id",
        new="c.user_id || '/' || c.conversation_id",
        chosen="c.user_id IS NOT NULL AND c.conversation_id NOT LIKE '%/%'",
    )
    _reindex_sqlite_scopes()


def downgrade() -> None:
    client = _client("c")
    clash = (
        op.get_bind()
        .execute(
            sa.text(
                f"SELECT {client} AS cid, count(*) AS users FROM conversations c "
                f"WHERE c.conversation_id LIKE '%/%' GROUP BY {client} HAVING count(*) > 1"
            )
        )
        .first()
    )
    if clash is not None:
        raise RuntimeError(
            f"cannot downgrade below 0007: {clash.users} users have a conversation "
            f"{clash.cid!r}, and ids were global before it; export and delete one first"
        )
    _rekey(old="c.conversation_id", new=client, chosen="c.conversation_id LIKE '%/%'")
    _reindex_sqlite_scopes()
