"""The memory manager: one entry point that coordinates the three tiers.

Writes go SQL first (the source of truth, with the turn queued for tier 3 in the same
transaction), then tier 1, then the backfill is woken and consolidation triggers are checked
(consolidation itself runs in the background). Reads build one :class:`MemoryContext`: tier-1
recent turns, the tier-2 running summary, tier-2 keyword hits and tier-3 semantic hits (and
the user's remembered facts), fused by reciprocal rank, deduplicated by (conversation, turn),
with turns already in the recent window dropped.

Example:
    >>> manager = MemoryManager(store, TurnBuffer(), tier3=tier3)  # doctest: +SKIP
    >>> manager.add_turns("trip", "ana", [HumanMessage("We fly on 3 May")])  # doctest: +SKIP
    >>> manager.retrieve("trip", "ana", "when do we fly?").items[0].content  # doctest: +SKIP
    'We fly on 3 May'
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables.config import run_in_executor

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.messages import to_message, to_new_turns
from memory_chain.schemas import (
    KeywordHit,
    MemoryContext,
    MemoryItem,
    NewTurn,
    Turn,
    validate_id,
)
from memory_chain.tiers.buffer import CachedSummary, TurnBuffer, load_into
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.progress import summarized_through
from memory_chain.tiers.vectors.index import VectorFilter, VectorHit
from memory_chain.tiers.vectors.tier import Tier3
from memory_chain.tokens import TokenCounter

logger = logging.getLogger(__name__)

#: Reciprocal rank fusion constant: damps the head of each list (the usual 60; 20 fused
#: best on LoCoMo, where the head of each list matters most).
RRF_K = 20

RetrievalMode = Literal["hybrid", "dense", "keyword"]


class TurnListener(Protocol):
    """Told about stored turns (the consolidation service is one)."""

    def on_turns_added(self, conversation_id: str, user_id: str, turns: Sequence[Turn]) -> None:
        """Turns were stored."""
        ...


@dataclass
class RetrievalSettings:
    """How much memory a request gets.

    Attributes:
        keyword_k: Tier-2 keyword candidates per kind (turns, summaries) before fusion.
        semantic_k: Tier-3 semantic candidates before fusion (20 and 20 fused best on LoCoMo:
            deeper lists let middling items found by both outrank the head of one).
        facts_k: Remembered facts.
        max_items: Items kept after fusion.
        scope: Search the ``"user"``'s conversations or only the ``"conversation"``.
        mode: ``"hybrid"`` fuses tier-2 keyword and tier-3 semantic hits; ``"dense"`` and
            ``"keyword"`` use one of them.
        keyword_weight: Weight of tier-2 keyword turn hits in the fusion (semantic hits
            weigh 1; on LoCoMo BM25 with the previous turn's context out-ranks MiniLM).
    """

    keyword_k: int = 20
    semantic_k: int = 20
    facts_k: int = 3
    max_items: int = 8
    scope: str = "user"
    mode: RetrievalMode = "hybrid"
    keyword_weight: float = 1.5


@dataclass
class _Fused:
    item: MemoryItem
    score: float = 0.0
    sources: list[str] = field(default_factory=list)


def _turn_key(conversation_id: str, turn_number: int) -> tuple[str, str, int]:
    return ("turn", conversation_id, turn_number)


def fuse(
    ranked_lists: dict[str, list[MemoryItem]],
    *,
    exclude: set[Any],
    limit: int,
    weights: dict[str, float] | None = None,
) -> list[MemoryItem]:
    """Weighted reciprocal rank fusion of ranked lists, deduplicated by item key.

    Args:
        ranked_lists: Source name → items, best first.
        exclude: Keys to drop (turns already in the recent window).
        limit: Items to keep.
        weights: Source name → weight (1 for sources not named).

    Returns:
        Items by fused score, best first, each listing the sources that found it.
    """
    fused: dict[Any, _Fused] = {}
    for source, items in ranked_lists.items():
        weight = (weights or {}).get(source, 1.0)
        for rank, item in enumerate(items):
            key = item_key(item)
            if key in exclude:
                continue
            entry = fused.setdefault(key, _Fused(item))
            entry.score += weight / (RRF_K + rank + 1)
            entry.sources.append(source)
    best = sorted(fused.values(), key=lambda entry: entry.score, reverse=True)[:limit]
    return [
        MemoryItem(
            tier=entry.item.tier,
            kind=entry.item.kind,
            conversation_id=entry.item.conversation_id,
            content=entry.item.content,
            timestamp=entry.item.timestamp,
            score=entry.score,
            turn_number=entry.item.turn_number,
            role=entry.item.role,
            turn_range=entry.item.turn_range,
            sources=tuple(entry.sources),
        )
        for entry in best
    ]


def item_key(item: MemoryItem) -> tuple[Any, ...]:
    """The identity of an item: turns by (conversation, turn) whichever tier found them."""
    if item.kind == "turn" and item.turn_number is not None:
        return _turn_key(item.conversation_id, item.turn_number)
    if item.kind == "summary" and item.turn_range is not None:
        return ("summary", item.conversation_id, item.turn_range[0])
    return (item.kind, item.conversation_id, item.turn_number, item.content)


def _keyword_item(hit: KeywordHit) -> MemoryItem:
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


def _vector_item(hit: VectorHit, tier: str) -> MemoryItem:
    payload = hit.payload
    return MemoryItem(
        tier="facts" if tier == "facts" else "tier3",
        kind="fact" if tier == "facts" else "turn",
        conversation_id=payload.conversation_id,
        content=payload.content,
        timestamp=payload.timestamp,
        score=hit.score,
        turn_number=payload.turn_number,
        role=payload.role,  # type: ignore[arg-type]
    )


class MemoryManager:
    """Coordinates tier 1, tier 2 and tier 3.

    Args:
        store: Tier 2 (created with ``queue_embeddings=True`` when tier 3 is on).
        buffer: Tier 1.
        tier3: Semantic memory, or ``None`` to run on tiers 1-2 only.
        counter: Counts tokens of messages the model did not report usage for.
        retrieval: How much memory each request gets.
        keep_after_consolidation: Turns consolidation leaves in tier 1 (rebuilt on a miss).
    """

    def __init__(
        self,
        store: SQLStore,
        buffer: TurnBuffer,
        *,
        tier3: Tier3 | None = None,
        counter: TokenCounter | None = None,
        retrieval: RetrievalSettings | None = None,
        keep_after_consolidation: int = 5,
    ) -> None:
        self.store = store
        self.keep_after_consolidation = keep_after_consolidation
        self.buffer = buffer
        self.tier3 = tier3
        self.counter = counter or TokenCounter()
        self.retrieval = retrieval or RetrievalSettings()
        self.listeners: list[TurnListener] = []

    # -- writes -----------------------------------------------------------------------------

    def add_turns(
        self,
        conversation_id: str,
        user_id: str,
        turns: Sequence[BaseMessage] | Sequence[NewTurn],
    ) -> list[Turn]:
        """Store turns: SQL (and the tier-3 queue) first, then tier 1; then wake listeners.

        Raises:
            InvalidInputError: On malformed input (nothing is stored).
            ConversationNotFoundError: If the conversation belongs to another user.
        """
        if all(isinstance(turn, NewTurn) for turn in turns):
            new_turns = [turn for turn in turns if isinstance(turn, NewTurn)]
        else:
            new_turns = to_new_turns([t for t in turns if isinstance(t, BaseMessage)], self.counter)
            if len(new_turns) != len(turns):
                raise InvalidInputError("pass either messages or NewTurn objects, not a mix")
        stored = self.store.append_turns(conversation_id, new_turns, user_id=user_id)
        self.buffer.extend(conversation_id, stored, user_id=user_id)
        for listener in self.listeners:
            try:
                listener.on_turns_added(conversation_id, user_id, stored)
            except Exception:  # a trigger must never fail a stored write
                logger.exception("turn listener failed for %s", conversation_id)
        # Last: the backfill thread competes for the GIL as soon as it wakes.
        if self.tier3 is not None:
            self.tier3.notify()
        return stored

    async def aadd_turns(
        self,
        conversation_id: str,
        user_id: str,
        turns: Sequence[BaseMessage] | Sequence[NewTurn],
    ) -> list[Turn]:
        """Async :meth:`add_turns`."""
        return await run_in_executor(None, self.add_turns, conversation_id, user_id, turns)

    def delete_conversation(self, conversation_id: str, user_id: str) -> bool:
        """Remove a conversation from every tier (rows, cache, points, facts)."""
        deleted = self.store.delete_conversation(conversation_id, user_id=user_id)
        self.buffer.invalidate(conversation_id)
        if deleted and self.tier3 is not None:
            try:
                # Its points and user facts (the indexer files both).
                self.tier3.indexer.forget(user_id=user_id, conversation_id=conversation_id)
            except MemoryChainError as exc:
                # The rows are gone; stray points are filtered out of results by
                # conversation and removed by the next reindex.
                logger.warning("points of %s not removed yet: %s", conversation_id, exc)
        return deleted

    # -- reads ------------------------------------------------------------------------------

    def recent_turns(self, conversation_id: str, user_id: str) -> list[Turn]:
        """Tier 1: the conversation's last turns (loaded from SQL on a miss)."""
        cached = self.buffer.get(conversation_id, user_id)
        if cached is None:
            # Rebuild what tier 1 held: the unsummarized turns, and at least the last
            # `keep_after_consolidation` (consolidation pruned the rest).
            epoch = self.buffer.summary_epoch
            info = self.store.get_conversation(conversation_id, user_id=user_id)
            through = summarized_through(self.store, conversation_id) if info else 0
            unsummarized = (info.turn_count if info else 0) - through
            limit = max(unsummarized, self.keep_after_consolidation)
            load_into(self.buffer, self.store, conversation_id, user_id, limit=limit)
            if info is not None:
                state = CachedSummary(info.summary, through)
                self.buffer.set_summary(conversation_id, state, epoch=epoch)
            cached = self.buffer.get(conversation_id, user_id)
        if cached is None:  # evicted at once by a tiny buffer
            cached = self.store.recent_turns(
                conversation_id, self.buffer.max_turns, user_id=user_id
            )
        return cached

    def summary(self, conversation_id: str, user_id: str) -> CachedSummary:
        """Tier 2's running summary and how far it reaches (cached in tier 1 when possible)."""
        cached = self.buffer.summary(conversation_id, user_id)
        if cached is not None:
            return cached
        epoch = self.buffer.summary_epoch
        info = self.store.get_conversation(conversation_id, user_id=user_id)
        if info is None:
            return CachedSummary(None, 0)
        state = CachedSummary(info.summary, summarized_through(self.store, conversation_id))
        self.buffer.set_summary(conversation_id, state, epoch=epoch)
        return state

    def retrieve(self, conversation_id: str, user_id: str, query: str) -> MemoryContext:
        """Build the memory context of one request.

        The searches run one after the other: on 2 cores a keyword search in a second thread
        slowed the query embedding by more than it saved (benchmarks/bench_chat.py). A tier
        that fails is skipped and named in ``degraded``.
        """
        validate_id(conversation_id)
        validate_id(user_id, "user id")
        settings = self.retrieval
        scoped = conversation_id if settings.scope == "conversation" else None
        keyword = partial(
            self.store.search, query, user_id=user_id, conversation_id=scoped,
            limit=settings.keyword_k,
        )  # fmt: skip
        recent = self.recent_turns(conversation_id, user_id)
        summary = self.summary(conversation_id, user_id).text
        lists, degraded = self._gather(user_id, scoped, query, keyword)
        exclude = {_turn_key(conversation_id, turn.turn_number) for turn in recent}
        return MemoryContext(
            conversation_id=conversation_id,
            user_id=user_id,
            summary=summary,
            recent=tuple(recent),
            items=tuple(
                fuse(lists, exclude=exclude, limit=settings.max_items, weights=self._weights())
            ),
            degraded=tuple(degraded),
        )

    def search(self, conversation_id: str, user_id: str, query: str, *, k: int) -> MemoryContext:
        """Search one conversation (keyword and semantic, fused), recent turns included."""
        validate_id(conversation_id)
        validate_id(user_id, "user id")
        depth = max(k, self.retrieval.keyword_k)
        keyword = partial(
            self.store.search, query, user_id=user_id, conversation_id=conversation_id, limit=depth
        )
        lists, degraded = self._gather(
            user_id, conversation_id, query, keyword, k=max(k, self.retrieval.semantic_k),
            facts=False,
        )  # fmt: skip
        return MemoryContext(
            conversation_id=conversation_id,
            user_id=user_id,
            summary=None,
            recent=(),
            items=tuple(fuse(lists, exclude=set(), limit=k, weights=self._weights())),
            degraded=tuple(degraded),
        )

    def _weights(self) -> dict[str, float]:
        return {"tier2-turns": self.retrieval.keyword_weight}

    def _gather(
        self,
        user_id: str,
        conversation_id: str | None,
        query: str,
        keyword: Callable[[], list[KeywordHit]],
        *,
        k: int | None = None,
        facts: bool = True,
    ) -> tuple[dict[str, list[MemoryItem]], list[str]]:
        degraded: list[str] = []
        lists: dict[str, list[MemoryItem]] = {}
        mode = self.retrieval.mode
        if mode != "keyword":
            semantic, fact_items = self._semantic(user_id, conversation_id, query, degraded, k=k)
            lists["tier3"] = semantic
            if facts:
                lists["facts"] = fact_items
        if mode != "dense":
            try:
                hits = keyword()
                lists["tier2-turns"] = [_keyword_item(h) for h in hits if h.kind == "turn"]
                lists["tier2-summaries"] = [_keyword_item(h) for h in hits if h.kind == "summary"]
            except MemoryChainError as exc:
                degraded.append(f"tier2 keyword search: {exc}")
        return lists, degraded

    async def aretrieve(self, conversation_id: str, user_id: str, query: str) -> MemoryContext:
        """Async :meth:`retrieve` (CPU-bound parts stay off the event loop)."""
        return await run_in_executor(None, self.retrieve, conversation_id, user_id, query)

    def _semantic(
        self,
        user_id: str,
        conversation_id: str | None,
        query: str,
        degraded: list[str],
        *,
        k: int | None = None,
    ) -> tuple[list[MemoryItem], list[MemoryItem]]:
        tier3 = self.tier3
        if tier3 is None or not query.strip():
            return [], []
        try:
            vector = tier3.embeddings.embed_query(query)
            hits = tier3.index.search(
                vector,
                VectorFilter(user_id=user_id, conversation_id=conversation_id),
                k or self.retrieval.semantic_k,
            )
        except MemoryChainError as exc:
            degraded.append(f"tier3 semantic search: {exc}")
            return [], []
        facts: list[MemoryItem] = []
        if tier3.facts is not None:
            try:
                facts = [
                    _vector_item(hit, "facts")
                    for hit in tier3.facts.search(user_id, vector, self.retrieval.facts_k)
                ]
            except MemoryChainError as exc:
                degraded.append(f"user facts: {exc}")
        return [_vector_item(hit, "tier3") for hit in hits], facts

    def history(self, conversation_id: str, user_id: str) -> MemoryChatMessageHistory:
        """The composed chat history of a conversation (summary + recent turns)."""
        return MemoryChatMessageHistory(self, conversation_id, user_id=user_id)

    def close(self) -> None:
        """Nothing to release (kept for symmetry with the other services)."""


class MemoryChatMessageHistory(BaseChatMessageHistory):
    """The composed history: the running summary (as a system message) and recent turns.

    Works with ``RunnableWithMessageHistory`` (pass both ``input_messages_key`` and
    ``history_messages_key``): new messages are stored through the manager, so they reach
    every tier and consolidation triggers.

    Args:
        manager: The memory manager.
        conversation_id: The conversation.
        user_id: Its owner.
    """

    def __init__(self, manager: MemoryManager, conversation_id: str, *, user_id: str) -> None:
        self.manager = manager
        self.conversation_id = validate_id(conversation_id)
        self.user_id = validate_id(user_id, "user id")

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Summary of the conversation so far, then its recent turns."""
        recent = self.manager.recent_turns(self.conversation_id, self.user_id)
        summary = self.manager.summary(self.conversation_id, self.user_id).text
        messages: list[BaseMessage] = []
        if summary:
            messages.append(SystemMessage(f"Summary of the conversation so far: {summary}"))
        messages.extend(to_message(turn) for turn in recent)
        return messages

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages in every tier."""
        self.manager.add_turns(self.conversation_id, self.user_id, list(messages))

    def clear(self) -> None:
        """Delete the conversation from every tier."""
        self.manager.delete_conversation(self.conversation_id, self.user_id)
