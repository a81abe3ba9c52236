"""The memory manager's read path: what memory recalls for a query, and a request's context.

Every door that answers what memory recalls goes through :meth:`Recall.find` (the chat, the
search endpoint, the LangServe retriever, the MCP tools, the LangGraph store, the
evaluation): :class:`~memory_chain.retrieval.search.MemorySearch` over tiers 2 and 3, with
the user's retired facts applied to what it recalls (:mod:`memory_chain.facts.outdated`).
:meth:`Recall.retrieve` builds one request's :class:`MemoryContext`: tier 1's recent turns
and tier 2's running summary, the items found (the recent turns left out) and the user's
current facts, most relevant first.

Each call takes its own options (``mode``, ``now``, ``limit``); the manager's
:attr:`~Recall.retrieval` settings are the defaults, read once per call.

Part of :class:`~memory_chain.manager.MemoryManager`, which holds the stores this reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from memory_chain import metrics
from memory_chain.errors import MemoryChainError
from memory_chain.facts.outdated import mark_outdated, recalled_from
from memory_chain.retrieval.search import Found, MemorySearch
from memory_chain.retrieval.settings import RetrievalMode, RetrievalSettings
from memory_chain.schemas import MemoryContext, MemoryItem, Turn, validate_id
from memory_chain.tiers.buffer import CachedSummary
from memory_chain.tiers.sql.facts import FactStore


class Recall:
    """Searching memory: :meth:`find`, :meth:`retrieve`, :meth:`search`, :meth:`profile`."""

    memory_search: MemorySearch
    fact_store: FactStore

    if TYPE_CHECKING:

        def working_memory(
            self, conversation_id: str, user_id: str
        ) -> tuple[list[Turn], CachedSummary]:
            """Tier 1's recent turns and the running summary (the manager's own)."""
            ...

    @property
    def retrieval(self) -> RetrievalSettings:
        """How memory is searched by default (depths, mode, fusion weights).

        Each search reads them once; a search takes its own ``mode`` (and ``limit``) as
        arguments. Assigning a new value (a frozen :class:`RetrievalSettings`) changes the
        defaults of the searches that start afterwards.
        """
        return self.memory_search.settings

    @retrieval.setter
    def retrieval(self, settings: RetrievalSettings) -> None:
        self.memory_search.settings = settings

    def find(
        self,
        query: str,
        *,
        user_id: str,
        conversation_id: str | None = None,
        limit: int,
        exclude: Sequence[tuple[str, int]] = (),
        now: datetime | None = None,
        include_archived: bool = False,
        tags: Sequence[str] | None = None,
        mode: RetrievalMode | None = None,
    ) -> Found:
        """The retrieval every path uses (:meth:`MemorySearch.find`), ids checked.

        Every door that answers what memory recalls goes through here (the chat, the search
        endpoint, the LangServe retriever, the MCP tools, the LangGraph store, the
        evaluation), so they share one rule for the user's retired facts: a recalled turn
        that stated a fact since superseded is noted as outdated, one that stated a fact the
        user dismissed is left out (:mod:`memory_chain.facts.outdated`). A forgotten thing
        does not come back through the turn it was learnt from, whichever door asks; the
        turn itself stays in its conversation (its turns, the export).

        Args:
            query: The question or message.
            user_id: Whose memories.
            conversation_id: Only this conversation (``None``: all of the user's).
            limit: Items to return (that many whenever memory holds that many).
            exclude: ``(conversation_id, turn_number)`` of turns to leave out.
            now: When relative time expressions ("last week") count from (default: now).
            include_archived: Search archived conversations too.
            tags: Only items with any of these tags.
            mode: ``"hybrid"``, ``"dense"`` or ``"keyword"`` for this call (``None``: the
                :attr:`retrieval` settings' mode).

        Raises:
            InvalidInputError: If an id or the mode is malformed.
        """
        validate_id(user_id, "user id")
        if conversation_id is not None:
            validate_id(conversation_id)
        found = self.memory_search.find(
            query,
            user_id=user_id,
            conversation_id=conversation_id,
            limit=limit,
            exclude=exclude,
            now=now,
            include_archived=include_archived,
            tags=tags,
            mode=mode,
        )
        try:
            retired = self.fact_store.retired(user_id, recalled_from(found.items))
        except MemoryChainError as exc:
            degraded = [*found.degraded, f"retired facts (recalled turns not checked): {exc}"]
            return replace(found, degraded=degraded)
        return replace(found, items=mark_outdated(found.items, retired))

    def retrieve(
        self,
        conversation_id: str,
        user_id: str,
        query: str,
        *,
        working: tuple[list[Turn], CachedSummary] | None = None,
        now: datetime | None = None,
        mode: RetrievalMode | None = None,
    ) -> MemoryContext:
        """Build the memory context of one request.

        Tier 1's recent turns and tier 2's running summary, then :meth:`find` over the
        user's conversations (or this one, by ``retrieval.scope``) with the recent turns left
        out and the user's remembered facts in; a recalled turn that stated a fact since
        superseded is noted as outdated, one that stated a dismissed fact left out
        (:mod:`memory_chain.facts.outdated`). A tier that fails is skipped and named in
        ``degraded``.

        Args:
            conversation_id: The conversation.
            user_id: Its owner.
            query: What to search for (the user's message).
            working: :meth:`working_memory` of this request, when the caller has read it.
            now: When relative time expressions in ``query`` count from (default: now).
            mode: The search's mode for this call (``None``: the settings' mode).
        """
        validate_id(conversation_id)
        validate_id(user_id, "user id")
        settings = self.retrieval
        recent, state = working or self.working_memory(conversation_id, user_id)
        summary = state.text
        found = self.find(
            query,
            user_id=user_id,
            conversation_id=conversation_id if settings.scope == "conversation" else None,
            limit=settings.max_items,
            exclude=[(conversation_id, turn.turn_number) for turn in recent],
            now=now,
            mode=mode,
        )
        degraded = list(found.degraded)
        try:
            facts = self.profile(user_id, found.vector)
        except MemoryChainError as exc:
            facts = ()
            degraded.append(f"user facts: {exc}")
        return MemoryContext(
            conversation_id=conversation_id,
            user_id=user_id,
            summary=summary,
            recent=tuple(recent),
            items=tuple(found.items),
            degraded=tuple(degraded),
            facts=facts,
        )

    def search(self, conversation_id: str, user_id: str, query: str, *, k: int) -> MemoryContext:
        """:meth:`find` within one conversation, recent turns included."""
        found = self.find(query, user_id=user_id, conversation_id=conversation_id, limit=k)
        return MemoryContext(
            conversation_id=conversation_id,
            user_id=user_id,
            summary=None,
            recent=(),
            items=tuple(found.items),
            degraded=tuple(found.degraded),
        )

    def profile(self, user_id: str, vector: Sequence[float] | None) -> tuple[MemoryItem, ...]:
        """The user's current facts as memory items, most relevant to ``vector`` first."""
        with metrics.retrieval_timer("facts"):
            profile = self.fact_store.profile(user_id, vector)
        return tuple(
            MemoryItem(
                tier="facts",
                kind="fact",
                conversation_id=ranked.fact.conversation_id or "",
                content=ranked.fact.text,
                timestamp=ranked.fact.valid_from,
                score=ranked.score if ranked.score is not None else 0.0,
                turn_number=ranked.fact.turns[0] if ranked.fact.turns else None,
                role="user",
                sources=("facts",),
            )
            for ranked in profile
        )


__all__ = ["Recall"]
