"""``(user_id, label, ...)`` in ``MemoryStore``: what the agent keeps, durably, in tier 2.

Any namespace of a user other than ``"facts"`` and ``"conversations"`` holds the agent's own
items: what a tool writes with ``runtime.store.put``, or LangGraph's memory tools. They are
rows of ``store_items`` (:mod:`memory_chain.tiers.sql.store_items`), on SQLite or
PostgreSQL like the rest of tier 2, and go when the user is erased.

A query ranks the items by the cosine of their text to the query, embedded by the model
that embeds turns; the text is every string in the value, or the fields ``index=[...]``
names (``index=False``: the item is listed, never scored, and follows the scored ones).
Without an embedding model (tier 3 off) the score is the share of the query's words the
text holds. A query ranks; the filter alone selects.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from memory_chain.errors import MemoryChainError
from memory_chain.integrations.store_common import Hit, Query, normalized, search_text
from memory_chain.schemas import validate_id
from memory_chain.tiers.sql.store_items import StoredItem, StoreItems

logger = logging.getLogger(__name__)


def _hit(item: StoredItem, score: float | None = None) -> Hit:
    return Hit(
        namespace=(item.user_id, *item.namespace),
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


class AgentNamespace:
    """The user's own namespaces (see the module docstring).

    Args:
        items: The rows.
        embeddings: The model that embeds items and queries (``None``: words only).
    """

    def __init__(self, items: StoreItems, embeddings: Embeddings | None) -> None:
        self.items = items
        self.embeddings = embeddings

    def get(self, user_id: str, path: tuple[str, ...], key: str) -> Hit | None:
        """The item, or ``None``."""
        item = self.items.get(user_id, path, validate_id(key, "key"))
        return _hit(item) if item is not None else None

    def put(
        self,
        user_id: str,
        path: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Any,
    ) -> None:
        """Store the item (embedded now when there is a model; else at its first search)."""
        validate_id(key, "key")
        text = search_text(value, index)
        vector = self._embed([text])[0] if text is not None else None
        self.items.put(user_id, path, key, value, search_text=text, embedding=vector)

    def delete(self, user_id: str, path: tuple[str, ...], key: str) -> None:
        """Delete the item."""
        self.items.delete(user_id, path, validate_id(key, "key"))

    def search(
        self, user_id: str, path: tuple[str, ...], query: Query | None, want: int | None
    ) -> list[Hit]:
        """The items under ``path``: last stored first, or scored for the query."""
        items = self.items.under(user_id, path)
        if query is None:
            return [_hit(item) for item in items[:want]]
        vector = query.vector()
        if vector is None:
            return [_hit(item, query.words_score(item.search_text)) for item in items]
        vectors = self._vectors(user_id, items, vector.nbytes)
        return [
            _hit(item, float(vectors[i] @ vector) if i in vectors else None)
            for i, item in enumerate(items)
        ]

    def _vectors(self, user_id: str, items: list[StoredItem], size: int) -> dict[int, np.ndarray]:
        """The vector of each searchable item (by position), embedding those without one."""
        vectors = {
            i: np.frombuffer(item.embedding, dtype="<f4")
            for i, item in enumerate(items)
            if item.embedding and len(item.embedding) == size
        }
        missing = [
            i for i, item in enumerate(items) if item.search_text is not None and i not in vectors
        ]
        if missing:
            texts = [items[i].search_text or "" for i in missing]
            late = {}
            for i, text, blob in zip(missing, texts, self._embed(texts), strict=True):
                if blob is not None:
                    vectors[i] = np.frombuffer(blob, dtype="<f4")
                    late[(items[i].namespace, items[i].key)] = (text, blob)
            if late:
                self.items.set_embeddings(user_id, late)
        return vectors

    def _embed(self, texts: list[str]) -> list[bytes | None]:
        """Vectors as stored (normalized float32), or ``None`` each without a model."""
        if self.embeddings is None:
            return [None] * len(texts)
        try:
            vectors = self.embeddings.embed_documents(texts)
        except MemoryChainError as exc:
            logger.warning("store items not embedded (found by their words): %s", exc)
            return [None] * len(texts)
        return [normalized(vector).astype("<f4").tobytes() for vector in vectors]
