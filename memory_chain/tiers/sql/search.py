"""Keyword search over turns and summaries: SQLite FTS5, PostgreSQL full-text, or LIKE.

A query is reduced to its words (letters and digits) before it reaches the database, so
FTS/``tsquery``/``LIKE`` metacharacters in user input are never interpreted. Words are OR-ed
and ranked, so a question such as "what did we say about FastAPI?" finds turns that mention
FastAPI. Scores are "higher is better" in every backend.

Turns are ranked alike on both databases: BM25 (k1 = 1.2, b = 0.75) over the turn's own
words (weight 2), the previous turn's (1) and the next turn's (½), so that an answer is found
by the question it answers and a question by its answer. SQLite computes it with FTS5's
``bm25()`` (migrations 0003, 0004); PostgreSQL from the turn's document in
``conversation_turns_fts`` (its lexemes, their weights and the document's length, migration
0012) and the words' document frequencies (:meth:`.term_stats.TermStats.bm25`), in SQL.
Summaries are ranked by BM25 on SQLite and ``ts_rank_cd`` on PostgreSQL; LIKE (SQLite
without FTS5) counts the words a row contains.

Query words that occur in at least half of the indexed rows are dropped before the search
(:class:`.term_stats.TermStats`): BM25 clamps their IDF to ~0, so they change no ranking, yet
scoring them reads their whole posting lists (bm25() counts every row that contains each query
word, in the whole index, on every query). A query of such words only finds the rows that
contain any of them, newest first, unranked (score 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import TIMESTAMP, Connection, TextualSelect, bindparam, text

from memory_chain.schemas import KeywordHit, as_utc
from memory_chain.tiers.sql.pg_terms import Bm25Terms
from memory_chain.tiers.sql.rows import client_id
from memory_chain.tiers.sql.term_stats import (
    SEARCHED,
    TABLES,
    WORD,
    Kind,
    TermStats,
    fts_phrase,
    scope_tokens,
)

#: Words beyond this many in one query are dropped (keeps pathological queries cheap).
MAX_QUERY_WORDS = 32


#: English function words dropped from queries (PostgreSQL's ``english`` configuration drops
#: these too); a query of nothing else keeps them.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves
    """.split()  # noqa: SIM905
)


def query_words(query: str) -> list[str]:
    """The distinct content words of a query, lower-cased, in order of appearance."""
    seen: dict[str, None] = {}
    for word in WORD.findall(query.lower()):
        if word.strip("_"):
            seen.setdefault(word, None)
    words = [word for word in seen if word not in STOPWORDS] or list(seen)
    return words[:MAX_QUERY_WORDS]


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


# Per kind: table, text column, the columns a hit carries, and the FTS5 table name.
_TURN_COLUMNS = "t.conversation_id, t.turn_number, t.role, t.content, t.timestamp"
_SUMMARY_COLUMNS = (
    "t.conversation_id, t.turn_range_start, t.turn_range_end, t.summary_text, t.created_at"
)
_SOURCES: dict[Kind, tuple[str, str, str]] = {
    "turn": (TABLES["turn"], "content", _TURN_COLUMNS),
    "summary": (TABLES["summary"], "summary_text", _SUMMARY_COLUMNS),
}
_TIME_COLUMN: dict[Kind, str] = {"turn": "timestamp", "summary": "created_at"}


def _typed(kind: Kind, sql: str, *, typed: bool = True) -> TextualSelect:
    # SQLite returns timestamps as text unless the result column is typed.
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
    return _typed(kind, sql, typed=columns == hit_columns), {"match": match}


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
        return _typed("turn", sql, typed=columns == hit_columns), params
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
    return _typed("turn", sql, typed=columns == hit_columns), params


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
    return _typed(kind, sql, typed=columns == hit_columns), params


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
    return _typed(kind, sql, typed=columns == hit_columns), params


def sqlite_has_fts(connection: Connection) -> bool:
    """Whether the migration created the FTS5 tables (SQLite builds without FTS5 lack them)."""
    row = connection.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'conversation_turns_fts'"
    ).first()
    return row is not None


