"""One ONNX graph of a sentence-transformers model, run: its tokenizer, session and batches.

What both the runtime (:mod:`.onnx_embeddings`) and the build's check (:mod:`.onnx_build`)
run, so that neither imports the other's module for it: the folder's fast tokenizer
(truncated at the model's ``max_seq_length``, as sentence-transformers does), the pooling
check, and :class:`OnnxSession`, which pads encodings to a batch's longest and runs the graph.

:func:`run_in_batches` embeds many texts: longest first, in forward passes of at most
``max_batch_tokens`` padded tokens (each pads little, and small passes keep activations in
cache), with ``workers`` passes at once (ONNX Runtime releases the GIL while it runs, so two
passes of one intra-op thread each keep two cores busy), and returns the vectors in the
order of the input.

Example:
    >>> session = OnnxSession(model, source, threads=1)  # doctest: +SKIP
    >>> vectors = run_in_batches(  # doctest: +SKIP
    ...     session, texts, batch_size=64, max_batch_tokens=256, workers=2
    ... )
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from memory_chain.errors import EmbeddingModelError

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
    """A graph's session and its tokenizer (one per graph and thread count in a process).

    Args:
        model: The ``model.onnx`` file.
        source: The sentence-transformers folder it was built from (its tokenizer).
        threads: ONNX Runtime intra-op threads (``None``: its default, every core).
    """

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


def plan_batches(lengths: Sequence[int], batch_size: int, max_batch_tokens: int) -> list[list[int]]:
    """Positions of texts grouped into forward passes, longest texts first.

    Each pass holds at most ``batch_size`` texts and, padded to its longest, at most
    ``max_batch_tokens`` tokens (a text longer than that runs alone). Every position is in
    exactly one pass.

    Args:
        lengths: Token count of each text.
        batch_size: Most texts per pass.
        max_batch_tokens: Most padded tokens per pass.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        longest = max(1, lengths[order[start]])
        size = max(1, min(batch_size, max_batch_tokens // longest))
        batches.append(order[start : start + size])
        start += size
    return batches


def run_in_batches(
    session: OnnxSession,
    texts: list[str],
    *,
    batch_size: int,
    max_batch_tokens: int,
    workers: int = 1,
) -> Any:
    """Vectors of ``texts`` (not empty), in their order, run longest first in small passes.

    Args:
        session: The graph.
        texts: What to embed.
        batch_size: Most texts per forward pass.
        max_batch_tokens: Most padded tokens per forward pass.
        workers: Forward passes run at once (threads; ONNX Runtime releases the GIL).

    Returns:
        A ``(len(texts), dimension)`` float32 array, row ``i`` the vector of ``texts[i]``.
    """
    encodings = session.encode(texts)
    if len(encodings) == 1:
        return session.run(encodings)
    batches = plan_batches([len(e.ids) for e in encodings], batch_size, max_batch_tokens)

    def passes() -> Iterator[tuple[list[int], Any]]:
        if workers <= 1 or len(batches) == 1:
            for chosen in batches:
                yield chosen, session.run([encodings[i] for i in chosen])
            return
        with ThreadPoolExecutor(min(workers, len(batches))) as pool:
            results = pool.map(lambda chosen: session.run([encodings[i] for i in chosen]), batches)
            yield from zip(batches, results, strict=True)

    out: Any = None
    for chosen, vectors in passes():
        if out is None:
            out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[chosen] = vectors
    return out
