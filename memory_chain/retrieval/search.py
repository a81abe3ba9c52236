"""The one retrieval every path uses: candidates from tiers 2 and 3, fused (:mod:`.fusion`).

:class:`MemorySearch` finds the memory items for a query in four steps:

1. **Keyword** (tier 2): the best ``keyword_k`` turns and ``summary_k`` summaries by BM25.
2. **Semantic** (tier 3): the query is embedded once; the ``semantic_k`` most similar turns,
   and for each dated time window the query names (:mod:`.timeframes`) the ``window_k``
   most similar turns inside it.
3. **Neighbours**: a question's answer is the turn after it, so the turn after each question
   found is a candidate too; one search restricted to point ids then gives the exact cosine
   of every candidate that semantic search did not rank, and of the turn before each
   candidate (:func:`.fusion.score_candidates` credits an answer with its question's cosine).
4. **Fusion** (:func:`.fusion.rank`): one score per item, the best ``limit`` returned.

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

import re
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from memory_chain.errors import MemoryChainError
from memory_chain.retrieval.fusion import Candidate, FusionWeights, is_question, item_key, rank
from memory_chain.retrieval.timeframes import TimeWindow, time_windows
from memory_chain.schemas import KeywordHit, MemoryItem, utcnow
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.vectors.index import VectorFilter, VectorHit, point_id
from memory_chain.tiers.vectors.tier import Tier3

RetrievalMode = Literal["hybrid", "dense", "keyword"]
TurnKey = tuple[str, int]


@dataclass(frozen=True)
class RetrievalSettings:
    """How memory is searched.

    Attributes:
        keyword_k: Keyword candidates (turns); deep lists matter for score fusion, and BM25
            scores every match anyway.
        summary_k: Keyword candidates among range summaries.
        semantic_k: Semantic candidates.
        window_k: Semantic candidates inside each dated time window of the query.
        common_share: Query words found in at least this share of the searched turns are
            left out of the query that is embedded (see :func:`dense_query`).
        common_min_rows: Only scopes of at least this many turns have common words.
        facts_k: Remembered facts (chat context only).
        max_items: Items in a chat's memory context.
        scope: Chat context from the ``"user"``'s conversations or only the
            ``"conversation"``.
        mode: ``"hybrid"`` fuses keyword and semantic search; ``"keyword"`` and ``"dense"``
            use one of them.
        weights: The fusion's numbers.
        parallel: Run keyword search in a worker thread while the query is embedded.
    """

    keyword_k: int = 100
    summary_k: int = 5
    semantic_k: int = 50
    window_k: int = 20
    common_share: float = 0.3
    common_min_rows: int = 50
    facts_k: int = 3
    max_items: int = 8
    scope: Literal["user", "conversation"] = "user"
    mode: RetrievalMode = "hybrid"
    weights: FusionWeights = field(default_factory=FusionWeights)
    parallel: bool = True


@dataclass
class Candidates:
    """What the sources found for one query, before fusion (see :meth:`MemorySearch.gather`).

    Attributes:
        items: The candidates, keyword hits first.
        windows: The time windows the query names.
        keyword: Whether keyword search answered.
        semantic: Whether semantic search answered.
        degraded: What failed, in words.
    """

    items: list[Candidate]
    windows: list[TimeWindow]
    keyword: bool
    semantic: bool
    degraded: list[str] = field(default_factory=list)

    def rank(self, weights: FusionWeights, limit: int) -> list[MemoryItem]:
        """The best ``limit`` items under ``weights``."""
        return rank(
            self.items,
            weights=weights,
            limit=limit,
            windows=self.windows,
            keyword=self.keyword,
            semantic=self.semantic,
        )


@dataclass(frozen=True)
class Found:
    """Memory items for a query, best first, and what was degraded."""

    items: list[MemoryItem]
    degraded: list[str]


_WORD = re.compile(r"\w+", re.UNICODE)


def dense_query(query: str, common: Collection[str]) -> str:
    """``query`` without the words in ``common`` (lower-case), for semantic search.

    An embedding cannot discount a word the way BM25's IDF does: a word found in most of the
    searched turns (a name that opens every message, a topic the user always talks about)
    makes every turn that mentions it look similar. Leaving such words out lets the words
    that tell the turns apart decide. The whole query when nothing would be left.
    """
    if not common:
        return query
    kept = _WORD.sub(lambda m: "" if m.group(0).lower() in common else m.group(0), query)
    kept = " ".join(kept.split())
    return kept if _WORD.search(kept) else query


def keyword_item(hit: KeywordHit) -> MemoryItem:
    """A tier-2 keyword hit as a memory item (score set by fusion)."""
    return MemoryItem(
        tier="tier2",
        kind=hit.kind,
        conversation_id=hit.conversation_id,
        content=hit.text,
        timestamp=hit.timestamp,
        score=hit.score,
        turn_number=hit.turn_number,
        role=hit.role,
        turn_range=hit.turn_range,
    )


def vector_item(hit: VectorHit, *, fact: bool = False) -> MemoryItem:
    """A tier-3 hit (a turn, or a remembered fact) as a memory item."""
    payload = hit.payload
    return MemoryItem(
        tier="facts" if fact else "tier3",
        kind="fact" if fact else "turn",
        conversation_id=payload.conversation_id,
        content=payload.content,
        timestamp=payload.timestamp,
        score=hit.score,
        turn_number=payload.turn_number,
        role=payload.role,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class _Scope:
    user_id: str
    conversation_id: str | None

    def where(self, **conditions: Any) -> VectorFilter:
        return VectorFilter(
            user_id=self.user_id, conversation_id=self.conversation_id, **conditions
        )


class _Pool:
    """The candidates of one query, one per item, in the order they were first found."""

    def __init__(self, exclude: Collection[TurnKey]) -> None:
        self.items: list[Candidate] = []
        self._by_key: dict[tuple[Any, ...], Candidate] = {}
        self._excluded = {("turn", conversation, turn) for conversation, turn in exclude}

    def add(
        self,
        item: MemoryItem,
        source: str,
        *,
        keyword: float | None = None,
        cosine: float | None = None,
    ) -> None:
        key = item_key(item)
        if key in self._excluded:
            return
        candidate = self._by_key.get(key)
        if candidate is None:
            candidate = self._by_key[key] = Candidate(item)
            self.items.append(candidate)
        if source not in candidate.sources:
            candidate.sources.append(source)
        if keyword is not None:
            candidate.keyword = keyword
        if cosine is not None and candidate.cosine is None:
            candidate.cosine = cosine

    def turns(self) -> list[Candidate]:
        return [c for c in self.items if c.item.kind == "turn" and c.item.turn_number]

    def turn(self, conversation_id: str, number: int) -> Candidate | None:
        return self._by_key.get(("turn", conversation_id, number))


def _turn_of(candidate: Candidate) -> TurnKey:
    number = candidate.item.turn_number
    assert number is not None
    return candidate.item.conversation_id, number


def _wanted(pool: _Pool) -> set[TurnKey]:
    """Turns whose cosine fusion needs and semantic search did not give."""
    wanted: set[TurnKey] = set()
    for candidate in pool.turns():
        conversation, number = _turn_of(candidate)
        if candidate.cosine is None:
            wanted.add((conversation, number))
        if number > 1 and pool.turn(conversation, number - 1) is None:
            wanted.add((conversation, number - 1))
        if is_question(candidate.item.content) and pool.turn(conversation, number + 1) is None:
            wanted.add((conversation, number + 1))
    return wanted


def _question_before(
    candidate: Candidate, pool: _Pool, fetched: dict[TurnKey, VectorHit]
) -> float | None:
    """The cosine of the turn before ``candidate`` when that turn is a question."""
    conversation, number = _turn_of(candidate)
    before = pool.turn(conversation, number - 1)
    if before is not None and before.cosine is not None:
        text, cosine = before.item.content, before.cosine
    elif (hit := fetched.get((conversation, number - 1))) is not None:
        text, cosine = hit.payload.content, hit.score
    else:
        return None
    return cosine if is_question(text) else None


class MemorySearch:
    """Finds memory items in tiers 2 and 3 and fuses them.

    Args:
        store: Tier 2 (keyword search).
        tier3: Tier 3 (semantic search, facts), or ``None``.
        settings: Depths, mode and fusion weights.
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
        facts: bool = False,
        now: datetime | None = None,
    ) -> Found:
        """The best ``limit`` items for ``query`` among the user's memories.

        Args:
            query: The question or message.
            user_id: Whose memories (every search is scoped to one user).
            conversation_id: Only this conversation (``None``: all of the user's).
            limit: Items to return.
            exclude: ``(conversation_id, turn_number)`` of turns to leave out (the recent
                turns a chat already shows).
            facts: Add the user's remembered facts as candidates.
            now: When relative time expressions ("last week") count from (default: now).

        Returns:
            The items, best first, each with its fused score and sources, and what failed.
        """
        found = self.gather(
            query,
            user_id=user_id,
            conversation_id=conversation_id,
            exclude=exclude,
            facts=facts,
            now=now,
        )
        return Found(found.rank(self.settings.weights, limit), found.degraded)

    def gather(
        self,
        query: str,
        *,
        user_id: str,
        conversation_id: str | None = None,
        exclude: Collection[TurnKey] = (),
        facts: bool = False,
        now: datetime | None = None,
    ) -> Candidates:
        """Every candidate the sources find for ``query``, before fusion.

        Takes the arguments of :meth:`find`; :meth:`Candidates.rank` ranks the result under
        any weights (the cross-validation of the weights gathers once per question).
        """
        settings = self.settings
        scope = _Scope(user_id, conversation_id)
        pool = _Pool(exclude)
        found = Candidates(
            pool.items, time_windows(query, now=now or utcnow()), keyword=False, semantic=False
        )
        tier3 = self.tier3 if settings.mode != "keyword" and query.strip() else None
        keyword: Future[list[KeywordHit]] | None = None
        if settings.mode != "dense":
            # Keyword search runs in a worker thread while the query is embedded (SQLite and
            # torch both release the GIL): on an idle machine it then costs nothing.
            keyword = self._submit(self._keyword_hits, query, scope, parallel=tier3 is not None)
        dense: list[VectorHit] | None = None
        vector: list[float] | None = None
        if tier3 is not None:
            try:
                vector = tier3.embed_query(dense_query(query, self._common_words(query, scope)))
                dense = self._dense_hits(tier3, vector, scope, found.windows)
            except MemoryChainError as exc:
                found.degraded.append(f"tier3 semantic search: {exc}")
        if keyword is not None:
            try:
                for found_hit in keyword.result():
                    source = "tier2-turns" if found_hit.kind == "turn" else "tier2-summaries"
                    pool.add(keyword_item(found_hit), source, keyword=found_hit.score)
                found.keyword = True
            except MemoryChainError as exc:
                found.degraded.append(f"tier2 keyword search: {exc}")
        if tier3 is not None and vector is not None and dense is not None:
            for hit in dense:
                pool.add(vector_item(hit), "tier3", cosine=hit.score)
            try:
                self._neighbours(tier3, vector, scope.user_id, pool)
                found.semantic = True
            except MemoryChainError as exc:
                found.degraded.append(f"tier3 semantic search: {exc}")
            if facts and found.semantic:
                self._facts(tier3, vector, user_id, pool, found.degraded)
        return found

    def _submit(
        self, work: Callable[..., list[KeywordHit]], *args: Any, parallel: bool
    ) -> Future[list[KeywordHit]]:
        """``work(*args)`` in a worker thread (``parallel``), else now, as a future."""
        if parallel and self.settings.parallel:
            with self._executor_lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(4, thread_name_prefix="memory-search")
                return self._executor.submit(work, *args)
        done: Future[list[KeywordHit]] = Future()
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

    def _keyword_hits(self, query: str, scope: _Scope) -> list[KeywordHit]:
        """The best turns and summaries by BM25, turns first."""
        hits = self.store.search(
            query,
            user_id=scope.user_id,
            conversation_id=scope.conversation_id,
            limit=self.settings.keyword_k,
        )
        summaries = [hit for hit in hits if hit.kind == "summary"]
        return [hit for hit in hits if hit.kind == "turn"] + summaries[: self.settings.summary_k]

    def _dense_hits(
        self, tier3: Tier3, vector: list[float], scope: _Scope, windows: Sequence[TimeWindow]
    ) -> list[VectorHit]:
        """The most similar turns, and the most similar in each dated window of the query."""
        settings = self.settings
        hits = tier3.search(vector, scope.where(), settings.semantic_k)
        for window in windows:
            bounds = window.bounds(after=settings.weights.time_slack)
            if bounds is not None:
                inside = scope.where(since=bounds[0], until=bounds[1])
                hits.extend(tier3.search(vector, inside, settings.window_k))
        return hits

    def _common_words(self, query: str, scope: _Scope) -> set[str]:
        try:
            return self.store.common_words(
                query,
                user_id=scope.user_id,
                conversation_id=scope.conversation_id,
                share=self.settings.common_share,
                min_rows=self.settings.common_min_rows,
            )
        except MemoryChainError:  # tier 2 down: embed the whole query
            return set()

    @staticmethod
    def _neighbours(tier3: Tier3, vector: list[float], user_id: str, pool: _Pool) -> None:
        """One search by point id for the cosines fusion still needs.

        Those of candidates semantic search did not rank, of the turn before each candidate
        (an answer is credited with its question's cosine), and of the turn after each
        question (a candidate of its own).
        """
        wanted = _wanted(pool)
        fetched: dict[TurnKey, VectorHit] = {}
        if wanted:
            ids = tuple(point_id(conversation, number) for conversation, number in wanted)
            for hit in tier3.search(vector, VectorFilter(user_id=user_id, ids=ids), len(ids)):
                fetched[(hit.payload.conversation_id, hit.payload.turn_number)] = hit
        for candidate in pool.turns():
            key = _turn_of(candidate)
            if candidate.cosine is None and key in fetched:
                candidate.cosine = fetched[key].score
            answer = fetched.get((key[0], key[1] + 1))
            if answer is not None and is_question(candidate.item.content):
                pool.add(vector_item(answer), "tier3", cosine=answer.score)
        for candidate in pool.turns():
            candidate.question_before = _question_before(candidate, pool, fetched)

    def _facts(
        self, tier3: Tier3, vector: list[float], user_id: str, pool: _Pool, degraded: list[str]
    ) -> None:
        try:
            hits = tier3.search_facts(user_id, vector, self.settings.facts_k)
        except MemoryChainError as exc:
            degraded.append(f"user facts: {exc}")
            return
        for hit in hits:
            pool.add(vector_item(hit, fact=True), "facts", cosine=hit.score)
