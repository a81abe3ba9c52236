"""The memory manager: one entry point that coordinates the three tiers.

Writes go SQL first (the source of truth, with the turn queued for tier 3 in the same
transaction), then tier 1; a user's request to remember or forget something is filed in the
user's facts (:mod:`memory_chain.facts`); then the backfill is woken and consolidation
triggers are checked (consolidation itself runs in the background). Reads build one
:class:`MemoryContext`: tier-1 recent turns, the tier-2 running summary, the items
:class:`MemorySearch <memory_chain.retrieval.search.MemorySearch>` finds (tier-2 keyword hits
and tier-3 semantic hits, fused by score, deduplicated by (conversation, turn)), with turns
already in the recent window left out, and the user's current facts, most relevant first.
Every read path (chat, search endpoint, LangServe retriever, evaluation) goes through
:meth:`MemoryManager.find`.

:class:`MemoryManager` is one object over one set of stores; its paths live in a module
each: the write path (:mod:`memory_chain.manager_writes`), the read path
(:mod:`memory_chain.manager_recall`), archive, purge, export and close
(:mod:`memory_chain.manager_lifecycle`). This module holds the rest: tier 1's working memory
(checked against SQL), the user's facts and conversations as the API shows them, and the
composed chat history.

Example:
    >>> manager = MemoryManager(store, TurnBuffer(), tier3=tier3)  # doctest: +SKIP
    >>> manager.add_turns("trip", "ana", [HumanMessage("We fly on 3 May")])  # doctest: +SKIP
    >>> manager.retrieve("trip", "ana", "when do we fly?").items[0].content  # doctest: +SKIP
    'We fly on 3 May'
    >>> manager.find("when do we fly?", user_id="ana", limit=5, mode="keyword")
    ... # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory_chain.facts.model import Fact, FactDraft
from memory_chain.facts.rules import FactChange
from memory_chain.history import MemoryChatMessageHistory
from memory_chain.manager_lifecycle import Lifecycle, UserExport
from memory_chain.manager_recall import Recall
from memory_chain.manager_writes import TurnListener, TurnWrites
from memory_chain.retrieval.search import MemorySearch, RetrievalSettings
from memory_chain.schemas import (
    ConversationInfo,
    ConversationStatus,
    Summary,
    Turn,
    validate_id,
)
from memory_chain.tiers.buffer import CachedSummary, TurnBuffer, load_into
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.progress import conversation_state, summarized_through
from memory_chain.tiers.vectors.tier import Tier3
from memory_chain.tokens import TokenCounter

if TYPE_CHECKING:
    from pathlib import Path

    from memory_chain.imports import HistoryReport


class MemoryManager(TurnWrites, Recall, Lifecycle):
    """Coordinates tier 1, tier 2 and tier 3.

    Args:
        store: Tier 2 (created with ``queue_embeddings=True`` when tier 3 is on).
        buffer: Tier 1.
        tier3: Semantic memory, or ``None`` to run on tiers 1-2 only.
        counter: Counts tokens of messages the model did not report usage for.
        retrieval: How much memory each request gets (the defaults of each search).
        keep_after_consolidation: Turns consolidation leaves in tier 1 (rebuilt on a miss).
        facts: The users' facts (default: kept in ``store``'s database, without vectors).
        exporter: Writes a user's export lines, for :meth:`export`
            (:func:`memory_chain.transfer.user_export`; ``None``: :meth:`export` refuses).
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
        facts: FactStore | None = None,
        exporter: UserExport | None = None,
    ) -> None:
        self.store = store
        self.fact_store = facts if facts is not None else FactStore(store.database)
        self.keep_after_consolidation = keep_after_consolidation
        self.buffer = buffer
        self.tier3 = tier3
        self.counter = counter or TokenCounter()
        self.memory_search = MemorySearch(store, tier3, retrieval)
        self.listeners: list[TurnListener] = []
        self.exporter = exporter

    def import_history(self, path: Path, **options: Any) -> HistoryReport:
        """Import a chat export (Open WebUI, ChatGPT, plain JSON Lines / CSV) as history.

        See :func:`memory_chain.imports.import_history` for the options (``format``,
        ``user``, ``namespace``, ``default_user``, ``dry_run``, ``progress``).
        """
        from memory_chain.imports import import_history

        return import_history(self, path, **options)

    # -- the user's facts ------------------------------------------------------------------

    def facts(
        self,
        user_id: str,
        *,
        include: Sequence[str] = (),
        conversation_id: str | None = None,
        limit: int = 100,
    ) -> list[Fact]:
        """The user's current facts, newest first, and the past ones ``include`` names.

        Args:
            user_id: Whose.
            include: ``"superseded"`` and/or ``"dismissed"`` facts too.
            conversation_id: Only those learnt in this conversation.
            limit: At most this many.
        """
        validate_id(user_id, "user id")
        statuses = ("current", *(s for s in include if s != "current"))
        return self.fact_store.of_user(
            user_id, statuses=statuses, conversation_id=conversation_id, limit=limit
        )

    def fact(self, user_id: str, fact_id: str) -> Fact | None:
        """One of the user's facts (any status), or ``None``."""
        return self.fact_store.get(user_id, fact_id)

    def add_fact(self, user_id: str, draft: FactDraft) -> FactChange:
        """Add a fact by hand, reconciled with the user's current ones."""
        return self.fact_store.add(user_id, draft)

    def edit_fact(
        self, user_id: str, fact_id: str, *, text: str | None = None, kind: str | None = None
    ) -> Fact | None:
        """Edit a current fact (its old text stays in the history); ``None`` if none."""
        return self.fact_store.edit(user_id, fact_id, text=text, kind=kind)

    def dismiss_fact(self, user_id: str, fact_id: str) -> Fact | None:
        """Dismiss one of the user's facts (kept in the history); ``None`` if none."""
        return self.fact_store.dismiss(user_id, fact_id)

    # -- conversations: tier 2's rows, as the API shows them ---------------------------------

    def conversation(self, conversation_id: str, user_id: str) -> ConversationInfo | None:
        """The user's conversation of this id, or ``None`` if the user has none."""
        return self.store.get_conversation(conversation_id, user_id=user_id)

    def conversations(
        self,
        user_id: str,
        *,
        status: ConversationStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[ConversationInfo]:
        """The user's conversations, most recently active first."""
        return self.store.list_conversations(
            user_id=user_id, status=status, limit=limit, offset=offset
        )

    def turns(
        self, conversation_id: str, user_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Turn]:
        """Stored turns numbered after ``after``, oldest first, at most ``limit``."""
        return self.store.get_turns(conversation_id, user_id=user_id, after=after, limit=limit)

    def summaries(self, conversation_id: str, user_id: str) -> list[Summary]:
        """The conversation's range summaries, in turn order."""
        return self.store.get_summaries(conversation_id, user_id=user_id)

    # -- working memory: tier 1, checked against SQL ----------------------------------------

    def working_memory(
        self, conversation_id: str, user_id: str
    ) -> tuple[list[Turn], CachedSummary]:
        """Tier 1's recent turns and the running summary, checked against SQL first.

        Tier 1 is this process's cache; other replicas (or processes) write the same
        conversations. A cached conversation is served only if SQL still has the same number
        of turns and the same last summarized turn (one indexed lookup); otherwise it is
        dropped and rebuilt from SQL. So a context never misses a turn that any replica
        acknowledged before this call began, nor uses a summary older than SQL's.
        """
        self._revalidate(conversation_id, user_id)
        return self._recent(conversation_id, user_id), self._summary(conversation_id, user_id)

    def _revalidate(self, conversation_id: str, user_id: str) -> None:
        """Drop tier 1's copy of a conversation that SQL has moved past."""
        cached = self.buffer.metadata(conversation_id, user_id)
        if cached is None:
            return  # a miss is loaded from SQL anyway
        summary = self.buffer.summary(conversation_id, user_id)
        state = conversation_state(self.store, conversation_id, user_id)
        if (
            state is None
            or state.turn_count != cached.turn_count
            or (summary is not None and summary.through != state.summarized_through)
        ):
            self.buffer.invalidate(conversation_id, user_id=user_id)

    def recent_turns(self, conversation_id: str, user_id: str) -> list[Turn]:
        """Tier 1: the conversation's last turns (checked against SQL, loaded on a miss)."""
        self._revalidate(conversation_id, user_id)
        return self._recent(conversation_id, user_id)

    def _recent(self, conversation_id: str, user_id: str) -> list[Turn]:
        cached = self.buffer.get(conversation_id, user_id)
        if cached is None:
            # Rebuild what tier 1 held: the unsummarized turns, and at least the last
            # `keep_after_consolidation` (consolidation pruned the rest).
            epoch = self.buffer.summary_epoch
            info = self.store.get_conversation(conversation_id, user_id=user_id)
            through = summarized_through(self.store, conversation_id, user_id) if info else 0
            unsummarized = (info.turn_count if info else 0) - through
            limit = max(unsummarized, self.keep_after_consolidation)
            load_into(self.buffer, self.store, conversation_id, user_id, limit=limit)
            if info is not None:
                state = CachedSummary(info.summary, through)
                self.buffer.set_summary(conversation_id, state, user_id=user_id, epoch=epoch)
            cached = self.buffer.get(conversation_id, user_id)
        if cached is None:  # evicted at once by a tiny buffer
            cached = self.store.recent_turns(
                conversation_id, self.buffer.max_turns, user_id=user_id
            )
        return cached

    def summary(self, conversation_id: str, user_id: str) -> CachedSummary:
        """Tier 2's running summary and how far it reaches (cached in tier 1, checked)."""
        self._revalidate(conversation_id, user_id)
        return self._summary(conversation_id, user_id)

    def _summary(self, conversation_id: str, user_id: str) -> CachedSummary:
        cached = self.buffer.summary(conversation_id, user_id)
        if cached is not None:
            return cached
        epoch = self.buffer.summary_epoch
        info = self.store.get_conversation(conversation_id, user_id=user_id)
        if info is None:
            return CachedSummary(None, 0)
        through = summarized_through(self.store, conversation_id, user_id)
        state = CachedSummary(info.summary, through)
        self.buffer.set_summary(conversation_id, state, user_id=user_id, epoch=epoch)
        return state

    def turn_count(self, conversation_id: str, user_id: str) -> int:
        """How many turns the conversation has (tier 1's count when cached, else SQL's)."""
        cached = self.buffer.metadata(conversation_id, user_id)
        if cached is not None:
            return cached.turn_count
        info = self.store.get_conversation(conversation_id, user_id=user_id)
        return info.turn_count if info is not None else 0

    def history(self, conversation_id: str, user_id: str) -> MemoryChatMessageHistory:
        """The composed chat history of a conversation (summary + recent turns)."""
        return MemoryChatMessageHistory(self, conversation_id, user_id=user_id)


__all__ = ["MemoryManager", "TurnListener"]
