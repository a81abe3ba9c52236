"""The SQL of a keyword search, per database: SQLite FTS5, PostgreSQL full-text, or LIKE.

:func:`keyword_statement` builds the query of one kind (turns or summaries) for the
connection's dialect, with bound parameters only (a query word is never parsed as syntax);
:mod:`.search` runs it and turns its rows into hits. Every statement scores "higher is
better" and leaves ``:limit`` to the caller.

Turns are ranked alike on both databases: BM25 (k1 = 1.2, b = 0.75) over the turn's own
words (weight 2), the previous turn's (1) and the next turn's (½) (:data:`TURN_PART_WEIGHTS`).
SQLite computes it with FTS5's ``bm25()`` (migrations 0003, 0004); PostgreSQL from the turn's
document in ``conversation_turns_fts`` (migration 0012) and the words' document frequencies
(:meth:`.term_stats.TermStats.bm25`), in SQL. Summaries are ranked by BM25 on SQLite and
``ts_rank_cd`` on PostgreSQL; LIKE (SQLite without FTS5) counts the words a row contains.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import TIMESTAMP, Connection, TextualSelect, text

from memory_chain.tiers.sql.pg_terms import Bm25Terms
from memory_chain.tiers.sql.term_stats import (
    SEARCHED,
    TABLES,
    Kind,
    TermStats,
    fts_phrase,
    scope_tokens,
)


def _scope(
    alias: str,
    user_id: str | None,
    conversation_id: str | None,
    statuses: Sequence[str] | None = None,
) -> tuple[str, dict[str, Any]]:
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if statuses is not None:
        names = [f":status{i}" for i in range(len(statuses))]
        clauses.append(f"c.status IN ({', '.join(names)})")
        params.update({name[1:]: status for name, status in zip(names, statuses, strict=True)})
    if user_id is not None:
        clauses.append("c.user_id = :user_id")
        params["user_id"] = user_id
    if conversation_id is not None:
        clauses.append(f"{alias}.conversation_id = :conversation_id")
        params["conversation_id"] = conversation_id
    return "".join(f" AND {clause}" for clause in clauses), params


#: The columns a turn hit carries, in the order :mod:`.search` reads them.
TURN_COLUMNS = "t.conversation_id, t.turn_number, t.role, t.content, t.timestamp"
_SUMMARY_COLUMNS = (
    "t.conversation_id, t.turn_range_start, t.turn_range_end, t.summary_text, t.created_at"
)
# Per kind: table (its FTS5 index is ``<table>_fts``), text column, the columns a hit carries.
_SOURCES: dict[Kind, tuple[str, str, str]] = {
    "turn": (TABLES["turn"], "content", TURN_COLUMNS),
    "summary": (TABLES["summary"], "summary_text", _SUMMARY_COLUMNS),
}
_TIME_COLUMN: dict[Kind, str] = {"turn": "timestamp", "summary": "created_at"}


def typed_select(kind: Kind, sql: str, *, typed: bool = True) -> TextualSelect:
    """``sql`` as a select whose time column (when ``typed``) comes back as a datetime.

    SQLite returns timestamps as text unless the result column is typed.
    """
    statement = text(sql)
    return statement.columns(**{_TIME_COLUMN[kind]: TIMESTAMP}) if typed else statement.columns()


#: How much an occurrence of a query word counts in a turn's BM25 term frequency: in the
#: turn's own words, in the previous turn's (migration 0003) and in the next turn's (0004).
#: The same on both databases: PostgreSQL stores the weighted frequencies (migration 0012,
#: which must change with these).
TURN_PART_WEIGHTS = (2.0, 1.0, 0.5)
#: The bm25() weights of each kind's FTS5 columns, in column order: a turn's own words, its
#: scope tokens (never ranked), the previous turn's words and the next turn's.
_BM25_WEIGHTS: dict[Kind, str] = {
    "turn": "{}, 0.0, {}, {}".format(*TURN_PART_WEIGHTS),
    "summary": "1.0, 0.0",
}


def _sqlite_fts(
    kind: Kind,
    words: Sequence[str],
    scope: str,
    user_id: str | None,
    conversation_id: str | None,
    *,
    rank: bool = True,
    columns: str | None = None,
    floored: bool = False,
) -> tuple[TextualSelect, dict[str, Any]]:
    table, _column, hit_columns = _SOURCES[kind]
    columns = columns or hit_columns
    # Turns are also found by their neighbours' words (migrations 0003, 0004), at lower weight.
    # Unranked (every word in half of the rows: BM25 would score them all ~0): newest first.
    score = f"-bm25({table}_fts, {_BM25_WEIGHTS[kind]})" if rank else "0.0"
    order = "score DESC" if rank else "rowid DESC"
    match = f"{SEARCHED[kind]} : (" + " OR ".join(fts_phrase(word) for word in words) + ")"
    # The scope tokens narrow the search inside the index; the SQL conditions in `scope` stay
    # the authority on what a caller may see.
    for token in scope_tokens(user_id, conversation_id):
        match = f"scope : {fts_phrase(token)} AND {match}"
    # Rank inside the index first, then join only the best rows. The scope tokens already
    # select the caller's rows; should two ids ever stem to one token, the SQL conditions drop
    # the stranger's rows (the result is then short, never wrong).
    ranked = (
        f"SELECT rowid, {score} AS score FROM {table}_fts "
        f"WHERE {table}_fts MATCH :match ORDER BY {order} LIMIT :limit"
    )
    if floored and rank:
        # Past the best rows (up to :last_hit), only those scoring at least :floor of the best
        # are joined and read: most of a long result scores next to nothing (keyword_turns).
        # Both are counted before the scope's SQL conditions: among a user's turns, those of
        # archived conversations count too, so a search without them may leave out a few
        # more rows under the floor (never one above it).
        prefix, source = f"WITH m AS MATERIALIZED ({ranked}) ", "m"
        keep = (
            "m.score >= min(:floor * (SELECT max(score) FROM m), coalesce("
            "(SELECT score FROM m ORDER BY score DESC LIMIT 1 OFFSET :last_hit), -1e308))"
        )
    else:
        prefix, source, keep = "", f"({ranked}) m", "1 = 1"
    sql = (
        f"{prefix}SELECT {columns}, m.score FROM {source} "
        f"JOIN {table} t ON t.id = m.rowid "
        "JOIN conversations c ON c.conversation_id = t.conversation_id "
        f"WHERE {keep}{scope} ORDER BY m.score DESC, t.id DESC"
    )
    return typed_select(kind, sql, typed=columns == hit_columns), {"match": match}


#: BM25's parameters, FTS5's: term-frequency saturation and length normalization.
_K1, _B = 1.2, 0.75


def _postgres_turns(
    words: Sequence[str], terms: Bm25Terms, scope: str, *, columns: str | None = None
) -> tuple[TextualSelect, dict[str, Any]]:
    """BM25 over the turns' documents (migration 0012), as FTS5 ranks them on SQLite.

    The matching rows are found by the GIN index on ``document``; each is scored from its
    ``frequencies`` (one lookup per query lexeme): a lexeme's term frequency is its
    occurrences in the turn, the previous turn and the next, weighted by
    :data:`TURN_PART_WEIGHTS`, and its IDF its word's (``terms``, :mod:`.pg_terms`). With
    no word left to rank (``terms.words`` empty: every word is in half of the rows), the rows
    containing any of ``words`` come newest first, unranked.
    """
    _table, _column, hit_columns = _SOURCES["turn"]
    columns = columns or hit_columns
    ranked = list(terms.words)
    matched = ranked or list(words)
    params: dict[str, Any] = {f"w{i}": word for i, word in enumerate(matched)}
    tsquery = " || ".join(
        f"plainto_tsquery('english'::regconfig, :w{i})" for i in range(len(matched))
    )
    found = (
        "SELECT f.turn_id, f.document, f.length FROM conversation_turns_fts f "
        "JOIN conversation_turns t ON t.id = f.turn_id "
        "JOIN conversations c ON c.conversation_id = t.conversation_id, "
        f"(SELECT {tsquery} AS query) q WHERE f.document @@ q.query{scope}"
    )
    if not ranked:
        sql = (
            f"WITH m AS ({found}) SELECT {columns}, 0.0 AS score FROM m "
            "JOIN conversation_turns t ON t.id = m.turn_id ORDER BY t.id DESC LIMIT :limit"
        )
        return typed_select("turn", sql, typed=columns == hit_columns), params
    # One term per query lexeme (a word may stem to several, two words to one: each lexeme
    # counts once), its IDF and its weighted occurrences in the turn and its neighbours,
    # read once per row (the subquery is kept apart from the score by OFFSET 0: inlined,
    # each lookup would run twice). Float8 throughout: numeric arithmetic cost as much again.
    lookups = ["CAST(:k1 AS float8) * (CAST(:b0 AS float8) + CAST(:b AS float8) * f.length "
               "/ CAST(:average AS float8)) AS k"]  # fmt: skip
    terms_sum = []
    for j, (lexeme, idf) in enumerate(terms.lexemes.items()):
        params.update({f"l{j}": lexeme, f"i{j}": idf})
        lookups.append(f"coalesce(CAST(f.frequencies -> CAST(:l{j} AS text) AS float8), 0) AS t{j}")
        terms_sum.append(f"CAST(:i{j} AS float8) * x.t{j} * CAST(:k2 AS float8) / (x.t{j} + x.k)")
    params.update(average=terms.average_length, k1=_K1, k2=_K1 + 1, b0=1 - _B, b=_B)
    score = " + ".join(terms_sum) or "0.0"
    sql = (
        f"SELECT {columns}, {score} AS score FROM conversation_turns_fts f "
        "JOIN conversation_turns t ON t.id = f.turn_id "
        "JOIN conversations c ON c.conversation_id = t.conversation_id "
        f"CROSS JOIN LATERAL (SELECT {', '.join(lookups)} OFFSET 0) x, "
        f"(SELECT {tsquery} AS query) q "
        f"WHERE f.document @@ q.query{scope} ORDER BY score DESC, t.id DESC LIMIT :limit"
    )
    return typed_select("turn", sql, typed=columns == hit_columns), params


def _postgres_fts(
    kind: Kind, words: Sequence[str], scope: str, *, columns: str | None = None
) -> tuple[TextualSelect, dict[str, Any]]:
    table, column, hit_columns = _SOURCES[kind]
    columns = columns or hit_columns
    # plainto_tsquery per word, OR-ed: each word is a bound parameter, never parsed as syntax.
    params = {f"w{i}": word for i, word in enumerate(words)}
    tsquery = " || ".join(
        f"plainto_tsquery('english'::regconfig, :w{i})" for i in range(len(words))
    )
    vector = f"to_tsvector('english'::regconfig, t.{column})"
    sql = (
        f"SELECT {columns}, ts_rank_cd({vector}, q.query) AS score "
        f"FROM {table} t JOIN conversations c ON c.conversation_id = t.conversation_id, "
        f"(SELECT {tsquery} AS query) q "
        f"WHERE {vector} @@ q.query{scope} ORDER BY score DESC LIMIT :limit"
    )
    return typed_select(kind, sql, typed=columns == hit_columns), params


def _like(
    kind: Kind, words: Sequence[str], scope: str, *, columns: str | None = None
) -> tuple[TextualSelect, dict[str, Any]]:
    table, column, hit_columns = _SOURCES[kind]
    columns = columns or hit_columns
    params: dict[str, Any] = {}
    matches: list[str] = []
    for i, word in enumerate(words):
        escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params[f"w{i}"] = f"%{escaped}%"
        matches.append(f"(CASE WHEN lower(t.{column}) LIKE :w{i} ESCAPE '\\' THEN 1 ELSE 0 END)")
    score = " + ".join(matches)
    sql = (
        f"SELECT {columns}, ({score}) AS score FROM {table} t "
        "JOIN conversations c ON c.conversation_id = t.conversation_id "
        f"WHERE ({score}) > 0{scope} ORDER BY score DESC LIMIT :limit"
    )
    return typed_select(kind, sql, typed=columns == hit_columns), params


def keyword_statement(
    connection: Connection,
    kind: Kind,
    words: Sequence[str],
    *,
    user_id: str | None,
    conversation_id: str | None,
    use_fts: bool,
    term_stats: TermStats | None,
    statuses: Sequence[str] | None,
    columns: str | None = None,
    floored: bool = False,
) -> tuple[TextualSelect, dict[str, Any]]:
    """The query of one kind for this dialect, and its parameters (``:limit`` left open).

    ``floored`` (SQLite FTS5 only; elsewhere the caller drops the rows): past the first
    ``:last_hit`` + 1 rows, only rows scoring at least ``:floor`` times the best are returned.
    """
    dialect = connection.dialect.name
    scope, params = _scope("t", user_id, conversation_id, statuses)
    if dialect == "postgresql" and kind == "turn":
        terms = (term_stats or TermStats()).bm25(connection, words)
        statement, extra = _postgres_turns(words, terms, scope, columns=columns)
    elif dialect == "postgresql":
        statement, extra = _postgres_fts(kind, words, scope, columns=columns)
    elif dialect == "sqlite" and use_fts:
        informative = (
            words if term_stats is None else term_stats.informative(connection, kind, words)
        )
        statement, extra = _sqlite_fts(
            kind,
            informative or words,
            scope,
            user_id,
            conversation_id,
            rank=bool(informative),
            columns=columns,
            floored=floored,
        )
    else:
        statement, extra = _like(kind, words, scope, columns=columns)
    return statement, {**params, **extra}
