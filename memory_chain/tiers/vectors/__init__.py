"""Tier 3: embeddings, the vector index (embedded, pgvector or Qdrant), retriever and backfill.

Backends are imported from their modules (:mod:`.edge`, :mod:`.pgvector`, :mod:`.qdrant`) so
that importing this package loads no vector engine and no model.
"""

from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tiers.vectors.index import (
    TurnPayload,
    VectorFilter,
    VectorHit,
    VectorIndex,
    VectorPoint,
    point_id,
)
from memory_chain.tiers.vectors.indexer import TurnIndexer
from memory_chain.tiers.vectors.retriever import TurnRetriever
from memory_chain.tiers.vectors.semantic import SemanticSearch

__all__ = [
    "SemanticSearch",
    "SentenceEmbeddings",
    "TurnIndexer",
    "TurnPayload",
    "TurnRetriever",
    "VectorFilter",
    "VectorHit",
    "VectorIndex",
    "VectorPoint",
    "point_id",
]
