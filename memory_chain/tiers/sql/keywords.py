"""The store's keyword search: turns and summaries by words, scoped to a user or conversation.

:class:`KeywordSearch` is part of :class:`~memory_chain.tiers.sql.store.SQLStore`; these
methods live here to keep one concern per module. The searches are in :mod:`.search` (their
SQL in :mod:`.search_sql`), the word counts they cache in :mod:`.term_stats`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection

from memory_chain import metrics
from memory_chain.errors import InvalidInputError
from memory_chain.schemas import KeywordHit
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.lifecycle import ACTIVE, WITH_ARCHIVED
from memory_chain.tiers.sql.rows import stored_id
from memory_chain.tiers.sql.search import keyword_search, keyword_turns, query_words, sqlite_has_fts
from memory_chain.tiers.sql.term_stats import Kind, ScopeStats, TermStats

T = TypeVar("T")


def _scoped_key(user_id: str | None, conversation_id: str | None) -> str | None:
    """The stored id of a search's conversation (it needs the user who owns it)."""
    if conversation_id is None:
        return None
    if user_id is None:
        raise InvalidInputError("a search within one conversation needs its user_id")
    return stored_id(user_id, conversation_id)


class KeywordSearch:
    """Keyword search, for :class:`SQLStore` (which provides the attributes below)."""

    database: Database
    #: Whether SQLite has the FTS5 tables (``None``: not checked yet; always on PostgreSQL).
    _fts: bool | None
    _term_stats: TermStats
    _scope_stats: ScopeStats

    def _has_fts(self, conn: Connection) -> bool:
        if self._fts is None:
            self._fts = self.database.dialect != "sqlite" or sqlite_has_fts(conn)
        return self._fts

    def _run(
        self,
        find: Callable[..., T],
        query: str,
        *,
        user_id: str | None,
        conversation_id: str | None,
        include_archived: bool,
        **options: Any,
    ) -> T:
        """Run one of :mod:`.search`'s searches in the scope the arguments name."""
        key = _scoped_key(user_id, conversation_id)
        with metrics.retrieval_timer("tier2"), self.database.connect() as conn:
            return find(
                conn,
                query,
                user_id=user_id,
                conversation_id=key,
                use_fts=self._has_fts(conn),
                term_stats=self._term_stats,
                # A conversation asked for by name is searched archived or not.
                statuses=WITH_ARCHIVED if include_archived or conversation_id else ACTIVE,
                **options,
            )

    def search(
        self,
        query: str,
        *,
        user_id: str | None,
        conversation_id: str | None = None,
        kinds: Sequence[Kind] = ("turn", "summary"),
        limit: int = 10,
        include_archived: bool = False,
    ) -> list[KeywordHit]:
        """Keyword search over turns and summaries (see :mod:`.search`).

        Args:
            query: Free text.
            user_id: Restrict to this user's conversations (``None``: every user).
            conversation_id: Restrict to one conversation of ``user_id`` (archived or not: it
                is named).
            kinds: ``"turn"``, ``"summary"`` or both.
            limit: Most hits per kind.
            include_archived: Search archived conversations too.

        Returns:
            Hits, best first within each kind; scores are higher for better matches.
        """
        return self._run(
            keyword_search,
            query,
            user_id=user_id,
            conversation_id=conversation_id,
            include_archived=include_archived,
            kinds=kinds,
            limit=limit,
        )

    def search_turns(
        self,
        query: str,
        *,
        user_id: str | None,
        conversation_id: str | None = None,
        limit: int = 10,
        scored: int = 1000,
        floor: float = 0.0,
        include_archived: bool = False,
    ) -> tuple[list[KeywordHit], dict[tuple[str, int], float]]:
        """The best ``limit`` turns by keyword, and the scores of the best ``scored``.

        The turns :meth:`search` finds (same arguments), from one search that also gives
        the keyword score of many more turns by (conversation, turn number), without
        reading them; past the best ``limit``, only those scoring at least ``floor`` times
        the best (see :func:`.search.keyword_turns`).
        """
        return self._run(
            keyword_turns,
            query,
            user_id=user_id,
            conversation_id=conversation_id,
            include_archived=include_archived,
            limit=limit,
            scored=scored,
            floor=floor,
        )

    def common_words(
        self,
        query: str,
        *,
        user_id: str,
        conversation_id: str | None = None,
        share: float = 0.3,
        min_rows: int = 50,
    ) -> set[str]:
        """The query's words found in at least ``share`` of the scope's turns.

        The scope is the user's turns, or one conversation's; counted in its recent turns
        (:class:`.term_stats.ScopeStats`, refreshed once a minute).
        """
        words = query_words(query)
        if not words:
            return set()
        return self._scope_stats.common(
            self.database,
            words,
            user_id=user_id,
            conversation_id=_scoped_key(user_id, conversation_id),
            share=share,
            min_rows=min_rows,
        )
