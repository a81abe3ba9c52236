"""Keyword search over turns and summaries: the words of a query, the search, its hits.

A query is reduced to its words (letters and digits) before it reaches the database, so
FTS/``tsquery``/``LIKE`` metacharacters in user input are never interpreted. Words are OR-ed
and ranked, so a question such as "what did we say about FastAPI?" finds turns that mention
FastAPI. Scores are "higher is better" in every backend. The statements, one per database
(SQLite FTS5, PostgreSQL full-text, LIKE) and their ranking (BM25 over a turn and its
neighbours on both databases), are :mod:`.search_sql`'s.

Query words that occur in at least half of the indexed rows are dropped before the search
(:class:`.term_stats.TermStats`): BM25 clamps their IDF to ~0, so they change no ranking, yet
scoring them reads their whole posting lists (bm25() counts every row that contains each query
word, in the whole index, on every query). A query of such words only finds the rows that
contain any of them, newest first, unranked (score 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam

from memory_chain.schemas import KeywordHit, as_utc
from memory_chain.tiers.sql.rows import client_id
from memory_chain.tiers.sql.search_sql import (
    TURN_COLUMNS,
    keyword_statement,
    typed_select,
)
from memory_chain.tiers.sql.term_stats import WORD, Kind, TermStats

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
        statement, params = keyword_statement(
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
    statement, params = keyword_statement(
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
    read = typed_select(
        "turn", f"SELECT {TURN_COLUMNS}, t.id FROM conversation_turns t WHERE t.id IN :ids"
    ).bindparams(bindparam("ids", expanding=True))
    by_id = {row[-1]: row for row in connection.execute(read, {"ids": list(best)})}
    return [
        _to_hit("turn", (*by_id[turn_id][:-1], score))
        for turn_id, score in best.items()
        if turn_id in by_id
    ], scores


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
