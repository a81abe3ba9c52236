"""The background backfill: embeds queued turns off the request path.

A daemon thread wakes when new turns are queued (:meth:`BackfillWorker.notify`) or every
``interval`` seconds, opens the index if it could not be opened before, and drains the
outbox. Embedded turns are settled (the index flushed, the turns taken off the queue) once
no new turn has come for ``settle_after`` seconds, and under steady traffic at most every
:attr:`TurnIndexer.flush_interval` seconds: a flush of the embedded index holds the GIL for
20-200 ms whatever it writes, so under load it is paid rarely, and when traffic stops the
queue empties within about ``settle_after`` seconds. When the vector store is down it backs
off (up to ``max_backoff``) and tries again; the turns wait in tier 2 meanwhile.

After each drain it runs its ``chores``, other embedding work kept off the request path
(the users' facts stored without a vector:
:meth:`~memory_chain.tiers.sql.facts.FactStore.embed_pending`), a batch each; while a chore
finds work, the thread runs again at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from memory_chain.errors import MemoryChainError
from memory_chain.tiers.vectors.indexer import TurnIndexer

logger = logging.getLogger(__name__)


class BackfillWorker:
    """Runs :meth:`TurnIndexer.drain` in a background thread.

    Args:
        indexer: The indexer to run.
        interval: Seconds between runs when nothing notifies.
        max_backoff: Longest wait after failures, in seconds.
        warm_up: Load the embedding model when the thread starts, so the first request
            that needs it does not pay for loading.
        settle_after: Seconds without new turns after which embedded turns are settled.

    Attributes:
        chores: Called after each drain, in order: each does a batch of other background
            work and returns how much it did (0: nothing waits).
    """

    def __init__(
        self,
        indexer: TurnIndexer,
        *,
        interval: float = 5.0,
        max_backoff: float = 60.0,
        warm_up: bool = True,
        settle_after: float = 1.0,
    ) -> None:
        self.indexer = indexer
        self.settle_after = settle_after
        self.interval = interval
        self.max_backoff = max_backoff
        self.warm_up = warm_up
        self.index_open = False
        self.last_error: str | None = None
        self.embedded = 0
        self.chores: list[Callable[[], int]] = []
        self.chores_done = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self.indexer.halted.clear()
            self._thread = threading.Thread(
                target=self._run, name="memory-chain-backfill", daemon=True
            )
            self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the background thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def notify(self) -> None:
        """New turns are queued: run soon."""
        self._wake.set()

    def halt(self) -> None:
        """Start no new batch (no locks: a signal handler may call it)."""
        self._stop.set()
        self.indexer.halted.set()
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop after the current batch (waiting at most ``timeout`` s), settling what was embedded.

        A batch still running after ``timeout`` is abandoned with the thread (a daemon); its
        turns stay queued in tier 2 and are embedded after the next start.

        Returns:
            Whether the thread stopped in time.
        """
        self.halt()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning("tier-3 backfill: abandoning the batch in flight (stays queued)")
                return False
        try:
            self.indexer.settle()
        except MemoryChainError as exc:
            logger.warning("could not settle embedded turns (they stay queued): %s", exc)
        return True

    def run_once(self) -> int:
        """Open the index if needed (once the store is back), drain the outbox, run the chores.

        Returns:
            How many turns were embedded.

        Raises:
            MemoryChainError: If the vector store fails.
        """
        if not self.index_open:
            self.indexer.open()
            self.index_open = True
        done = self.indexer.drain(settle=False)
        self.indexer.settle(force=False)
        self.embedded += done
        chores = sum(chore() for chore in tuple(self.chores))
        if chores:
            self.chores_done += chores
            self._wake.set()  # more may wait: run again without the interval's pause
        self.last_error = None
        return done

    def _run(self) -> None:
        if self.warm_up:
            try:
                self.indexer.warm_up()
            except Exception:
                logger.exception("could not load the embedding model")
        wait = self.interval
        while not self._stop.is_set():
            try:
                self.run_once()
                wait = self.interval
            except MemoryChainError as exc:
                self.last_error = str(exc)
                wait = min(max(wait * 2, 1.0), self.max_backoff)
                logger.warning("tier-3 backfill failed, retrying in %.0f s: %s", wait, exc)
            except Exception as exc:
                self.last_error = repr(exc)
                wait = min(max(wait * 2, 1.0), self.max_backoff)
                logger.exception("tier-3 backfill crashed, retrying in %.0f s", wait)
            timeout = min(wait, self.settle_after) if self.indexer.unsettled else wait
            quiet = not self._wake.wait(timeout)
            self._wake.clear()
            if quiet and self.indexer.unsettled and not self._stop.is_set():
                try:
                    self.indexer.settle()
                except MemoryChainError as exc:
                    logger.warning("could not settle embedded turns (they stay queued): %s", exc)
