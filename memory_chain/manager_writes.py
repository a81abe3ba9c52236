"""The memory manager's write path: turns stored in every tier, then what follows a write.

:meth:`TurnWrites.add_turns` stores turns SQL first (the source of truth, with the turns
queued for tier 3 in the same transaction), then in tier 1; then files what the user asked
to remember or forget (:meth:`TurnWrites._file_requests`, a step of its own), tells the
listeners (consolidation's triggers) and last wakes tier 3's backfill.

Part of :class:`~memory_chain.manager.MemoryManager`, which holds the stores this reads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from langchain_core.messages import BaseMessage

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.facts.model import FactDraft
from memory_chain.intent import parse_intent
from memory_chain.messages import to_new_turns
from memory_chain.schemas import NewTurn, Turn, without_empty
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.tier import Tier3
from memory_chain.tokens import TokenCounter

logger = logging.getLogger(__name__)


class TurnListener(Protocol):
    """Told about stored turns (the consolidation service is one)."""

    def on_turns_added(self, conversation_id: str, user_id: str, turns: Sequence[Turn]) -> None:
        """Turns were stored."""
        ...


class TurnWrites:
    """Storing turns: :meth:`add_turns` and what it sets off."""

    store: SQLStore
    buffer: TurnBuffer
    tier3: Tier3 | None
    fact_store: FactStore
    counter: TokenCounter
    listeners: list[TurnListener]

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

    def index_queued(self) -> None:
        """Wake tier 3's worker to embed the queued turns (nothing to do without tier 3)."""
        if self.tier3 is not None:
            self.tier3.notify()

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


__all__ = ["TurnListener", "TurnWrites"]
