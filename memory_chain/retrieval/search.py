"""The one retrieval every path uses: candidates from tiers 2 and 3, fused (:mod:`.fusion`).

:class:`MemorySearch` finds the memory items for a query in four steps:

1. **Keyword** (tier 2): the best ``keyword_k`` turns and ``summary_k`` summaries by BM25.
2. **Semantic** (tier 3): the query is embedded once; the ``semantic_k`` most similar turns,
   and for each dated time window the query names (:mod:`.timeframes`) the ``window_k``
   most similar turns inside it.
3. **Neighbours** (:mod:`.neighbours`): a question's answer is the turn after it, so the
   turn after each question found is a candidate too; one search restricted to point ids
   then gives the exact cosine of every candidate that semantic search did not rank, and of
   the turn before each candidate (:func:`.fusion.score_candidates` credits an answer with
   its question's cosine).
4. **Fusion** (:func:`.fusion.rank`): one score per item, the best ``limit`` returned.

The depths are :class:`~.settings.RetrievalSettings`; each search takes its own mode and
limit, and no list of turn candidates is shorter than its ``limit``
(:meth:`~.settings.RetrievalSettings.for_call`).

The chat context (:meth:`MemoryManager.retrieve <memory_chain.manager.MemoryManager.retrieve>`),
the search endpoint, the LangServe retriever and the LoCoMo evaluation all call
:meth:`MemorySearch.find`. A tier that fails is skipped and named in ``degraded``; the other
one still answers.

Example:
    >>> search = MemorySearch(store, tier3)  # doctest: +SKIP
    >>> found = search.find("when do we fly?", user_id="ana", limit=5)  # doctest: +SKIP
    >>> found.items[0].content, found.items[0].sources  # doctest: +SKIP
    ('We fly on 3 May', ('tier2-turns', 'tier3'))
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from memory_chain.errors import MemoryChainError
from memory_chain.retrieval.candidates import (
    Candidates,
    KnownTurns,
    Pool,
    Scope,
    TurnKey,
    dense_query,
    keyword_item,
    keyword_neighbours,
    vector_item,
)
from memory_chain.retrieval.neighbours import KeywordSide, complete
from memory_chain.retrieval.settings import RetrievalMode, RetrievalSettings
from memory_chain.retrieval.timeframes import TimeWindow, asks_when, time_windows
from memory_chain.schemas import MemoryItem, utcnow
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.lifecycle import ACTIVE, WITH_ARCHIVED
from memory_chain.tiers.vectors.index import VectorHit
from memory_chain.tiers.vectors.tags import turn_tags
from memory_chain.tiers.vectors.tier import Tier3

_T = TypeVar("_T")


@dataclass(frozen=True)
class Found:
    """Memory items for a query, best first, what was degraded, and the query's vector.

    ``vector`` is the query as semantic search embedded it (``None`` when it did not run),
    for callers that rank more things by it (the user's facts).
    """

    items: list[MemoryItem]
    degraded: list[str]
    vector: list[float] | None = None


@runtime_checkable
class Finder(Protocol):
    """What finds memory items for a query.

    :class:`MemorySearch`, or the memory manager (the same search, with the user's retired
    facts applied to what it recalls).
    """

    def find(
        self,
        query: str,
        *,
        user_id: str,
        conversation_id: str | None = None,
        limit: int,
        include_archived: bool = False,
        tags: Collection[str] | None = None,
        mode: RetrievalMode | None = None,
    ) -> Found:
        """The best ``limit`` items for ``query`` among the user's memories."""
        ...


class MemorySearch:
    """Finds memory items in tiers 2 and 3 and fuses them.

    Args:
        store: Tier 2 (keyword search).
        tier3: Tier 3 (semantic search), or ``None``.
        settings: Depths, mode and fusion weights: the defaults of each search, which takes
            its own mode and limit (:meth:`RetrievalSettings.for_call`). Replacing them
            (a frozen value) affects the searches that start afterwards.
    """

    def __init__(
        self, store: SQLStore, tier3: Tier3 | None, settings: RetrievalSettings | None = None
    ) -> None:
        self.store = store
        self.tier3 = tier3
        self.settings = settings or RetrievalSettings()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    def find(
        self,
        query: str,
        *,
        user_id: str,
        conversation_id: str | None = None,
        limit: int,
        exclude: Collection[TurnKey] = (),
        now: datetime | None = None,
        include_archived: bool = False,
        tags: Collection[str] | None = None,
        mode: RetrievalMode | None = None,
    ) -> Found:
        """The best ``limit`` items for ``query`` among the user's memories.

        Args:
            query: The question or message.
            user_id: Whose memories (every search is scoped to one user).
            conversation_id: Only this conversation (``None``: all of the user's).
            limit: Items to return.
            exclude: ``(conversation_id, turn_number)`` of turns to leave out (the recent
                turns a chat already shows).
            now: When relative time expressions ("last week") count from (default: now).
            include_archived: Search archived conversations too (a conversation named by
                ``conversation_id`` is searched archived or not). Purged conversations are
                never found, even while tier 3 still holds their points.
            tags: Only items with any of these tags (tier-3 points carry them; other items
                get them from their text by the same rules).
            mode: ``"hybrid"``, ``"dense"`` or ``"keyword"`` for this search (``None``: the
                settings' mode).

        Returns:
            The items, best first, each with its fused score and sources, and what failed:
            ``limit`` items whenever the user's memory (in scope) holds that many.

        Raises:
            InvalidInputError: On an unknown mode.
        """
        settings = self.settings.for_call(mode=mode, limit=limit)
        found = self._gather(
            query,
            settings,
            Scope(user_id, conversation_id, include_archived, _tags(tags)),
            exclude=exclude,
            now=now,
        )
        return Found(found.rank(settings.weights, limit), found.degraded, found.vector)

    def gather(
        self,
        query: str,
        *,
        user_id: str,
        conversation_id: str | None = None,
        exclude: Collection[TurnKey] = (),
        now: datetime | None = None,
        include_archived: bool = False,
        tags: Collection[str] | None = None,
        mode: RetrievalMode | None = None,
        limit: int | None = None,
    ) -> Candidates:
        """Every candidate the sources find for ``query``, before fusion.

        Takes the arguments of :meth:`find`; :meth:`Candidates.rank` ranks the result under
        any weights (the cross-validation of the weights gathers once per question). Without
        a ``limit`` the candidate lists are as deep as the settings say.
        """
        return self._gather(
            query,
            self.settings.for_call(mode=mode, limit=limit),
            Scope(user_id, conversation_id, include_archived, _tags(tags)),
            exclude=exclude,
            now=now,
        )

    def _gather(
        self,
        query: str,
        settings: RetrievalSettings,
        scope: Scope,
        *,
        exclude: Collection[TurnKey],
        now: datetime | None,
    ) -> Candidates:
        pool = Pool(exclude)
        found = Candidates(
            pool.items,
            time_windows(query, now=now or utcnow()),
            keyword=False,
            semantic=False,
            asks_when=asks_when(query),
        )
        tier3 = self.tier3 if settings.mode != "keyword" and query.strip() else None
        keyword: Future[KeywordSide] | None = None
        if settings.mode != "dense":
            # Keyword search, and reading its hits' neighbours from tier 3, run in a worker
            # thread while the query is embedded (SQLite, the vector engine and the embedding
            # runtime release the GIL): on an idle machine they then cost nothing.
            keyword = self._submit(
                self._keyword_side,
                query,
                scope,
                tier3,
                settings,
                parallel=settings.parallel and tier3 is not None,
            )
        dense: list[VectorHit] | None = None
        vector: list[float] | None = None
        if tier3 is not None:
            try:
                common = self._common_words(query, scope, settings)
                vector = tier3.embed_query(dense_query(query, common))
                dense = self._dense_hits(tier3, vector, scope, found.windows, settings)
            except MemoryChainError as exc:
                found.degraded.append(f"tier3 semantic search: {exc}")
        side = KeywordSide([], {}, KnownTurns())
        if keyword is not None:
            try:
                side = keyword.result()
                for found_hit in side.hits:
                    source = "tier2-turns" if found_hit.kind == "turn" else "tier2-summaries"
                    pool.add(keyword_item(found_hit), source, keyword=found_hit.score)
                found.keyword = True
            except MemoryChainError as exc:
                found.degraded.append(f"tier2 keyword search: {exc}")
        if tier3 is not None and vector is not None and dense is not None:
            for hit in dense:
                pool.add(vector_item(hit), "tier3", cosine=hit.score)
            try:
                complete(tier3, vector, scope.user_id, pool, side)
                found.semantic = True
            except MemoryChainError as exc:
                found.degraded.append(f"tier3 semantic search: {exc}")
            found.vector = vector
        self._keep_visible(pool, scope, found.degraded)
        return found

    def _keep_visible(self, pool: Pool, scope: Scope, degraded: list[str]) -> None:
        """Drop items of purged or (unless asked for) archived conversations, and untagged ones.

        With tags asked for, an item must have one of them. Tier 3 is an index updated after
        tier 2 (a purge's points are deleted by the backfill, later if the vector store is
        down): tier 2's rows are the authority.
        """
        named = {c.item.conversation_id for c in pool.items}
        if not named:
            return
        wanted = scope.include_archived or scope.conversation_id is not None
        try:
            visible = self.store.visible_conversations(
                scope.user_id, named, statuses=WITH_ARCHIVED if wanted else ACTIVE
            )
        except MemoryChainError as exc:
            visible = set()  # unverifiable: show nothing rather than something purged
            degraded.append(f"tier2 conversation check: {exc}")
        tags = set(scope.tags) if scope.tags is not None else None
        pool.items[:] = [
            c
            for c in pool.items
            if c.item.conversation_id in visible
            and (tags is None or tags & set(turn_tags(c.item.role or "", c.item.content)))
        ]

    def _submit(self, work: Callable[..., _T], *args: Any, parallel: bool) -> Future[_T]:
        """``work(*args)`` in a worker thread (``parallel``), else now, as a future."""
        if parallel:
            with self._executor_lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(4, thread_name_prefix="memory-search")
                return self._executor.submit(work, *args)
        done: Future[_T] = Future()
        try:
            done.set_result(work(*args))
        except MemoryChainError as exc:
            done.set_exception(exc)
        return done

    def close(self) -> None:
        """Stop the worker threads (started on first use); idempotent."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _keyword_side(
        self, query: str, scope: Scope, tier3: Tier3 | None, settings: RetrievalSettings
    ) -> KeywordSide:
        """The keyword hits and scores, and the turns around them read from ``tier3``."""
        user_id, conversation_id = scope.user_id, scope.conversation_id
        # Alone (keyword mode, or no tier 3), keyword search fills the whole list itself.
        depth = settings.keyword_k if tier3 is not None else settings.keyword_alone_k
        turns, scores = self.store.search_turns(
            query,
            user_id=user_id,
            conversation_id=conversation_id,
            limit=depth,
            scored=settings.keyword_scored if tier3 is not None else 0,
            floor=settings.keyword_floor,
            include_archived=scope.include_archived,
        )
        summaries = self.store.search(
            query,
            user_id=user_id,
            conversation_id=conversation_id,
            kinds=("summary",),
            limit=settings.summary_k,
            include_archived=scope.include_archived,
        )
        side = KeywordSide(turns + summaries, scores, KnownTurns())
        if tier3 is not None:
            # A failure here is reported by semantic search, which needs tier 3 too.
            with contextlib.suppress(MemoryChainError):
                side.known.read(tier3, scope.user_id, keyword_neighbours(side.hits))
        return side

    @staticmethod
    def _dense_hits(
        tier3: Tier3,
        vector: list[float],
        scope: Scope,
        windows: Sequence[TimeWindow],
        settings: RetrievalSettings,
    ) -> list[VectorHit]:
        """The most similar turns, and the most similar in each dated window of the query."""
        hits = tier3.search(vector, scope.where(), settings.semantic_k)
        for window in windows:
            bounds = window.bounds(after=settings.weights.time_slack)
            if bounds is not None:
                inside = scope.where(since=bounds[0], until=bounds[1])
                hits.extend(tier3.search(vector, inside, settings.window_k))
        return hits

    def _common_words(self, query: str, scope: Scope, settings: RetrievalSettings) -> set[str]:
        try:
            return self.store.common_words(
                query,
                user_id=scope.user_id,
                conversation_id=scope.conversation_id,
                share=settings.common_share,
                min_rows=settings.common_min_rows,
            )
        except MemoryChainError:  # tier 2 down: embed the whole query
            return set()


def _tags(tags: Collection[str] | None) -> tuple[str, ...] | None:
    return tuple(tags) if tags is not None else None


__all__ = [
    "Finder",
    "Found",
    "KeywordSide",
    "MemorySearch",
    "RetrievalMode",
    "RetrievalSettings",
]
