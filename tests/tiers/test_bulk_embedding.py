"""Bulk embedding (import, reindex): passes longest first on every core, vectors in input order."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from pydantic import ValidationError
from qdrant_client import QdrantClient

from memory_chain.config import MemorySettings
from memory_chain.schemas import NewTurn
from memory_chain.services import build_embeddings
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tiers.vectors.indexer import TurnIndexer
from memory_chain.tiers.vectors.onnx_embeddings import OnnxEmbeddings
from memory_chain.tiers.vectors.onnx_session import plan_batches
from memory_chain.tiers.vectors.qdrant import QdrantIndex
from memory_chain.tiers.vectors.tier import Tier3

# Mixed lengths in no order: short greetings, chat turns, a turn over the 256-token window.
TEXTS = [
    "user: hi",
    "assistant: " + "We land in Lisbon at seven and take the train to Sintra after lunch. " * 4,
    "user: ok",
    "user: " + "the garden irrigation schedule changes every week in summer " * 40,
    *(f"user: reminder {i}: " + "pay the tax return " * (i % 9) for i in range(60)),
]
random.Random(7).shuffle(TEXTS)


def test_plan_batches_takes_every_text_once_longest_first_within_the_token_cap() -> None:
    lengths = [5, 300, 40, 40, 7, 120, 1, 64, 64, 64]
    batches = plan_batches(lengths, batch_size=3, max_batch_tokens=130)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= 130
    assert batches[0] == [1]  # longer than the cap: alone


@pytest.fixture(scope="module")
def bulk() -> OnnxEmbeddings:
    embeddings = build_embeddings(MemorySettings(embedding_bulk_workers=2), bulk=True)
    assert isinstance(embeddings, OnnxEmbeddings)
    return embeddings


def test_bulk_vectors_come_back_in_input_order(
    bulk: OnnxEmbeddings, embeddings: SentenceEmbeddings
) -> None:
    assert bulk.workers == 2
    ours = np.asarray(bulk.embed_documents(TEXTS))
    # Each text alone (no batching, no reordering) through the same graph, and through torch.
    alone = np.asarray([bulk.embed_query(text) for text in TEXTS])
    reference = np.asarray(embeddings.embed_documents(TEXTS))
    assert ours.shape == (len(TEXTS), 384)
    assert (ours * alone).sum(axis=1).min() > 0.99999
    assert (ours * reference).sum(axis=1).min() > 0.9999
    one_worker = build_embeddings(MemorySettings())
    np.testing.assert_allclose(ours, np.asarray(one_worker.embed_documents(TEXTS)), atol=1e-5)


def test_bulk_workers_are_a_setting_one_per_core_by_default() -> None:
    assert build_embeddings(MemorySettings()).workers == 1  # type: ignore[attr-defined]
    by_default = build_embeddings(MemorySettings(), bulk=True)
    assert by_default.workers == (os.cpu_count() or 1)  # type: ignore[attr-defined]
    chosen = build_embeddings(MemorySettings(embedding_bulk_workers=3), bulk=True)
    assert chosen.workers == 3  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="embedding_bulk_workers"):
        MemorySettings(embedding_bulk_workers=0)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        OnnxEmbeddings(cache_dir=Path("/nonexistent"), workers=0)
    torch = MemorySettings(embedding_runtime="torch")
    assert isinstance(build_embeddings(torch, bulk=True), SentenceEmbeddings)


def test_the_bulk_path_has_its_own_quantization_float32_by_default() -> None:
    default = MemorySettings()
    assert build_embeddings(default, bulk=True).quantization == "none"  # type: ignore[attr-defined]
    int8 = MemorySettings(embedding_bulk_quantization="int8")
    assert build_embeddings(int8, bulk=True).quantization == "int8"  # type: ignore[attr-defined]
    # Queries and the background worker keep embedding_quantization.
    assert build_embeddings(int8).quantization == "none"  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="embedding_bulk_quantization"):
        MemorySettings(embedding_bulk_quantization="int4")  # type: ignore[arg-type]


class Recording(Embeddings):
    """The real model, noting the size of every documents call."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.calls: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def test_a_bulk_drain_uses_the_bulk_model_in_bulk_batches(
    queued_store: SQLStore, bulk: OnnxEmbeddings
) -> None:
    turns = [NewTurn("user", text) for text in TEXTS[:50]]
    queued_store.append_turns("c1", turns, user_id="ana")
    outbox = queued_store.outbox()
    index = QdrantIndex(QdrantClient(":memory:"))
    index.open()
    background, bulk_model = Recording(build_embeddings(MemorySettings())), Recording(bulk)
    indexer = TurnIndexer(
        outbox, index, background, batch_size=8, bulk_embeddings=bulk_model, bulk_batch_size=32
    )
    tier3 = Tier3(index=index, embeddings=background, indexer=indexer)
    assert tier3.drain() == 50
    assert background.calls == []
    assert sum(bulk_model.calls) >= 50  # a long turn adds parts to its batch
    assert len(bulk_model.calls) == 2  # 32 + 18 turns
    points = {p.id: np.asarray(p.vector) for p in index.scroll()}
    assert len(points) >= 50
    # The background path keeps its small batches and its own model...
    outbox.enqueue()
    assert indexer.drain() == 50
    assert len(background.calls) == 7  # ceil(50 / 8)
    assert len(bulk_model.calls) == 2
    # ...and writes the same vectors to the same points (one graph, rows in input order).
    again = {p.id: np.asarray(p.vector) for p in index.scroll()}
    assert again.keys() == points.keys()
    for id_, vector in points.items():
        assert float(vector @ again[id_]) > 0.99999, id_
