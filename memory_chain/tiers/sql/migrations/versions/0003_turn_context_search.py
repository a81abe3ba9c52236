"""Keyword search finds a turn by its previous turn too (SQLite FTS5).

In conversation, an answer often shares no word with the question about it ("What are
Caroline's plans for the summer?" is answered by "Researching adoption agencies", right after
"What are your plans for the summer?"). The turns' FTS5 index gets a ``context`` column
holding the previous turn's text, ranked at half the weight of the turn's own words: on
LoCoMo this raised keyword Recall@10 from 62 to 70 % (benchmarks: ``memory-chain eval``).

The index now stores its text (a regular FTS5 table, not contentless): rows are removed by
rowid, so deleting or editing a turn never needs the exact values it was indexed with (that
needs SQLite's ``contentless_delete``, from 3.43; Python 3.11 ships older ones). The
summaries' index is unchanged; PostgreSQL is unchanged (its turn search uses the turn's words).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_TRIGGERS = ("ai", "ad", "au")
_ON = "conversation_turns_fts_{} AFTER {} ON conversation_turns"
_TOKENIZE = "tokenize='porter unicode61 remove_diacritics 2'"


def _scope(row: str) -> str:
    owner = f"(SELECT user_id FROM conversations WHERE conversation_id = {row}.conversation_id)"
    return f"'c' || hex({row}.conversation_id) || ' u' || hex(COALESCE({owner}, ''))"


def _neighbour(row: str, offset: str, column: str) -> str:
    return (
        f"(SELECT {column} FROM conversation_turns WHERE conversation_id = {row}.conversation_id "
        f"AND turn_number = {row}.turn_number {offset} 1)"
    )


def _has_fts() -> bool:
    found = op.get_bind().exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'conversation_turns_fts'"
    )
    return found.first() is not None


def _drop() -> None:
    for suffix in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS conversation_turns_fts_{suffix}")
    op.execute("DROP TABLE IF EXISTS conversation_turns_fts")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite" or not _has_fts():
        return
    _drop()
    op.execute(
        f"CREATE VIRTUAL TABLE conversation_turns_fts USING fts5(body, scope, context, {_TOKENIZE})"
    )
    op.execute(
        "INSERT INTO conversation_turns_fts(rowid, body, scope, context) "
        f"SELECT t.id, t.content, {_scope('t')}, COALESCE(p.content, '') "
        "FROM conversation_turns t LEFT JOIN conversation_turns p "
        "ON p.conversation_id = t.conversation_id AND p.turn_number = t.turn_number - 1"
    )
    add = (
        "INSERT INTO conversation_turns_fts(rowid, body, scope, context) VALUES "
        f"(new.id, new.content, {_scope('new')}, "
        f"COALESCE({_neighbour('new', '-', 'content')}, ''));"
    )
    op.execute(f"CREATE TRIGGER {_ON.format('ai', 'INSERT')} BEGIN {add} END")
    op.execute(
        "CREATE TRIGGER conversation_turns_fts_ad AFTER DELETE ON conversation_turns BEGIN "
        "DELETE FROM conversation_turns_fts WHERE rowid = old.id; END"
    )
    # An edited turn is re-indexed, and so is the context of the turn after it.
    op.execute(
        "CREATE TRIGGER conversation_turns_fts_au AFTER UPDATE OF content ON conversation_turns "
        "BEGIN UPDATE conversation_turns_fts SET body = new.content WHERE rowid = new.id; "
        "UPDATE conversation_turns_fts SET context = new.content "
        f"WHERE rowid = {_neighbour('new', '+', 'id')}; END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite" or not _has_fts():
        return
    _drop()
    op.execute(
        "CREATE VIRTUAL TABLE conversation_turns_fts USING fts5(body, scope, content='', "
        f"{_TOKENIZE})"
    )
    op.execute(
        "INSERT INTO conversation_turns_fts(rowid, body, scope) "
        f"SELECT t.id, t.content, {_scope('t')} FROM conversation_turns t"
    )
    add = (
        "INSERT INTO conversation_turns_fts(rowid, body, scope) "
        f"VALUES (new.id, new.content, {_scope('new')});"
    )
    remove = (
        "INSERT INTO conversation_turns_fts(conversation_turns_fts, rowid, body, scope) "
        f"VALUES ('delete', old.id, old.content, {_scope('old')});"
    )
    op.execute(f"CREATE TRIGGER {_ON.format('ai', 'INSERT')} BEGIN {add} END")
    op.execute(f"CREATE TRIGGER {_ON.format('ad', 'DELETE')} BEGIN {remove} END")
    op.execute(
        "CREATE TRIGGER conversation_turns_fts_au AFTER UPDATE OF content ON conversation_turns "
        f"BEGIN {remove} {add} END"
    )
