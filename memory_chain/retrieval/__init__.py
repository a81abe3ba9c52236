"""Finding what memory holds for a query: candidates from tiers 2 and 3, fused by score.

- :mod:`.search`: :class:`MemorySearch`, the one retrieval every read path uses.
- :mod:`.fusion`: how keyword scores, cosines and time windows become one score.
- :mod:`.timeframes`: time expressions in a query as windows of turn timestamps.
- :mod:`.retriever`: the same retrieval as a LangChain retriever.
"""

from memory_chain.retrieval.fusion import FusionWeights
from memory_chain.retrieval.search import Found, MemorySearch, RetrievalMode, RetrievalSettings

__all__ = ["Found", "FusionWeights", "MemorySearch", "RetrievalMode", "RetrievalSettings"]
