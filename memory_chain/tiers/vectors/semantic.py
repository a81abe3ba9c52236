"""Semantic search: the one object that embeds a query and searches tier 3 with it.

Every reader of tier 3 goes through :class:`SemanticSearch`: the memory manager's retrieval
(:mod:`memory_chain.retrieval`), the LangChain retriever over turns
(:class:`~memory_chain.tiers.vectors.retriever.TurnRetriever`). It holds the turns' index and
the model that embedded them (a query must be embedded by the same model).
:class:`~memory_chain.tiers.vectors.tier.Tier3` is this plus what keeps the index filled.

Example:
    >>> search = SemanticSearch(index, embeddings)  # doctest: +SKIP
    >>> hits = search.find("when do we fly?", VectorFilter(user_id="ana"), 5)  # doctest: +SKIP
    >>> hits[0].payload.turn_number, hits[0].score  # doctest: +SKIP
    (3, 0.71)
"""

from __future__ import annotations

from collections.abc import Iterable

from langchain_core.embeddings import Embeddings

from memory_chain.tiers.vectors.index import (
    TurnPayload,
    VectorFilter,
    VectorHit,
    VectorIndex,
    point_id,
)

#: A turn: ``(conversation_id, turn_number)``.
TurnKey = tuple[str, int]


class SemanticSearch:
    """Embeds queries and searches the turns of tier 3.

    Scores are cosine similarities: higher is more similar, at most 1.0.

    Args:
        index: The turns collection (``conversation_memory``), opened by its owner.
        embeddings: The model that embedded the turns.
    """

    def __init__(self, index: VectorIndex, embeddings: Embeddings) -> None:
        self.index = index
        self.embeddings = embeddings

    def embed_query(self, text: str) -> list[float]:
        """The query's vector (the model that embedded the turns)."""
        return self.embeddings.embed_query(text)

    def search(self, vector: list[float], where: VectorFilter, k: int) -> list[VectorHit]:
        """The ``k`` turns most similar to ``vector`` among those ``where`` selects."""
        return self.index.search(vector, where, k)

    def find(self, query: str, where: VectorFilter, k: int) -> list[VectorHit]:
        """The ``k`` turns most similar to the text ``query``, best first."""
        return self.search(self.embed_query(query), where, k)

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
