"""Consolidation: tier 1 → tier-2 summary → tier 3, in the background.

Triggers: every ``message_threshold`` unsummarized messages, a tier-1 buffer over
``token_limit`` tokens, the end of a conversation (:meth:`ConsolidationService.end`), an
explicit save (a user message such as "remember this"; the tier-3 backfill files the message
itself as a user fact, with its turn), and ``idle_seconds`` of silence (a background scan).
:meth:`consolidate` is the manual trigger.

A consolidation summarizes the turns after the last summarized one with the summarization
chain (retried with backoff), stores the range summary and the new running summary in one
transaction, learns the facts about the user the range holds (with a :class:`FactExtractor
<memory_chain.extraction.FactExtractor>`, one more call of the model; a failure there costs the
range its facts, never its summary), drains the tier-3 queue, and only then prunes tier 1 to
its last ``keep_last`` turns. It is idempotent: ranges are unique in SQL, and no range is
summarized (no LLM called) twice: a per-conversation lock orders this process's threads,
and a database lock across processes (an advisory lock on PostgreSQL) lets one replica at a
time consolidate a conversation, the others skipping it meanwhile. Nothing runs in the
caller's request: triggers submit work to a single background thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from langchain_core.runnables import Runnable

from memory_chain import metrics
from memory_chain.errors import MemoryChainError
from memory_chain.extraction import ExtractionError, FactExtractor
from memory_chain.intent import asks_to_remember
from memory_chain.schemas import Summary, Turn, utcnow
from memory_chain.serial import SerialExecutor
from memory_chain.summarize import summary_inputs
from memory_chain.tiers.buffer import CachedSummary, TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.progress import backlog, summarized_through
from memory_chain.tiers.vectors.tier import Tier3
from memory_chain.tokens import TokenCounter

logger = logging.getLogger(__name__)

#: Triggers that summarize whole chunks only; the others (end, idle, save, manual) flush all.
THRESHOLD_REASONS = frozenset({"messages", "tokens"})


#: Finished runs remembered (for callers that wait on them) before the oldest are dropped.
_KEEP_FINISHED = 1_024
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


class ConsolidationService:
    """Runs consolidations when triggers fire.

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
        failures: Consolidations that failed.
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
        self.failures = 0
        self.extraction_failures = 0
        self._waiting = 0  # queued or running (the executor keeps no count of its own)
        self._executor = SerialExecutor("consolidation")
        # The last run per (user, conversation); finished ones are dropped past
        # _KEEP_FINISHED entries.
        self._pending: dict[tuple[str, str], Future[Summary | None]] = {}
        self._pending_lock = threading.Lock()
        self._prune_above = _KEEP_FINISHED
        # Striped per-conversation locks: bounded, whatever the number of conversations.
        self._locks = tuple(threading.Lock() for _ in range(_LOCK_STRIPES))
        self._stop = threading.Event()
        self._scanner: threading.Thread | None = None
        #: Also run on every idle scan (retention, for one), each failure logged.
        self.on_scan: list[Callable[[], object]] = []

    # -- triggers ---------------------------------------------------------------------------

    def trigger_reason(
        self, conversation_id: str, user_id: str, *, turn_count: int | None = None
    ) -> str | None:
        """Why the conversation should be consolidated now, or ``None``.

        Args:
            conversation_id: The conversation.
            user_id: Its owner.
            turn_count: Its number of turns when the caller just stored some; with the
                summary state cached in tier 1, the check then reads no SQL.
        """
        cached_summary = self.buffer.summary(conversation_id, user_id)
        if turn_count is not None and cached_summary is not None:
            through = cached_summary.through
        else:
            through = summarized_through(self.store, conversation_id, user_id)
            info = self.store.get_conversation(conversation_id, user_id=user_id)
            if info is None:
                return None
            turn_count = info.turn_count
        if turn_count <= through:
            return None
        if turn_count - through >= self.settings.message_threshold:
            return "messages"
        cached = self.buffer.get(conversation_id, user_id) or []
        tokens = sum(turn.content_tokens for turn in cached if turn.turn_number > through)
        if tokens > self.settings.token_limit:
            return "tokens"
        return None

    def on_turns_added(self, conversation_id: str, user_id: str, turns: Sequence[Turn]) -> None:
        """Check the triggers after a write; consolidation runs in the background."""
        if any(asks_to_remember(turn.role, turn.content) for turn in turns):
            # The fact itself is filed by the manager with its turn; the save also
            # consolidates now, even if a run is already under way.
            self.schedule(conversation_id, user_id, "explicit save", force=True)
            return
        last = max((turn.turn_number for turn in turns), default=None)
        reason = self.trigger_reason(conversation_id, user_id, turn_count=last)
        if reason is not None:
            self.schedule(conversation_id, user_id, reason)

    def end(self, conversation_id: str, user_id: str) -> Future[Summary | None]:
        """The conversation ended: consolidate what is left."""
        return self.schedule(conversation_id, user_id, "conversation end")

    def schedule(
        self,
        conversation_id: str,
        user_id: str,
        reason: str,
        *,
        force: bool = False,
    ) -> Future[Summary | None]:
        """Queue a consolidation (one pending per conversation unless ``force``)."""
        key = (user_id, conversation_id)
        with self._pending_lock:
            pending = self._pending.get(key)
            if pending is not None and not pending.done() and not force:
                return pending
            future = self._executor.submit(lambda: self._run(conversation_id, user_id, reason))
            self._waiting += 1
            self._pending[key] = future
            if len(self._pending) > self._prune_above:
                self._pending = {c: f for c, f in self._pending.items() if not f.done()}
                self._prune_above = max(_KEEP_FINISHED, 2 * len(self._pending))
        # Outside the lock: a future already done runs the callback here, at once.
        future.add_done_callback(self._finished)
        return future

    @property
    def waiting(self) -> int:
        """Scheduled consolidations not finished yet (queued or running)."""
        with self._pending_lock:
            return self._waiting

    def _finished(self, _future: Future[Summary | None]) -> None:
        with self._pending_lock:
            self._waiting -= 1

    def _run(self, conversation_id: str, user_id: str, reason: str) -> Summary | None:
        try:
            return self.consolidate(conversation_id, user_id, reason=reason)
        except Exception:
            if self._executor.stopping:
                logger.info(
                    "consolidation of %s (%s) abandoned at shutdown", conversation_id, reason
                )
                raise
            self.failures += 1
            logger.exception("consolidation of %s (%s) failed", conversation_id, reason)
            raise

    # -- the work ---------------------------------------------------------------------------

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

    # -- idle scan ----------------------------------------------------------------------------

    def scan_idle(self) -> int:
        """Schedule every conversation idle for ``idle_seconds`` with unsummarized turns."""
        cutoff = utcnow() - timedelta(seconds=self.settings.idle_seconds)
        found = backlog(self.store, idle_since=cutoff)
        for item in found:
            self.schedule(item.conversation_id, item.user_id, "idle")
        return len(found)

    def resume(self) -> int:
        """Schedule every conversation with a message trigger's worth of unsummarized turns.

        Consolidations are queued in memory, but what they are for is durable: a run that was
        abandoned at shutdown (or lost in a crash) left its turns unsummarized, and this finds
        them again. The scan thread calls it when it starts.
        """
        found = backlog(self.store, min_unsummarized=self.settings.message_threshold)
        for item in found:
            self.schedule(item.conversation_id, item.user_id, "messages")
        if found:
            logger.info("resuming the consolidation of %d conversations", len(found))
        return len(found)

    def start(self) -> None:
        """Start the scan thread: the backlog left by the last run, then idle conversations."""
        if self._scanner is None or not self._scanner.is_alive():
            self._stop.clear()
            self._scanner = threading.Thread(
                target=self._scan_loop, name="consolidation-idle-scan", daemon=True
            )
            self._scanner.start()

    def _scan_loop(self) -> None:
        try:
            self.resume()
        except MemoryChainError as exc:
            logger.warning("could not resume the consolidation backlog: %s", exc)
        while not self._stop.wait(self.settings.scan_seconds):
            for scan in (self.scan_idle, *self.on_scan):
                try:
                    scan()
                except MemoryChainError as exc:
                    logger.warning("idle scan failed: %s", exc)

    def halt(self) -> None:
        """Start no new consolidation or range (no locks: a signal handler may call it)."""
        self._stop.set()
        self._executor.halt()

    def stop(self, timeout: float | None = None) -> bool:
        """Start no new consolidation; wait at most ``timeout`` s for the summary in flight.

        Queued consolidations are cancelled, and a running one stops before its next range.
        A summary call still running after ``timeout`` is abandoned (its thread does not keep
        the process alive); nothing of it is stored, so its turns stay unsummarized and are
        consolidated after the next start (:meth:`resume`).

        Returns:
            Whether everything stopped in time.
        """
        self._stop.set()
        stopped = self._executor.stop(timeout)
        if self._scanner is not None:
            self._scanner.join(timeout)
        return stopped


__all__ = [
    "ConsolidationError",
    "ConsolidationService",
    "ConsolidationSettings",
]
