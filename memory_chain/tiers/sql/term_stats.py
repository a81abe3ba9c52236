"""The SQLite FTS5 vocabulary of keyword search, and the word counts it caches.

Keyword search (:mod:`.search`) ranks with FTS5's BM25 on SQLite. Two of its steps count
rows in the FTS5 indexes, which reads whole posting lists, so the counts are cached:
:class:`TermStats` finds the query words so common that BM25 ignores them (they are dropped
before the search), :class:`ScopeStats` the words common in one user's turns (left out of the
query that semantic search embeds). :class:`CountCache` is the small TTL cache both use, and
the conversation statuses retrieval checks (:mod:`.lifecycle`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Literal

from sqlalchemy import Connection

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


class CountCache:
    """Counts, each kept ``ttl`` seconds, at most ``size`` (the least recently used go first).

    Thread-safe. Counting rows in an FTS5 index reads posting lists, so the searches count
    each word once a ``ttl``.

    Args:
        ttl: Seconds a count is reused.
        size: Counts kept.
        clock: Monotonic time source (tests).
    """

    def __init__(self, *, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self.size = size
        self.clock = clock
        self._counts: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def fresh(self, keys: Sequence[Hashable]) -> dict[Hashable, int]:
        """The counts of ``keys`` younger than ``ttl`` (missing keys are left out)."""
        now = self.clock()
        found: dict[Hashable, int] = {}
        with self._lock:
            for key in keys:
                cached = self._counts.get(key)
                if cached is not None and now - cached[0] < self.ttl:
                    self._counts.move_to_end(key)
                    found[key] = cached[1]
        return found

    def clear(self) -> None:
        """Forget every count."""
        with self._lock:
            self._counts.clear()

    def store(self, counts: dict[Hashable, int]) -> None:
        """Keep ``counts`` from now on."""
        now = self.clock()
        with self._lock:
            for key, count in counts.items():
                self._counts[key] = (now, count)
                self._counts.move_to_end(key)
            while len(self._counts) > self.size:
                self._counts.popitem(last=False)


class TermStats:
    """Cached document frequencies of query words in the SQLite FTS5 indexes.

    Counting the rows that contain a word costs as much as bm25()'s own count (it reads the
    word's posting list), so counts are cached per word for ``ttl`` seconds, ``size`` words
    at most. The row total is bounded from above by the table's largest rowid (one index
    lookup): a word is only dropped when its count, at most ``ttl`` seconds old, is at least
    half that bound, which implies FTS5's own IDF clamp.

    Args:
        ttl: Seconds a count is reused.
        size: Words kept.
        min_rows: Below this many rows every word is kept (counting would cost more than
            it saves).
        clock: Monotonic time source (tests).
    """

    def __init__(
        self,
        *,
        ttl: float = 60.0,
        size: int = 4096,
        min_rows: int = 1_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_rows = min_rows
        self._cache = CountCache(ttl=ttl, size=size, clock=clock)

    def informative(self, connection: Connection, kind: Kind, words: Sequence[str]) -> list[str]:
        """``words`` without those in at least half of the rows (may be none of them).

        One statement reads the row bound and counts the words not cached.
        """
        table = TABLES[kind]
        cached = self._cache.fresh([(kind, word) for word in words])
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
        self._cache.store({(kind, word): count for word, count in counted.items()})
        counts.update(counted)
        if bound < self.min_rows:
            return list(words)
        return [word for word in words if 2 * counts[word] < bound]


class ScopeStats:
    """How many of one user's (or one conversation's) turns contain each word, cached.

    Semantic search embeds the query whole, and an embedding cannot discount a word the way
    BM25's IDF does: a word found in most of the searched turns (a name that opens every
    message, a topic the user always talks about) pulls every turn that mentions it to the
    top. :meth:`common` names such words so that they can be left out of the query that is
    embedded. Counts come from the turns' FTS5 index (SQLite only) and are kept for ``ttl``
    seconds, ``size`` entries at most.

    Args:
        ttl: Seconds a count is reused.
        size: Counts kept.
        clock: Monotonic time source (tests).
    """

    def __init__(
        self, *, ttl: float = 60.0, size: int = 4096, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._cache = CountCache(ttl=ttl, size=size, clock=clock)

    def common(
        self,
        connection: Connection,
        words: Sequence[str],
        *,
        user_id: str | None,
        conversation_id: str | None,
        share: float,
        min_rows: int,
    ) -> set[str]:
        """The ``words`` found in at least ``share`` of the scope's turns.

        None when the scope has fewer than ``min_rows`` turns (shares of a few turns say
        little). One statement counts the scope and the words not cached.
        """
        scope = tuple(scope_tokens(user_id, conversation_id))
        if not scope or not words:
            return set()
        wanted = ["", *words]  # "" stands for the scope's row count
        cached = self._cache.fresh([(scope, word) for word in wanted])
        counts = {word: cached[(scope, word)] for word in wanted if (scope, word) in cached}
        missing = [word for word in wanted if word not in counts]
        if missing:
            in_scope = " AND ".join(f"scope : {fts_phrase(token)}" for token in scope)
            matches = [
                in_scope if not word else f"{in_scope} AND body : {fts_phrase(word)}"
                for word in missing
            ]
            selects = [
                "(SELECT count(*) FROM conversation_turns_fts WHERE conversation_turns_fts MATCH ?)"
                for _ in missing
            ]
            row = connection.exec_driver_sql("SELECT " + ", ".join(selects), tuple(matches)).one()
            counted = {word: int(count) for word, count in zip(missing, row, strict=True)}
            self._cache.store({(scope, word): count for word, count in counted.items()})
            counts.update(counted)
        total = counts[""]
        if total < min_rows:
            return set()
        return {word for word in words if counts[word] >= share * total}
