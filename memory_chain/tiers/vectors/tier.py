"""Tier 3 as one object: semantic search over the index, and what keeps the index filled.

Callers ask :class:`Tier3` to do things (search, apply the queued tasks, drain the queue,
reindex, close) rather than reaching through it to the indexer, the worker or the
collections: which of them does the work is the tier's own business.
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from memory_chain.tiers.vectors.index import VectorIndex
from memory_chain.tiers.vectors.indexer import Progress, TurnIndexer
from memory_chain.tiers.vectors.semantic import SemanticSearch, TurnKey
from memory_chain.tiers.vectors.worker import BackfillWorker

__all__ = ["Tier3", "TurnKey"]


class Tier3(SemanticSearch):
    """Everything semantic memory needs: its searches (:class:`SemanticSearch`) and backfill.

    Creating one does no I/O: the caller opens the collections (or the worker does, once the
    vector store answers).

    Args:
        index: The turns collection (``conversation_memory``).
        embeddings: The embedding model.
        indexer: Moves queued turns into ``index``.
        worker: Runs ``indexer`` in the background (``None``: callers drain explicitly).
        backend: A human-readable name of the engine, for logs and ``/health``.
    """

    def __init__(
        self,
        *,
        index: VectorIndex,
        embeddings: Embeddings,
        indexer: TurnIndexer,
        worker: BackfillWorker | None = None,
        backend: str = "",
    ) -> None:
        super().__init__(index, embeddings)
        self.indexer = indexer
        self.worker = worker
        self.backend = backend

    @property
    def is_open(self) -> bool:
        """Whether the background worker has the collections open."""
        return self.worker is not None and self.worker.index_open

    def point_counts(self) -> dict[str, int]:
        """Points per collection: ``{"turns": n}``.

        Raises:
            VectorStoreError: If a collection cannot be counted.
        """
        return {"turns": self.index.count()}

    def notify(self) -> None:
        """New turns or tasks are queued: wake the background worker."""
        if self.worker is not None:
            self.worker.notify()

    def apply_tasks(self) -> int:
        """Do the queued tier-3 tasks now (deletions, refreshes); see :class:`TurnIndexer`.

        Raises:
            VectorStoreError: If the vector store fails; the tasks stay queued.
        """
        return self.indexer.apply_tasks()

    def catch_up(self) -> None:
        """Embed what is queued: the worker's job if it runs, else done here (logged on failure).

        What cannot be embedded now stays queued.
        """
        if self.worker is not None and self.worker.running:
            self.worker.notify()
        else:
            self.indexer.try_drain()

    def drain(self, *, progress: Progress | None = None) -> int:
        """Embed every queued turn now, in bulk (every core); returns how many.

        Raises:
            VectorStoreError: If the vector store fails (the rest stays queued).
        """
        return self.indexer.drain(progress=progress, bulk=True)

    def reindex(
        self,
        *,
        user_id: str | None = None,
        conversation_id: str | None = None,
        progress: Progress | None = None,
    ) -> int:
        """Rebuild the points of a scope from tier 2 (see :meth:`TurnIndexer.reindex`).

        Returns:
            How many turns were embedded.
        """
        return self.indexer.reindex(
            user_id=user_id, conversation_id=conversation_id, progress=progress
        )

    def close(self, timeout: float = 30.0) -> None:
        """Stop the worker (waiting at most ``timeout`` s) and close the collections.

        A batch still being written after ``timeout`` keeps the collections open (closing
        them under it could fail the write): the process is exiting, and the batch's turns
        stay queued in tier 2.
        """
        if self.worker is not None and not self.worker.stop(timeout):
            return
        self.indexer.close()
