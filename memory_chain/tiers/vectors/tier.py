"""Tier 3 as one object: the index, its model, and what keeps it filled."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from langchain_core.embeddings import Embeddings

from memory_chain.tiers.vectors.facts import UserFacts
from memory_chain.tiers.vectors.index import (
    TurnPayload,
    VectorFilter,
    VectorHit,
    VectorIndex,
    point_id,
)
from memory_chain.tiers.vectors.indexer import TurnIndexer
from memory_chain.tiers.vectors.worker import BackfillWorker

#: A turn: ``(conversation_id, turn_number)``.
TurnKey = tuple[str, int]


@dataclass
class Tier3:
    """Everything semantic memory needs.

    Attributes:
        index: The turns collection (``conversation_memory``).
        embeddings: The embedding model.
        indexer: Moves queued turns into ``index``.
        worker: Runs ``indexer`` in the background (``None``: callers drain explicitly).
        backend: A human-readable name of the engine, for logs and ``/health``.
    """

    index: VectorIndex
    embeddings: Embeddings
    indexer: TurnIndexer
    worker: BackfillWorker | None = None
    backend: str = ""

    @property
    def facts(self) -> UserFacts | None:
        """The ``user_facts`` collection, filled by ``indexer`` (``None``: no user facts)."""
        return self.indexer.facts

    def embed_query(self, text: str) -> list[float]:
        """The query's vector (the model that embedded the turns)."""
        return self.embeddings.embed_query(text)

    def search(self, vector: list[float], where: VectorFilter, k: int) -> list[VectorHit]:
        """The ``k`` turns most similar to ``vector`` among those ``where`` selects."""
        return self.index.search(vector, where, k)

    def payloads(self, user_id: str, turns: Iterable[TurnKey]) -> dict[TurnKey, TurnPayload]:
        """The stored payloads of these ``(conversation_id, turn_number)``s of ``user_id``."""
        found = self.index.payloads(user_id, [point_id(user_id, c, n) for c, n in turns])
        return {(p.conversation_id, p.turn_number): p for p in found}

    def scores(
        self, vector: list[float], user_id: str, turns: Iterable[TurnKey]
    ) -> dict[TurnKey, float]:
        """The cosine of ``vector`` with each of these stored turns of ``user_id``."""
        keys = {point_id(user_id, c, n): (c, n) for c, n in turns}
        found = self.index.scores(vector, user_id, list(keys))
        return {keys[point]: score for point, score in found.items()}

    def search_facts(self, user_id: str, vector: list[float], k: int) -> list[VectorHit]:
        """The user's remembered facts most similar to ``vector`` (none without facts)."""
        facts = self.facts
        return [] if facts is None else facts.search(user_id, vector, k)

    def notify(self) -> None:
        """New turns are queued."""
        if self.worker is not None:
            self.worker.notify()

    def close(self, timeout: float = 30.0) -> None:
        """Stop the worker (waiting at most ``timeout`` s) and close the collections.

        A batch still being written after ``timeout`` keeps the collections open (closing
        them under it could fail the write): the process is exiting, and the batch's turns
        stay queued in tier 2.
        """
        if self.worker is not None and not self.worker.stop(timeout):
            return
        self.index.close()
        if self.facts is not None:
            self.facts.index.close()
