"""Keyword search on PostgreSQL: BM25 over a turn and its neighbours' words, as on SQLite.

Until now PostgreSQL ranked a turn with ``ts_rank_cd`` over its own words (a GIN expression
index on ``to_tsvector(content)``), while SQLite ranks it with BM25 over its own words, the
previous turn's and the next turn's: an answer is found by the question it answers ("Any
plans for the summer?" → "Researching adoption agencies."), and a question by its answer
(migrations 0003, 0004). This gives PostgreSQL the same index, ``conversation_turns_fts``,
one row per turn kept by triggers like SQLite's FTS5 table:

- ``body``: the lexemes of the turn's own text (``to_tsvector('english', content)``) and how
  often each occurs, as a JSON object; ``body_length``, its number of words (stop words
  included, as FTS5 counts them: counting only the lexemes cost 1.1 points of held-out
  R@1 against SQLite on LoCoMo);
- ``frequencies``: every lexeme of the turn and its two neighbours, with its BM25 term
  frequency: its occurrences in the turn's own text count 2, in the previous turn's 1 and
  in the next turn's ½ (the FTS5 column weights, ``search_sql.TURN_PART_WEIGHTS``; changing them
  takes a migration here); ``length``, the tokens of the three;
- ``document``: those lexemes as a (stripped) ``tsvector``, GIN-indexed: what a query matches.

Keyword search (:mod:`memory_chain.tiers.sql.search_sql`) scores a match with BM25 from
``frequencies``, ``length`` and the document frequencies of the query's words
(:class:`.term_stats.TermStats`): one lookup per query lexeme and row (reading a whole
``tsvector`` per row instead cost seven times more, keeping the three parts apart twice).
Inserting or editing a turn indexes it and recomposes the rows of the turns around it from
their stored bodies (the text is parsed once). The expression index on the turns' text goes
(nothing searches it any more); the summaries' is kept. On SQLite this does nothing.

Revision ID: 0012
Revises: 0011
Create Date: 2027-01-13
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_TABLE = "conversation_turns_fts"


def _bodies(turns: str) -> str:
    """A ``SELECT`` of (turn id, lexeme counts, tokens) of the turns ``turns`` (SQL ``FROM``).

    The tokens are every word, stop words included, as FTS5 counts a row's length: the last
    lexeme's position (stop words take positions too; a trailing one is not counted).
    """
    count = "coalesce(array_length(u.positions, 1), 1)"
    return (
        f"SELECT t.id, coalesce(jsonb_object_agg(u.lexeme, {count}) "
        "FILTER (WHERE u.lexeme IS NOT NULL), '{}'::jsonb), "
        "coalesce(max(u.positions[array_upper(u.positions, 1)]), 0) "
        f"FROM {turns} "
        "LEFT JOIN LATERAL unnest(to_tsvector('english'::regconfig, t.content)) AS u ON true "
        "GROUP BY t.id"
    )


def _compose(where: str) -> str:
    """The statement recomposing the rows of the turns ``t`` that ``where`` selects."""
    parts = (
        "SELECT key, value::integer AS own, 0 AS previous, 0 AS next "
        "FROM jsonb_each_text(tf.body) "
        "UNION ALL SELECT key, 0, value::integer, 0 FROM jsonb_each_text(pf.body) "
        "UNION ALL SELECT key, 0, 0, value::integer FROM jsonb_each_text(nf.body)"
    )
    # The weights of a turn's own words, the previous turn's and the next turn's.
    merged = (
        "SELECT coalesce(jsonb_object_agg(key, 2.0 * own + 1.0 * previous + 0.5 * next), "
        "'{}'::jsonb) AS frequencies FROM (SELECT key, sum(own) AS own, "
        f"sum(previous) AS previous, sum(next) AS next FROM ({parts}) p GROUP BY key) g"
    )
    return (
        f"UPDATE {_TABLE} f SET frequencies = s.frequencies, document = s.document, "
        "length = s.length "
        "FROM (SELECT t.id, m.frequencies, "
        "array_to_tsvector(ARRAY(SELECT jsonb_object_keys(m.frequencies))) AS document, "
        "tf.body_length + coalesce(pf.body_length, 0) + coalesce(nf.body_length, 0) AS length "
        f"FROM conversation_turns t JOIN {_TABLE} tf ON tf.turn_id = t.id "
        "LEFT JOIN conversation_turns p ON p.conversation_id = t.conversation_id "
        "AND p.turn_number = t.turn_number - 1 "
        f"LEFT JOIN {_TABLE} pf ON pf.turn_id = p.id "
        "LEFT JOIN conversation_turns n ON n.conversation_id = t.conversation_id "
        "AND n.turn_number = t.turn_number + 1 "
        f"LEFT JOIN {_TABLE} nf ON nf.turn_id = n.id "
        f"CROSS JOIN LATERAL ({merged}) m WHERE {where}) s "
        "WHERE f.turn_id = s.id"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # The old expression index has the table's name (indexes and tables share a namespace).
    op.execute(f"DROP INDEX IF EXISTS {_TABLE}")
    op.execute(
        f"CREATE TABLE {_TABLE} ("
        "turn_id integer PRIMARY KEY REFERENCES conversation_turns(id) ON DELETE CASCADE, "
        "body jsonb NOT NULL, body_length integer NOT NULL, "
        "frequencies jsonb NOT NULL DEFAULT '{}', length integer NOT NULL DEFAULT 0, "
        "document tsvector NOT NULL DEFAULT ''::tsvector)"
    )
    # Every search reads `frequencies` of every match: when a row is too long for its page,
    # the other columns are compressed first (reading a compressed one costs a
    # decompression per lookup).
    op.execute(f"ALTER TABLE {_TABLE} ALTER COLUMN frequencies SET STORAGE MAIN")
    # The turns around an inserted or edited one: it, and the two whose rows hold its body.
    around = (
        "t.conversation_id = NEW.conversation_id "
        "AND t.turn_number BETWEEN NEW.turn_number - 1 AND NEW.turn_number + 1"
    )
    op.execute(
        f"CREATE FUNCTION {_TABLE}_sync() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO {_TABLE} (turn_id, body, body_length) "
        f"{_bodies('(SELECT NEW.id AS id, NEW.content AS content) t')} "
        "ON CONFLICT (turn_id) DO UPDATE SET body = EXCLUDED.body, "
        f"body_length = EXCLUDED.body_length; {_compose(around)}; RETURN NULL; END $$"
    )
    # Row triggers (turns are inserted one statement per row): when several turns of a
    # conversation are inserted together, each one's trigger recomposes its predecessor
    # too, so every row ends up with both neighbours. A statement trigger with transition
    # tables was measured slower (7 ms against 2 per chat exchange: it fires per row too).
    op.execute(
        f"CREATE TRIGGER {_TABLE}_ai AFTER INSERT ON conversation_turns "
        f"FOR EACH ROW EXECUTE FUNCTION {_TABLE}_sync()"
    )
    op.execute(
        f"CREATE TRIGGER {_TABLE}_au AFTER UPDATE OF content ON conversation_turns "
        f"FOR EACH ROW EXECUTE FUNCTION {_TABLE}_sync()"
    )
    op.execute(
        f"INSERT INTO {_TABLE} (turn_id, body, body_length) {_bodies('conversation_turns t')}"
    )
    op.execute(_compose("true"))
    # Without a pending list (fastupdate off): each turn's lexemes go into the index as it
    # is written, instead of into a list that every search reads whole until a vacuum merges
    # it (after 2,760 turns, 3 ms for one word's count against 0.1).
    op.execute(
        f"CREATE INDEX {_TABLE}_document ON {_TABLE} USING gin (document) WITH (fastupdate = off)"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for suffix in ("ai", "au"):
        op.execute(f"DROP TRIGGER IF EXISTS {_TABLE}_{suffix} ON conversation_turns")
    op.execute(f"DROP FUNCTION IF EXISTS {_TABLE}_sync()")
    op.execute(f"DROP TABLE IF EXISTS {_TABLE}")
    op.execute(
        f"CREATE INDEX {_TABLE} ON conversation_turns "
        "USING gin (to_tsvector('english'::regconfig, content))"
    )
