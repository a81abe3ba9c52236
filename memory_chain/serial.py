"""One background thread that runs jobs in order, and stops within a bounded time.

:class:`concurrent.futures.ThreadPoolExecutor` cannot do the second part: its threads are
joined when the interpreter exits, so a job blocked on a slow network call (a summary from an
overloaded model) holds the process until the call returns, and ``shutdown`` either waits for
every queued job or for none. :class:`SerialExecutor` runs jobs on one daemon thread;
:meth:`SerialExecutor.stop` cancels the jobs not started, waits at most ``timeout`` seconds
for the one running, and then lets the process exit without it.

Example:
    >>> executor = SerialExecutor("example")
    >>> executor.submit(lambda: 21 * 2).result(timeout=5)
    42
    >>> executor.stop(timeout=1)
    True
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_Job = tuple[Future[Any], Callable[[], Any]]


class SerialExecutor:
    """Runs submitted callables one at a time, in order, on a daemon thread.

    Args:
        name: The thread's name (shown in logs and thread dumps).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._abandoned = threading.Event()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called: nothing new starts."""
        return self._stopping.is_set()

    def submit(self, work: Callable[[], _T]) -> Future[_T]:
        """Queue ``work``; after :meth:`stop` the returned future is cancelled at once."""
        future: Future[_T] = Future()
        with self._lock:
            if self._stopping.is_set():
                future.cancel()
                return future
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._jobs.put((future, work))
        return future

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, work = job
            if self._stopping.is_set() or not future.set_running_or_notify_cancel():
                future.cancel()
                continue
            try:
                result = work()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    @property
    def abandoned(self) -> bool:
        """Whether :meth:`stop` gave up on the job running: it should not store its result."""
        return self._abandoned.is_set()

    def halt(self) -> None:
        """Start nothing new from now on (safe to call from a signal handler: no locks)."""
        self._stopping.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Start nothing new, cancel what is queued, wait for the job running.

        Args:
            timeout: Longest wait for the running job (``None``: until it ends).

        Returns:
            Whether the thread ended in time (``False``: a job still runs; the thread is a
            daemon, so it does not keep the process alive).
        """
        with self._lock:
            self._stopping.set()
            thread = self._thread
            self._jobs.put(None)
        while True:  # cancel what never started, so that waiters learn it now
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[0].cancel()
        self._jobs.put(None)
        if thread is None:
            return True
        thread.join(timeout)
        if thread.is_alive():
            self._abandoned.set()
            logger.warning("%s: abandoning the job in flight after %.1f s", self.name, timeout)
            return False
        return True
