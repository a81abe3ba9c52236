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

Example:
    >>> manager = MemoryManager(store, TurnBuffer(), tier3=tier3)  # doctest: +SKIP
    >>> manager.add_turns("trip", "ana", [HumanMessage("We fly on 3 May")])  # doctest: +SKIP
    >>> manager.retrieve("trip", "ana", "when do we fly?").items[0].content  # doctest: +SKIP
    'We fly on 3 May'
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.messages import BaseMessage

from memory_chain import metrics
from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.facts.model import Fact, FactDraft
from memory_chain.facts.outdated import mark_outdated, recalled_from
from memory_chain.facts.rules import FactChange
from memory_chain.history import MemoryChatMessageHistory
from memory_chain.intent import parse_intent
from memory_chain.messages import to_new_turns
from memory_chain.retrieval.search import Found, MemorySearch, RetrievalSettings
from memory_chain.schemas import (
    ConversationInfo,
    ConversationStatus,
    MemoryContext,
    MemoryItem,
    NewTurn,
    Summary,
    Turn,
    validate_id,
    without_empty,
)
from memory_chain.tiers.buffer import CachedSummary, TurnBuffer, load_into
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.progress import conversation_state, summarized_through
from memory_chain.tiers.vectors.tier import Tier3
from memory_chain.tokens import TokenCounter
from memory_chain.transfer.jsonl import export_lines

if TYPE_CHECKING:
    from pathlib import Path

    from memory_chain.imports import HistoryReport

logger = logging.getLogger(__name__)


class TurnListener(Protocol):
    """Told about stored turns (the consolidation service is one)."""

    def on_turns_added(self, conversation_id: str, user_id: str, turns: Sequence[Turn]) -> None:
        """Turns were stored."""
        ...


