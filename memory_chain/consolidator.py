"""One consolidation, in the calling thread: tier 1 → tier-2 summary → tier 3.

A consolidation summarizes the turns after the last summarized one with the summarization
chain (retried with backoff), stores the range summary and the new running summary in one
transaction, learns the facts about the user the range holds (with a :class:`FactExtractor
<memory_chain.extraction.FactExtractor>`, one more call of the model; a failure there costs the
range its facts, never its summary), drains the tier-3 queue, and only then prunes tier 1 to
its last ``keep_last`` turns. It is idempotent: ranges are unique in SQL, and no range is
summarized (no LLM called) twice: a per-conversation lock orders this process's threads,
and a database lock across processes (an advisory lock on PostgreSQL) lets one replica at a
time consolidate a conversation, the others skipping it meanwhile.

When a consolidation runs (its triggers, the background thread, the idle scan) is
:class:`~memory_chain.consolidation.ConsolidationService`'s part; it extends
:class:`Consolidator`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypedDict

from langchain_core.runnables import Runnable

from memory_chain import metrics
from memory_chain.errors import MemoryChainError
from memory_chain.extraction import ExtractionError, FactExtractor
from memory_chain.schemas import Summary, Turn
from memory_chain.serial import SerialExecutor
from memory_chain.summarize import summary_inputs
from memory_chain.tiers.buffer import CachedSummary, TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.progress import summarized_through
from memory_chain.tiers.vectors.tier import Tier3
from memory_chain.tokens import TokenCounter

logger = logging.getLogger(__name__)

#: Triggers that summarize whole chunks only; the others (end, idle, save, manual) flush all.
THRESHOLD_REASONS = frozenset({"messages", "tokens"})

#: Locks that serialize consolidations of one conversation (two may share a stripe).
_LOCK_STRIPES = 64


class ConsolidationError(MemoryChainError):
    """The summarization chain kept failing; the buffer was left as it was."""


@dataclass
class ConsolidationSettings:
    """Triggers and actions.

    Attributes:
        message_threshold: Unsummarized messages that trigger a consolidation.
        token_limit: Tokens of unsummarized turns in tier 1 that trigger one.
        idle_seconds: Silence after which a conversation is consolidated.
        keep_last: Turns left in tier 1 after a consolidation.
        max_turns_per_summary: Longest range summarized in one call (bounds the prompt).
        retries: Attempts of the summarization chain.
        backoff_seconds: First wait between attempts (doubles each time).
        scan_seconds: How often the idle scan runs.
    """

    message_threshold: int = 10
    token_limit: int = 2000
    idle_seconds: float = 3600.0
    keep_last: int = 5
    max_turns_per_summary: int = 40
    retries: int = 3
    backoff_seconds: float = 1.0
    scan_seconds: float = 60.0


class ConsolidatorOptions(TypedDict, total=False):
    """The keyword arguments of :class:`Consolidator` (see there)."""

    tier3: Tier3 | None
    counter: TokenCounter | None
    settings: ConsolidationSettings | None
    sleep: Callable[[float], None]
    extractor: FactExtractor | None


class Consolidator:
    """Consolidates a conversation now, in the calling thread (see the module docstring).

    Args:
        store: Tier 2.
        buffer: Tier 1.
        summarizer: The summarization chain (``{"summary", "turns"}`` → text).
        tier3: Semantic memory (drained after each summary; facts go to its facts index).
        counter: Counts summary tokens.
        settings: Triggers and actions.
        sleep: Waits between retries (replaceable in tests).
        extractor: Learns facts about the user from each range summarized (``None``: none
            are learnt).

    Attributes:
        extraction_failures: Ranges summarized whose facts could not be extracted.
    """

    def __init__(
        self,
        store: SQLStore,
        buffer: TurnBuffer,
        summarizer: Runnable[dict[str, str], str],
        *,
        tier3: Tier3 | None = None,
        counter: TokenCounter | None = None,
        settings: ConsolidationSettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
        extractor: FactExtractor | None = None,
    ) -> None:
        self.store = store
        self.buffer = buffer
        self.summarizer = summarizer
        self.tier3 = tier3
        self.counter = counter or TokenCounter()
        self.settings = settings or ConsolidationSettings()
        self.sleep = sleep
        self.extractor = extractor
        self.extraction_failures = 0
        # The thread consolidations are handed to: once it is stopping, a run in progress
        # stores no more ranges and calls the model no more.
        self._executor = SerialExecutor("consolidation")
        # Striped per-conversation locks: bounded, whatever the number of conversations.
        self._locks = tuple(threading.Lock() for _ in range(_LOCK_STRIPES))

    def consolidate(
        self, conversation_id: str, user_id: str, *, reason: str = "manual"
    ) -> Summary | None:
        """Summarize the unsummarized turns now (in the calling thread).

        Returns:
            The last stored range summary, or ``None`` if there was nothing to do (or another
            process stored the same range first).

        Raises:
            ConsolidationError: If the summarization chain failed every attempt; nothing was
                stored and tier 1 was not pruned.
            ConversationNotFoundError: If the conversation does not exist for ``user_id``.
        """
        started = time.perf_counter()
        try:
            stored = self._consolidate(conversation_id, user_id, reason)
        except Exception:
            metrics.observe_consolidation("failed", time.perf_counter() - started)
            raise
        outcome: Literal["stored", "nothing"] = "stored" if stored is not None else "nothing"
        metrics.observe_consolidation(outcome, time.perf_counter() - started)
        return stored

    def _consolidate(self, conversation_id: str, user_id: str, reason: str) -> Summary | None:
        # Threads of this process queue on the stripe; other replicas are kept out by the
        # database lock, and skip the conversation while one of them consolidates it: the
        # holder reads how far the summaries reach only once it has the lock, so no range is
        # summarized (and no LLM called) twice.
        with (
            self._locks[hash((user_id, conversation_id)) % len(self._locks)],
            self.store.try_lock(f"consolidation:{user_id}/{conversation_id}") as held,
        ):
            if not held:
                logger.info("%s is being consolidated by another replica: skipped", conversation_id)
                return None
            return self._consolidate_held(conversation_id, user_id, reason)

    def _consolidate_held(self, conversation_id: str, user_id: str, reason: str) -> Summary | None:
        stored: Summary | None = None
        first = self.store.get_conversation(conversation_id, user_id=user_id)
        # Summarize up to where the conversation stood when the run began: a conversation
        # still chatting would otherwise be chased turn after turn.
        target = first.turn_count if first else 0
        while True:
            epoch = self.buffer.summary_epoch
            info = self.store.get_conversation(conversation_id, user_id=user_id)
            if info is None:
                return stored
            through = summarized_through(self.store, conversation_id, user_id)
            if through >= target:
                # Nothing to do here; refresh tier 1's copy (another process may have
                # summarized it).
                state = CachedSummary(info.summary, through)
                self.buffer.set_summary(conversation_id, state, user_id=user_id, epoch=epoch)
                break
            turns = self.store.get_turns(
                conversation_id,
                user_id=user_id,
                after=through,
                limit=min(self.settings.max_turns_per_summary, target - through),
            )
            if not turns:
                break
            if self._executor.stopping:
                break  # shutting down: the rest stays unsummarized, and resumes at start
            if (
                stored is not None
                and reason in THRESHOLD_REASONS
                and (info.turn_count - through < self.settings.message_threshold)
            ):
                break  # a threshold trigger leaves a short tail for the next one
            summary = self._summarize_range(conversation_id, user_id, info.summary, turns, reason)
            if summary is None:  # another process got this range first
                break
            stored = summary
        if stored is not None:
            self._after_summary(conversation_id, user_id)
        return stored

    def _summarize_range(
        self,
        conversation_id: str,
        user_id: str,
        running: str | None,
        turns: list[Turn],
        reason: str,
    ) -> Summary | None:
        start, end = turns[0].turn_number, turns[-1].turn_number
        logger.info("consolidating %s turns %d-%d (%s)", conversation_id, start, end, reason)
        range_text = self._invoke(summary_inputs(None, turns))
        # Progressive: the running summary so far plus the new turns give the new one.
        new_running = self._invoke(summary_inputs(running, turns)) if running else range_text
        if self._executor.abandoned:  # shut down meanwhile: the next start does it again
            raise ConsolidationError("abandoned at shutdown: the turns stay unsummarized")
        stored = self.store.add_summary(
            conversation_id,
            range_text,
            (start, end),
            token_count=self.counter.count(range_text),
            running_summary=new_running,
            user_id=user_id,
            # Dated by what it covers: a summary of imported history is as old as it.
            dated=turns[-1].timestamp,
        )
        if stored is not None:
            state = CachedSummary(new_running, end)
            self.buffer.set_summary(conversation_id, state, user_id=user_id)
            self._learn_facts(conversation_id, user_id, turns)
        return stored

    def _learn_facts(self, conversation_id: str, user_id: str, turns: list[Turn]) -> None:
        """File the facts of a range just summarized; a failure is counted, never raised."""
        if self.extractor is None:
            return
        span = (conversation_id, turns[0].turn_number, turns[-1].turn_number)
        if self._executor.stopping:
            logger.info("shutting down: no facts learnt from %s turns %d-%d", *span)
            return
        try:
            found = self.extractor.extract(user_id, turns)
            # Filed in one transaction with the check that the conversation still exists,
            # holding the user's fact lock, as a purge does: a conversation purged (or a
            # user erased) meanwhile gets none of them back.
            if found:
                self.extractor.file(user_id, conversation_id, found)
        except ExtractionError as exc:
            self.extraction_failures += 1
            logger.warning("no facts learnt from %s turns %d-%d: %s", *span, exc)
        except Exception:
            self.extraction_failures += 1
            logger.exception("no facts learnt from %s turns %d-%d", *span)

    def _invoke(self, inputs: dict[str, str]) -> str:
        delay = self.settings.backoff_seconds
        last: Exception | None = None
        for attempt in range(1, self.settings.retries + 1):
            try:
                text = self.summarizer.invoke(inputs).strip()
                if text:
                    return text
                last = ValueError("the model returned an empty summary")
            except Exception as exc:  # any model or transport failure is retried
                last = exc
            if self._executor.stopping:
                raise ConsolidationError("shutting down: the turns stay unsummarized") from last
            if attempt < self.settings.retries:
                logger.warning("summarization attempt %d failed: %s", attempt, last)
                self.sleep(delay)
                delay *= 2
        raise ConsolidationError(
            f"summarization failed {self.settings.retries} times ({last}): is the LLM "
            "reachable? The turns stay unsummarized and will be retried"
        ) from last

    def _after_summary(self, conversation_id: str, user_id: str) -> None:
        if self.tier3 is not None:
            # The range's points carry its summary, queued since it was stored: embed it
            # (in the backfill thread, or here without one); failures keep it queued.
            self.tier3.catch_up()
        # Only now, with the summary durably stored, may tier 1 drop older turns.
        self.buffer.prune(conversation_id, self.settings.keep_last, user_id=user_id)


__all__ = [
    "THRESHOLD_REASONS",
    "ConsolidationError",
    "ConsolidationSettings",
    "Consolidator",
    "ConsolidatorOptions",
]
