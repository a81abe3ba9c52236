"""Finding what memory holds for a query: candidates from tiers 2 and 3, fused by score.

- :mod:`.search`: :class:`MemorySearch`, the one retrieval every read path uses.
- :mod:`.settings`: :class:`RetrievalSettings`, its depths, mode and weights.
- :mod:`.candidates` and :mod:`.neighbours`: what the sources found, and the turns around it.
- :mod:`.fusion`: how keyword scores, cosines and time windows become one score.
- :mod:`.timeframes`: time expressions in a query as windows of turn timestamps.
- :mod:`.retriever`: the same retrieval as a LangChain retriever.
"""

from memory_chain.retrieval.fusion import FusionWeights
from memory_chain.retrieval.search import Found, MemorySearch
from memory_chain.retrieval.settings import RetrievalMode, RetrievalSettings

__all__ = ["Found", "FusionWeights", "MemorySearch", "RetrievalMode", "RetrievalSettings"]
