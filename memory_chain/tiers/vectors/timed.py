"""A :class:`VectorIndex` that times its searches into the process metrics.

It wraps any backend and passes every call through; only the reads on the query path
(:meth:`TimedIndex.search`, :meth:`TimedIndex.payloads`, :meth:`TimedIndex.scores`) are
measured (``memory_chain_retrieval_duration_seconds{tier=...}``), so the engines stay free of
metrics code and every caller of the index is measured alike.

Example:
    >>> edge = EdgeIndex(path, collection="c", dimension=384)  # doctest: +SKIP
    >>> index = TimedIndex(edge, "tier3")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from memory_chain import metrics
from memory_chain.tiers.vectors.index import (
    TurnPayload,
    VectorFilter,
    VectorHit,
    VectorIndex,
    VectorPoint,
)


class TimedIndex(VectorIndex):
    """``inner``, with its searches timed under ``tier``.

    Args:
        inner: The index that does the work.
        tier: The label of its searches (``"tier3"``).
    """

    def __init__(self, inner: VectorIndex, tier: metrics.RetrievalTier) -> None:
        self.inner = inner
        self.tier: metrics.RetrievalTier = tier
        self.dimension = inner.dimension

    def open(self) -> None:
        """Open ``inner``."""
        self.inner.open()

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Upsert into ``inner``."""
        self.inner.upsert(points)

    def search(self, vector: Sequence[float], where: VectorFilter, k: int) -> list[VectorHit]:
        """Search ``inner``, timed."""
        with metrics.retrieval_timer(self.tier):
            return self.inner.search(vector, where, k)

    def delete(self, where: VectorFilter) -> None:
        """Delete from ``inner``."""
        self.inner.delete(where)

    def count(self, where: VectorFilter | None = None) -> int:
        """Count in ``inner``."""
        return self.inner.count(where)

    def scroll(self, where: VectorFilter | None = None) -> Iterator[VectorPoint]:
        """Scroll ``inner``."""
        return self.inner.scroll(where)

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[TurnPayload]:
        """Read payloads from ``inner``, timed as a search (retrieval reads neighbours so)."""
        with metrics.retrieval_timer(self.tier):
            return self.inner.payloads(user_id, ids)

    def scores(self, vector: Sequence[float], user_id: str, ids: Sequence[str]) -> dict[str, float]:
        """Score points of ``inner``, timed."""
        with metrics.retrieval_timer(self.tier):
            return self.inner.scores(vector, user_id, ids)

    def flush(self) -> None:
        """Flush ``inner``."""
        self.inner.flush()

    def drop(self) -> None:
        """Drop ``inner``'s collection."""
        self.inner.drop()

    def close(self) -> None:
        """Close ``inner``."""
        self.inner.close()
