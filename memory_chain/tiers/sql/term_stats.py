"""The full-text vocabulary of keyword search, and the word counts it caches.

Keyword search (:mod:`.search`) ranks turns with BM25 on both databases: FTS5's own on
SQLite, computed in SQL from these counts on PostgreSQL (migration 0012). Counting the rows
that contain a word reads its whole posting list, so the counts are cached:
:class:`TermStats` finds the query words so common that BM25 ignores them (they are dropped
before the search) and, on PostgreSQL, gives BM25 its document frequencies.
:class:`ScopeStats` finds the words common in one user's recent turns (left out of the query
that semantic search embeds), on any database. :class:`TTLCache` keeps both, and the
conversation statuses retrieval checks (:mod:`.lifecycle`).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Generic, Literal, TypeVar

from sqlalchemy import Connection, text

from memory_chain.errors import MemoryChainError
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.pg_terms import Bm25Terms, bm25_idf, count_terms, estimated_rows

logger = logging.getLogger(__name__)
V = TypeVar("V")

#: A word, as queries and the common-word counts split text (FTS5 splits alike, then stems).
WORD = re.compile(r"\w+", re.UNICODE)

Kind = Literal["turn", "summary"]
#: The table each kind is searched in (its FTS5 index is ``<table>_fts``).
TABLES: dict[Kind, str] = {"turn": "conversation_turns", "summary": "conversation_summaries"}
#: The FTS5 columns a query searches, per kind: a turn's own words, the previous turn's words
#: (migration 0003) and the next turn's (migration 0004); a summary's own words.
SEARCHED: dict[Kind, str] = {"turn": "{body context next}", "summary": "body"}


def fts_phrase(token: str) -> str:
    """An FTS5 string literal: nothing inside it is parsed as query syntax."""
    return '"' + token.replace('"', '""') + '"'


def scope_tokens(user_id: str | None, conversation_id: str | None) -> list[str]:
    """The scope tokens the FTS5 triggers index (see migration 0001)."""
    tokens = []
    if conversation_id is not None:
        tokens.append("c" + conversation_id.encode().hex())
    if user_id is not None:
        tokens.append("u" + user_id.encode().hex())
    return tokens


class TTLCache(Generic[V]):
    """Values, each kept ``ttl`` seconds, at most ``size`` (the least recently used go first).

    Thread-safe. Counting rows in an FTS5 index reads posting lists, so the searches count
    each word once a ``ttl``; a scope's common words and the conversation statuses retrieval
    checks are kept the same way.

    Args:
        ttl: Seconds a value is fresh.
        size: Values kept.
        clock: Monotonic time source (tests).
    """

    def __init__(self, *, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self.size = size
        self.clock = clock
        self._values: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def fresh(self, keys: Sequence[Hashable]) -> dict[Hashable, V]:
        """The values of ``keys`` younger than ``ttl`` (missing keys are left out)."""
        now = self.clock()
        found: dict[Hashable, V] = {}
        with self._lock:
            for key in keys:
                kept = self._values.get(key)
                if kept is not None and now - kept[0] < self.ttl:
                    self._values.move_to_end(key)
                    found[key] = kept[1]
        return found

    def aged(self, key: Hashable) -> tuple[V, bool] | None:
        """The value of ``key`` however old, and whether it is older than ``ttl``."""
        now = self.clock()
        with self._lock:
            kept = self._values.get(key)
            if kept is None:
                return None
            self._values.move_to_end(key)
        return kept[1], now - kept[0] >= self.ttl

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._values.clear()

    def store(self, values: Mapping[Hashable, V]) -> None:
        """Keep ``values`` (by key) from now on."""
        now = self.clock()
        with self._lock:
            for key, value in values.items():
                self._values[key] = (now, value)
                self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)


class TermStats:
    """Cached document frequencies of query words in the full-text indexes.

    Counting the rows that contain a word costs as much as bm25()'s own count (it reads the
    word's posting list), so counts are cached per word for ``ttl`` seconds, ``size`` words
    at most. On SQLite the row total is bounded from above by the table's largest rowid (one
    index lookup): a word is only dropped when its count, at most ``ttl`` seconds old, is at
    least half that bound, which implies FTS5's own IDF clamp. On PostgreSQL the rows and
    their tokens are counted too (:meth:`bm25`).

    Args:
        ttl: Seconds a count is reused.
        size: Words kept.
        min_rows: Below this many rows every word is kept (counting would cost more than
            it saves).
        exact_rows: PostgreSQL: from this many rows, the totals and the most common words'
            counts are estimated from the planner's statistics (:mod:`.pg_terms`).
        clock: Monotonic time source (tests).
    """

    def __init__(
        self,
        *,
        ttl: float = 60.0,
        size: int = 4096,
        min_rows: int = 1_000,
        exact_rows: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_rows = min_rows
        self.exact_rows = exact_rows
        self._cache: TTLCache[int] = TTLCache(ttl=ttl, size=size, clock=clock)
        # A word's lexemes never change (the text search configuration is fixed).
        self._lexemes: TTLCache[tuple[str, ...]] = TTLCache(
            ttl=float("inf"), size=size, clock=clock
        )

    def informative(self, connection: Connection, kind: Kind, words: Sequence[str]) -> list[str]:
        """``words`` without those in at least half of the rows (may be none of them).

        One statement reads the row bound and counts the words not cached; while the bound,
        read at most ``ttl`` seconds ago, is under ``min_rows``, nothing is read.
        """
        table = TABLES[kind]
        # A small index keeps every word: its row bound is cached like the counts, so that
        # such a search counts nothing (a user's summaries are often a few hundred rows).
        bound_key = (kind, None)
        cached = self._cache.fresh([bound_key, *((kind, word) for word in words)])
        known = cached.get(bound_key)
        if known is not None and known < self.min_rows:
            return list(words)
        counts = {word: cached[(kind, word)] for word in words if (kind, word) in cached}
        missing = [word for word in words if word not in counts]
        selects = [f"(SELECT coalesce(max(id), 0) FROM {table})"] + [
            f"(SELECT count(*) FROM {table}_fts WHERE {table}_fts MATCH ?)" for _ in missing
        ]
        row = connection.exec_driver_sql(
            "SELECT " + ", ".join(selects),
            tuple(f"{SEARCHED[kind]} : {fts_phrase(word)}" for word in missing),
        ).one()
        bound = int(row[0])
        counted = {word: int(count) for word, count in zip(missing, row[1:], strict=True)}
        self._cache.store({bound_key: bound, **{(kind, w): n for w, n in counted.items()}})
        counts.update(counted)
        if bound < self.min_rows:
            return list(words)
        return [word for word in words if 2 * counts[word] < bound]

    def bm25(self, connection: Connection, words: Sequence[str]) -> Bm25Terms:
        """PostgreSQL: the IDF of each query word's lexemes over the turns' documents.

        Like FTS5, over every turn of every user (:mod:`.pg_terms`). Words in at least half
        of the rows are dropped once there are ``min_rows`` rows (BM25 clamps their IDF to
        ~0, as on SQLite). One statement reads what is not cached, a second one before it
        when the totals are due (whether the index is past ``exact_rows``).
        """
        totals: tuple[Hashable, Hashable] = ("turn-rows", None), ("turn-tokens", None)
        cached = self._cache.fresh([*totals, *(("turn-pg", word) for word in words)])
        known = self._lexemes.fresh(words)
        missing = [w for w in words if ("turn-pg", w) not in cached or w not in known]
        due = any(key not in cached for key in totals)
        if missing or due:
            rows = cached.get(totals[0]) if not due else estimated_rows(connection)
            counted = count_terms(
                connection, missing, totals=due, estimate=(rows or 0) >= self.exact_rows
            )
            fresh: dict[Hashable, int] = {("turn-pg", w): n for w, n in counted.matching.items()}
            if counted.rows is not None and counted.tokens is not None:
                fresh.update({totals[0]: counted.rows, totals[1]: counted.tokens})
            self._cache.store(fresh)
            stemmed: dict[Hashable, tuple[str, ...]] = {}
            stemmed.update(counted.lexemes.items())
            self._lexemes.store(stemmed)
            cached = {**cached, **fresh}
            known.update(counted.lexemes)
        rows, tokens = int(cached[totals[0]]), int(cached[totals[1]])
        kept: list[str] = []
        dropped: list[str] = []
        lexemes: dict[str, float] = {}
        for word in words:
            matching = cached[("turn-pg", word)]
            if rows >= self.min_rows and 2 * matching >= rows:
                dropped.append(word)
                continue
            kept.append(word)
            idf = bm25_idf(rows, matching)
            for lexeme in known[word]:
                lexemes[lexeme] = max(idf, lexemes.get(lexeme, 0.0))
        return Bm25Terms(
            words=kept,
            lexemes=lexemes,
            average_length=tokens / rows if rows and tokens else 1.0,
            dropped=dropped,
        )


class ScopeStats:
    """The words common in one user's (or one conversation's) recent turns, cached.

    Semantic search embeds the query whole, and an embedding cannot discount a word the way
    BM25's IDF does: a word found in most of the searched turns (a name that opens every
    message, a topic the user always talks about) pulls every turn that mentions it to the
    top. :meth:`common` names such words so that they can be left out of the query that is
    embedded.

    A scope's common words are counted in its ``sample`` most recent turns, read and split
    into words here (so on any database); a query then only looks its words up. The first
    query of a scope counts them; after ``ttl`` seconds a query still gets the words it had
    and starts one recount in a background thread, so that no request
    waits for a recount (~30 ms for a user of 100,000 turns, ~1 ms for 2,000). Common words
    are by definition frequent enough that a sample of recent turns finds them, and they
    change slowly.

    Args:
        ttl: Seconds after which a scope's words are counted again.
        size: Scopes kept (the least recently used go first).
        sample: Recent turns counted per scope.
        clock: Monotonic time source (tests).
    """

    def __init__(
        self,
        *,
        ttl: float = 60.0,
        size: int = 1024,
        sample: int = 1000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sample = sample
        self._words: TTLCache[frozenset[str]] = TTLCache(ttl=ttl, size=size, clock=clock)
        self._recounting: set[Hashable] = set()
        self._lock = threading.Lock()

    def common(
        self,
        database: Database,
        words: Sequence[str],
        *,
        user_id: str | None,
        conversation_id: str | None,
        share: float,
        min_rows: int,
    ) -> set[str]:
        """The ``words`` found in at least ``share`` of the scope's recent turns.

        None when the scope has fewer than ``min_rows`` turns (shares of a few turns say
        little). The scope is one conversation (its stored id) or else one user.

        Raises:
            StorageError: If the scope's first count cannot be read.
        """
        if not words or (user_id is None and conversation_id is None):
            return set()
        key = (user_id, conversation_id, share, min_rows)
        known = self._words.aged(key)
        if known is None:
            common = self._count(database, key)
        else:
            common, old = known
            with self._lock:
                recount = old and key not in self._recounting
                if recount:
                    self._recounting.add(key)
            if recount:
                threading.Thread(
                    target=self._recount, args=(database, key), name="common-words", daemon=True
                ).start()
        return {word for word in words if word in common}

    def _count(
        self, database: Database, key: tuple[str | None, str | None, float, int]
    ) -> frozenset[str]:
        user_id, conversation_id, share, min_rows = key
        with database.connect() as connection:
            texts = _recent_turns(connection, user_id, conversation_id, self.sample)
        common = common_words(texts, share=share, min_rows=min_rows)
        self._words.store({key: common})
        return common

    def _recount(self, database: Database, key: tuple[str | None, str | None, float, int]) -> None:
        try:
            self._count(database, key)
        except MemoryChainError as exc:  # the old words stay; the next query tries again
            logger.debug("could not recount the common words of %s: %s", key[:2], exc)
        finally:
            with self._lock:
                self._recounting.discard(key)


def common_words(texts: Sequence[str], *, share: float, min_rows: int) -> frozenset[str]:
    """The lower-cased words found in at least ``share`` of ``texts`` (none below ``min_rows``)."""
    if len(texts) < min_rows:
        return frozenset()
    counts: Counter[str] = Counter()
    for turn in texts:
        counts.update(set(WORD.findall(turn.lower())))
    return frozenset(word for word, count in counts.items() if count >= share * len(texts))


def _recent_turns(
    connection: Connection, user_id: str | None, conversation_id: str | None, limit: int
) -> list[str]:
    """The text of the scope's ``limit`` most recent turns (a conversation's, or a user's)."""
    if conversation_id is not None:
        sql = (
            "SELECT content FROM conversation_turns WHERE conversation_id = :scope "
            "ORDER BY id DESC LIMIT :limit"
        )
        scope: str | None = conversation_id
    else:
        # The newest ids first (the conversation index holds them), then only their text.
        sql = (
            "SELECT content FROM conversation_turns WHERE id IN ("
            "SELECT t.id FROM conversation_turns t JOIN conversations c "
            "ON c.conversation_id = t.conversation_id WHERE c.user_id = :scope "
            "ORDER BY t.id DESC LIMIT :limit)"
        )
        scope = user_id
    rows = connection.execute(text(sql), {"scope": scope, "limit": limit})
    return [row[0] for row in rows]