def keyword_search(
    connection: Connection,
    query: str,
    *,
    user_id: str | None,
    conversation_id: str | None = None,
    kinds: Sequence[Kind] = ("turn", "summary"),
    limit: int = 10,
    use_fts: bool = True,
    term_stats: TermStats | None = None,
    statuses: Sequence[str] | None = None,
) -> list[KeywordHit]:
    """Search turns and summaries by keyword.

    Args:
        connection: An open connection to the tier-2 database.
        query: Free text; only its words are used.
        user_id: Restrict to this user's conversations (``None``: every user).
        conversation_id: Restrict to one conversation (its stored id).
        kinds: Which of turns and summaries to search.
        limit: Most hits per kind.
        use_fts: Use the full-text index (False falls back to LIKE).
        term_stats: SQLite: drop the words in half of the rows or more, with these counts
            (a query of nothing else is answered newest first, unranked).
        statuses: Only conversations with one of these statuses (``None``: any).

    Returns:
        Hits of each kind, best first, turns before summaries.
    """
    words = query_words(query)
    if not words or limit <= 0:
        return []
    hits: list[KeywordHit] = []
    for kind in kinds:
        statement, params = _statement(
            connection,
            kind,
            words,
            user_id=user_id,
            conversation_id=conversation_id,
            use_fts=use_fts,
            term_stats=term_stats,
            statuses=statuses,
        )
        rows = connection.execute(statement, {**params, "limit": limit}).all()
        hits.extend(_to_hit(kind, row) for row in rows)
    return hits


def keyword_turns(
    connection: Connection,
    query: str,
    *,
    user_id: str | None,
    conversation_id: str | None = None,
    limit: int = 10,
    scored: int = 1000,
    floor: float = 0.0,
    use_fts: bool = True,
    term_stats: TermStats | None = None,
    statuses: Sequence[str] | None = None,
) -> tuple[list[KeywordHit], dict[tuple[str, int], float]]:
    """The best ``limit`` turns by keyword, and the scores of the best ``scored``.

    One search (the same as :func:`keyword_search` for turns, which takes the same
    arguments): the scores of the best ``scored`` matches by (conversation, turn number),
    read without their text, and the text of the best ``limit``. A fusion then gives a turn
    another search found its keyword score even when it is no keyword candidate. Past the
    best ``limit``, a turn scoring under ``floor`` times the best is left out: in a fusion
    that normalizes by the best score its keyword part is under ``floor`` of the keyword
    weight. On SQLite such rows are not even read (a query that shares a common word with
    most turns matches most of them, and most of those score next to nothing).

    Returns:
        The hits, best first, and every scored turn's score (conversations by the ids
        clients use, as in the hits).
    """
    words = query_words(query)
    if not words or max(limit, scored) <= 0:
        return [], {}
    floored = floor > 0.0 and scored > limit
    statement, params = _statement(
        connection,
        "turn",
        words,
        user_id=user_id,
        conversation_id=conversation_id,
        use_fts=use_fts,
        term_stats=term_stats,
        statuses=statuses,
        columns="t.id, t.conversation_id, t.turn_number",
        floored=floored,
    )
    bounds = {"floor": floor, "last_hit": max(limit - 1, 0)} if floored else {}
    rows = connection.execute(statement, {**params, **bounds, "limit": max(limit, scored)}).all()
    if floored and rows:
        least = floor * float(rows[0][3])
        rows = [*rows[:limit], *(row for row in rows[limit:] if float(row[3]) >= least)]
    # A search's rows come from a few conversations: map each stored id to the client's once.
    names: dict[str, str] = {}
    scores: dict[tuple[str, int], float] = {}
    for _id, stored, number, score in rows:
        name = names.get(stored)
        if name is None:
            name = names[stored] = client_id(stored)
        scores[(name, int(number))] = float(score)
    best = {int(row[0]): float(row[3]) for row in rows[: max(limit, 0)]}
    if not best:
        return [], scores
    read = _typed(
        "turn", f"SELECT {_TURN_COLUMNS}, t.id FROM conversation_turns t WHERE t.id IN :ids"
    ).bindparams(bindparam("ids", expanding=True))
    by_id = {row[-1]: row for row in connection.execute(read, {"ids": list(best)})}
    return [
        _to_hit("turn", (*by_id[turn_id][:-1], score))
        for turn_id, score in best.items()
        if turn_id in by_id
    ], scores


def _statement(
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


def _to_hit(kind: Kind, row: Any) -> KeywordHit:
    if kind == "turn":
        conversation_id, turn_number, role, content, timestamp, score = row
        return KeywordHit(
            kind="turn",
            conversation_id=client_id(conversation_id),
            text=content,
            score=float(score),
            timestamp=as_utc(timestamp),
            turn_number=turn_number,
            role=role,
        )
    conversation_id, start, end, summary_text, created_at, score = row
    return KeywordHit(
        kind="summary",
        conversation_id=client_id(conversation_id),
        text=summary_text,
        score=float(score),
        timestamp=as_utc(created_at),
        turn_range=(start, end),
    )
