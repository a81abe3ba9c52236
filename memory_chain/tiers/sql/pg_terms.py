"""What BM25 needs on PostgreSQL: rows, tokens, and each query word's rows and lexemes.

SQLite's FTS5 computes BM25 itself; on PostgreSQL keyword search computes it in SQL over
``conversation_turns_fts`` (migration 0012, :func:`.search.keyword_search`) from the
counts read here, which :class:`.term_stats.TermStats` caches. Like FTS5, the counts are over
every turn of the database: ``N`` rows, and for a word the ``n`` rows that hold it in the
turn or a neighbour.

Counting stays cheap at any size. Up to ``exact_rows`` rows (the planner's estimate) every
figure is counted. Above, counting the rows would read the whole table, and counting a
common word its whole posting list: the rows are then the planner's estimate, the tokens
that times the mean length in a sample of pages, and a word among the column's most common
lexemes (``pg_stats.most_common_elems``, kept by ANALYZE and autovacuum) gets its share of
the rows; a rarer word is still counted (its posting list is short).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, text

#: The turns' index (migration 0012).
INDEX = "conversation_turns_fts"


@dataclass(frozen=True)
class Bm25Terms:
    """What the BM25 statement needs of a query, from :meth:`.TermStats.bm25`.

    Attributes:
        words: The query words that rank (those in half of the rows or more are dropped,
            as on SQLite; empty when every word is).
        lexemes: Each lexeme of those words (``to_tsvector('english')``) and its IDF, the
            largest of its words' when two share it.
        average_length: The mean length of a turn's document, in words.
        dropped: The words left out (a query of nothing else still finds their rows).
    """

    words: list[str]
    lexemes: dict[str, float]
    average_length: float
    dropped: list[str]


@dataclass(frozen=True)
class Counts:
    """What :func:`count_terms` read: the totals (when asked) and per word its rows and lexemes."""

    rows: int | None
    tokens: int | None
    matching: dict[str, int]
    lexemes: dict[str, tuple[str, ...]]


def bm25_idf(rows: int, matching: int) -> float:
    """FTS5's IDF: ``log((N - n + 0.5) / (n + 0.5))``, at least 1e-6 (a word in half the rows).

    The row count is cached (and another replica may have added rows since), so a word's
    fresh count can exceed it: ``N`` is taken as at least ``n``.
    """
    rows = max(rows, matching)
    return max(math.log((rows - matching + 0.5) / (matching + 0.5)), 1e-6)


def estimated_rows(connection: Connection) -> float:
    """The planner's estimate of the index's rows (0 before the first ANALYZE)."""
    found = connection.execute(
        text(f"SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = to_regclass('{INDEX}')")
    ).scalar()
    return float(found or 0)


#: The planner's estimate of the rows, and the column's most common lexemes and their shares.
_ESTIMATES = (
    "WITH r AS (SELECT greatest(reltuples, 1)::float8 AS n FROM pg_class "
    f"WHERE oid = to_regclass('{INDEX}')), "
    "s AS (SELECT f.lexeme, f.share FROM pg_stats p CROSS JOIN LATERAL "
    "unnest(p.most_common_elems::text::text[], p.most_common_elem_freqs) AS f(lexeme, share) "
    f"WHERE p.schemaname = current_schema() AND p.tablename = '{INDEX}' "
    "AND p.attname = 'document') "
)


def count_terms(
    connection: Connection, words: Sequence[str], *, totals: bool, estimate: bool
) -> Counts:
    """Count (or, with ``estimate``, estimate) the totals and each word's rows; one statement.

    Args:
        connection: A connection to the tier-2 PostgreSQL database.
        words: Query words.
        totals: Read the rows and their tokens too.
        estimate: The index is large: estimate what would read much of it.
    """
    selects: list[str] = []
    if totals and estimate:
        sample = "TABLESAMPLE SYSTEM (least(100, 500000 / r.n))"
        selects += ["r.n", f"r.n * (SELECT coalesce(avg(length), 0) FROM {INDEX} {sample})"]
    elif totals:
        selects += [f"(SELECT count(*) FROM {INDEX})", f"(SELECT sum(length) FROM {INDEX})"]
    for i in range(len(words)):
        lexemes = f"tsvector_to_array(to_tsvector('english'::regconfig, :w{i}))"
        exact = (
            f"(SELECT count(*) FROM {INDEX} "
            f"WHERE document @@ plainto_tsquery('english'::regconfig, :w{i}))"
        )
        if estimate:
            share = f"(SELECT max(s.share) FROM s WHERE s.lexeme = ANY({lexemes}))"
            exact = f"coalesce(r.n * {share}, {exact})"
        selects += [exact, lexemes]
    statement = (
        f"{_ESTIMATES}SELECT {', '.join(selects)} FROM r"
        if estimate
        else (f"SELECT {', '.join(selects)}")
    )
    row = connection.execute(text(statement), {f"w{i}": w for i, w in enumerate(words)}).one()
    first = 2 if totals else 0
    values = list(row)
    return Counts(
        rows=round(float(values[0] or 0)) if totals else None,
        tokens=round(float(values[1] or 0)) if totals else None,
        matching={w: round(float(values[first + 2 * i] or 0)) for i, w in enumerate(words)},
        lexemes={w: tuple(values[first + 2 * i + 1] or ()) for i, w in enumerate(words)},
    )