class MemoryManager:
    """Coordinates tier 1, tier 2 and tier 3.

    Args:
        store: Tier 2 (created with ``queue_embeddings=True`` when tier 3 is on).
        buffer: Tier 1.
        tier3: Semantic memory, or ``None`` to run on tiers 1-2 only.
        counter: Counts tokens of messages the model did not report usage for.
        retrieval: How much memory each request gets.
        keep_after_consolidation: Turns consolidation leaves in tier 1 (rebuilt on a miss).
        facts: The users' facts (default: kept in ``store``'s database, without vectors).
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
    ) -> None:
        self.store = store
        self.fact_store = facts if facts is not None else FactStore(store.database)
        self.keep_after_consolidation = keep_after_consolidation
        self.buffer = buffer
        self.tier3 = tier3
        self.counter = counter or TokenCounter()
        self.memory_search = MemorySearch(store, tier3, retrieval)
        self.listeners: list[TurnListener] = []

    # -- writes -----------------------------------------------------------------------------

    def add_turns(
        self,
        conversation_id: str,
        user_id: str,
        turns: Sequence[BaseMessage] | Sequence[NewTurn],
        *,
        index_now: bool = True,
        as_history: bool = False,
    ) -> list[Turn]:
        """Store turns: SQL (and the tier-3 queue) first, then tier 1; then wake listeners.

        The conversation is created for the user if it does not exist (conversation ids are
        each user's own). Messages without text are left out (a batch of only such messages
        stores nothing); the rest are stored.

        Args:
            conversation_id: The conversation.
            user_id: Its owner.
            turns: Messages, or :class:`NewTurn` objects (not a mix).
            index_now: Wake tier 3's worker to embed the turns at once. ``False`` leaves them
                queued for :meth:`index_queued` (or the worker's next round): the chat stores
                the user's message before calling the model, and a worker embedding it then
                competes with the reply for the CPU.
            as_history: The turns are past history (an import, a benchmark's logs), not
                said now: no "remember ..." / "forget ..." in them is acted on, and the
                listeners (consolidation's triggers) are not told; consolidation's backlog
                scans find them.

        Returns:
            The stored turns (without the messages left out as empty).

        Raises:
            InvalidInputError: On malformed input (nothing is stored).
        """
        if all(isinstance(turn, NewTurn) for turn in turns):
            new_turns = [turn for turn in turns if isinstance(turn, NewTurn)]
        else:
            new_turns = to_new_turns([t for t in turns if isinstance(t, BaseMessage)], self.counter)
            if len(new_turns) != len(turns):
                raise InvalidInputError("pass either messages or NewTurn objects, not a mix")
        if new_turns and not (new_turns := without_empty(new_turns)):
            return []
        stored = self.store.append_turns(conversation_id, new_turns, user_id=user_id)
        self.buffer.extend(conversation_id, stored, user_id=user_id)
        try:
            if not as_history:
                self._file_requests(conversation_id, user_id, stored)
        except MemoryChainError as exc:  # the turns are stored: the request can be repeated
            logger.warning(
                "conversation %s: a remember/forget request failed: %s", conversation_id, exc
            )
        for listener in () if as_history else self.listeners:
            try:
                listener.on_turns_added(conversation_id, user_id, stored)
            except Exception:  # a trigger must never fail a stored write
                logger.exception("turn listener failed for %s", conversation_id)
        # Last: the backfill thread competes for the GIL as soon as it wakes.
        if index_now:
            self.index_queued()
        return stored

    def import_history(self, path: Path, **options: Any) -> HistoryReport:
        """Import a chat export (Open WebUI, ChatGPT, plain JSON Lines / CSV) as history.

        See :func:`memory_chain.imports.import_history` for the options (``format``,
        ``user``, ``namespace``, ``default_user``, ``dry_run``, ``progress``).
        """
        from memory_chain.imports import import_history

        return import_history(self, path, **options)

    def index_queued(self) -> None:
        """Wake tier 3's worker to embed the queued turns (nothing to do without tier 3)."""
        if self.tier3 is not None:
            self.tier3.notify()

    def delete_conversation(self, conversation_id: str, user_id: str) -> bool:
        """Purge a conversation from every tier (rows, facts said only in it, cache, points).

        The rows and facts go at once, with a queued task for tier 3 in the same
        transaction; the points go now if the vector store answers, else when it is back.
        Retrieval hides the conversation from the moment its rows are gone.
        """
        deleted = self.store.delete_conversation(conversation_id, user_id=user_id)
        self.buffer.invalidate(conversation_id, user_id=user_id)
        if deleted:
            self._apply_tier3_tasks()
        return deleted

    def delete_user(self, user_id: str) -> int:
        """Purge every conversation of a user from every tier; how many there were."""
        validate_id(user_id, "user id")
        removed = self.store.delete_user(user_id)
        self.buffer.clear_user(user_id)
        self._apply_tier3_tasks()
        return removed

    # -- facts -----------------------------------------------------------------------------

    def _file_requests(self, conversation_id: str, user_id: str, stored: Sequence[Turn]) -> None:
        """File what the user asked to remember, dismiss what they asked to forget.

        A request that names no content ("remember this", "forget that") is about the
        user's previous message.
        """
        for index, turn in enumerate(stored):
            if turn.role != "user":
                continue
            intent = parse_intent(turn.content)
            if intent is None:
                continue
            text = intent.text
            if not text and intent.refers_back:
                earlier = [t for t in stored[:index] if t.role == "user"]
                if not earlier:
                    before = self.store.get_turns(
                        conversation_id,
                        user_id=user_id,
                        after=max(turn.turn_number - 20, 0),
                        limit=19,
                    )
                    earlier = [
                        t for t in before if t.role == "user" and t.turn_number < turn.turn_number
                    ]
                text = earlier[-1].content if earlier else ""
            if not text:
                continue
            if intent.action == "save":
                draft = FactDraft(
                    text,
                    origin="explicit",
                    conversation_id=conversation_id,
                    turns=(turn.turn_number, turn.turn_number),
                    valid_from=turn.timestamp,
                )
                # With the check that the conversation exists: a purge landing since the
                # turn was stored wins.
                filed = self.fact_store.add_said(user_id, conversation_id, [(draft, None)])
                for change in filed or ():
                    logger.info("user %s: fact %s (%s)", user_id, change.fact.id, change.action)
            else:
                for fact in self.fact_store.forget_matching(user_id, text):
                    logger.info("user %s: fact %s dismissed on request", user_id, fact.id)

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

    def _apply_tier3_tasks(self) -> None:
        if self.tier3 is None:
            return
        try:
            self.tier3.apply_tasks()
        except MemoryChainError as exc:
            # Queued in tier 2 with the purge: the backfill does it once the store is back.
            logger.warning("tier 3 is not updated yet (the change stays queued): %s", exc)
            self.tier3.notify()

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

    def export(self, user_id: str) -> Iterator[str]:
        """The user's conversations, facts and store items as export lines, streamed."""
        return export_lines(self.store.engine, user_id=user_id)

    def archive(self, conversation_id: str, user_id: str) -> None:
        """Archive a conversation: retrieval leaves it out unless archived ones are asked for.

        Raises:
            ConversationNotFoundError: If the user has no conversation of this id.
        """
        self.store.set_status(conversation_id, "archived", user_id=user_id)

    # -- reads ------------------------------------------------------------------------------

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

    @property
    def retrieval(self) -> RetrievalSettings:
        """How memory is searched (depths, mode, fusion weights)."""
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
    ) -> Found:
        """The retrieval every path uses (:meth:`MemorySearch.find`), ids checked.

        Every door that answers what memory recalls goes through here (the chat, the search
        endpoint, the LangServe retriever, the MCP tools, the LangGraph store, the
        evaluation), so they share one rule for the user's retired facts: a recalled turn
        that stated a fact since superseded is noted as outdated, one that stated a fact the
        user dismissed is left out (:mod:`memory_chain.facts.outdated`). A forgotten thing
        does not come back through the turn it was learnt from, whichever door asks; the
        turn itself stays in its conversation (its turns, the export).

        Raises:
            InvalidInputError: If an id is malformed.
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
        )
        try:
            retired = self.fact_store.retired(user_id, recalled_from(found.items))
        except MemoryChainError as exc:
            degraded = [*found.degraded, f"retired facts (recalled turns not checked): {exc}"]
            return replace(found, degraded=degraded)
        return replace(found, items=mark_outdated(found.items, retired))

    def turn_count(self, conversation_id: str, user_id: str) -> int:
        """How many turns the conversation has (tier 1's count when cached, else SQL's)."""
        cached = self.buffer.metadata(conversation_id, user_id)
        if cached is not None:
            return cached.turn_count
        info = self.store.get_conversation(conversation_id, user_id=user_id)
        return info.turn_count if info is not None else 0

    def retrieve(
        self,
        conversation_id: str,
        user_id: str,
        query: str,
        *,
        working: tuple[list[Turn], CachedSummary] | None = None,
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

    def history(self, conversation_id: str, user_id: str) -> MemoryChatMessageHistory:
        """The composed chat history of a conversation (summary + recent turns)."""
        return MemoryChatMessageHistory(self, conversation_id, user_id=user_id)

    def close(self) -> None:
        """Stop the retrieval's worker threads (the stores are closed by their owners)."""
        self.memory_search.close()
