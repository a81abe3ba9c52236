"""Consolidation in the background: when a conversation is consolidated, and on which thread.

Triggers: every ``message_threshold`` unsummarized messages, a tier-1 buffer over
``token_limit`` tokens, the end of a conversation (:meth:`ConsolidationService.end`), an
explicit save (a user message such as "remember this"; the tier-3 backfill files the message
itself as a user fact, with its turn), and ``idle_seconds`` of silence (a background scan).
:meth:`~memory_chain.consolidator.Consolidator.consolidate` is the manual trigger.

What a consolidation does (summaries, facts, tier 3, pruning tier 1, and the locks that keep
it from running twice) is :class:`~memory_chain.consolidator.Consolidator`'s part, which
:class:`ConsolidationService` extends. Nothing runs in the caller's request: triggers submit
work to a single background thread, and what is queued is found again after a restart
(:meth:`ConsolidationService.resume`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import timedelta
from typing import Unpack

from langchain_core.runnables import Runnable

from memory_chain.consolidator import (
    THRESHOLD_REASONS,
    ConsolidationError,
    ConsolidationSettings,
    Consolidator,
    ConsolidatorOptions,
)
from memory_chain.errors import MemoryChainError
from memory_chain.intent import asks_to_remember
from memory_chain.schemas import Summary, Turn, utcnow
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.progress import backlog, summarized_through

logger = logging.getLogger(__name__)

#: Finished runs remembered (for callers that wait on them) before the oldest are dropped.
_KEEP_FINISHED = 1_024


class ConsolidationService(Consolidator):
    """Runs consolidations when triggers fire, on one background thread.

    Takes the arguments of :class:`~memory_chain.consolidator.Consolidator`, whose
    :meth:`~memory_chain.consolidator.Consolidator.consolidate` each run calls, and has its
    attributes.

    Attributes:
        failures: Consolidations that failed.
    """

    def __init__(
        self,
        store: SQLStore,
        buffer: TurnBuffer,
        summarizer: Runnable[dict[str, str], str],
        **options: Unpack[ConsolidatorOptions],
    ) -> None:
        super().__init__(store, buffer, summarizer, **options)
        self.failures = 0
        self._waiting = 0  # queued or running (the executor keeps no count of its own)
        # The last run per (user, conversation); finished ones are dropped past
        # _KEEP_FINISHED entries.
        self._pending: dict[tuple[str, str], Future[Summary | None]] = {}
        self._pending_lock = threading.Lock()
        self._prune_above = _KEEP_FINISHED
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
    "THRESHOLD_REASONS",
    "ConsolidationError",
    "ConsolidationService",
    "ConsolidationSettings",
]
