"""The retrieval tests' manager: real SQLite keyword search, a real in-memory vector index and
the real embedding model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from memory_chain.manager import MemoryManager
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tiers.vectors.indexer import TurnIndexer
from memory_chain.tiers.vectors.qdrant import QdrantIndex
from memory_chain.tiers.vectors.tier import Tier3


@pytest.fixture
def manager(tmp_path: Path, embeddings: SentenceEmbeddings) -> Iterator[MemoryManager]:
    engine = create_sql_engine(f"sqlite:///{tmp_path / 'memory.db'}")
    upgrade(engine)
    store = SQLStore(engine, queue_embeddings=True)
    index = QdrantIndex(QdrantClient(":memory:"))
    index.open()
    indexer = TurnIndexer(store.outbox(), index, embeddings)
    tier3 = Tier3(index=index, embeddings=embeddings, indexer=indexer)
    yield MemoryManager(store, TurnBuffer(), tier3=tier3)
    engine.dispose()
