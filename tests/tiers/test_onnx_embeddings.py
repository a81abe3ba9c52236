"""The ONNX runtime of the embedding model: same vectors as torch, built once, cached, checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from memory_chain.config import MemorySettings
from memory_chain.errors import EmbeddingModelError
from memory_chain.services import build_embeddings
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings, resolve_model
from memory_chain.tiers.vectors.onnx_build import (
    INFO_FILE,
    build_dir,
    ensure_onnx_model,
    source_fingerprint,
)
from memory_chain.tiers.vectors.onnx_embeddings import OnnxEmbeddings
from memory_chain.tiers.vectors.onnx_session import check_pooling, load_tokenizer

TEXTS = [
    "user: We fly to Lisbon on 3 May with my sister Marta.",
    "assistant: Noted.",
    "Hi",
    "user: " + "a very long message about the garden irrigation schedule " * 60,  # > 256 tokens
    "user: Émile a mangé des crêpes à Paris 🥞",
    *(f"user: reminder number {i} about the tax return" for i in range(70)),
]


@pytest.fixture(scope="module")
def onnx_embeddings() -> OnnxEmbeddings:
    """The default runtime on the shared cache (built by setup, or here on first use)."""
    embeddings = build_embeddings(MemorySettings())
    assert isinstance(embeddings, OnnxEmbeddings)
    return embeddings


def test_default_settings_pick_onnx_float32() -> None:
    settings = MemorySettings()
    assert (settings.embedding_runtime, settings.embedding_quantization) == ("onnx", "none")
    assert isinstance(
        build_embeddings(settings.model_copy(update={"embedding_runtime": "torch"})),
        SentenceEmbeddings,
    )


def test_same_vectors_as_torch(
    onnx_embeddings: OnnxEmbeddings, embeddings: SentenceEmbeddings
) -> None:
    # More texts than a batch, of mixed lengths: the ONNX path reorders them by length.
    ours = np.asarray(onnx_embeddings.embed_documents(TEXTS))
    reference = np.asarray(embeddings.embed_documents(TEXTS))
    assert ours.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * reference).sum(axis=1)
    assert cosines.min() > 0.9999, cosines.argmin()
    query = np.asarray(onnx_embeddings.embed_query(TEXTS[0]))
    assert float(query @ reference[0]) > 0.9999
    assert onnx_embeddings.embed_documents([]) == []


def test_tokenizer_matches_sentence_transformers(embeddings: SentenceEmbeddings) -> None:
    source = Path(resolve_model("all-MiniLM-L6-v2")[0])
    tokenizer = load_tokenizer(source)
    theirs = embeddings.model.tokenizer(TEXTS[:5], truncation=True, max_length=256)["input_ids"]
    assert [e.ids for e in tokenizer.encode_batch(TEXTS[:5])] == theirs
    assert len(theirs[3]) == 256


def test_build_is_cached_and_described(onnx_embeddings: OnnxEmbeddings) -> None:
    onnx_embeddings.embed_query("warm")
    source = Path(resolve_model(onnx_embeddings.model_name)[0])
    model = ensure_onnx_model(source, onnx_embeddings.cache_dir, quantization="none")
    before = model.stat().st_mtime_ns
    assert ensure_onnx_model(source, onnx_embeddings.cache_dir, quantization="none") == model
    assert model.stat().st_mtime_ns == before
    info = json.loads((model.parent / INFO_FILE).read_text())
    assert info["fused_operators"]["Attention"] == 6
    assert min(info["check_cosines"]) > 0.9999


def test_fingerprint_follows_the_source(tmp_path: Path) -> None:
    source = tmp_path / "model"
    source.mkdir()
    (source / "config.json").write_text('{"model_type": "bert"}')
    weights = source / "model.safetensors"
    weights.write_bytes(b"\0" * (2 << 20))  # large: fingerprinted by size and mtime
    first = source_fingerprint(source, "none")
    assert source_fingerprint(source, "none") == first
    assert source_fingerprint(source, "int8") != first
    (source / "config.json").write_text('{"model_type": "bert", "x": 1}')
    second = source_fingerprint(source, "none")
    assert second != first
    os.utime(weights, ns=(1, 1))
    assert source_fingerprint(source, "none") != second
    assert build_dir(source, tmp_path, "none").parent == tmp_path / "onnx"


def test_int8_build_is_close(tmp_path: Path, embeddings: SentenceEmbeddings) -> None:
    settings = MemorySettings(embedding_quantization="int8")
    int8 = build_embeddings(settings)
    ours = np.asarray(int8.embed_documents(TEXTS[:5]))
    cosines = (ours * np.asarray(embeddings.embed_documents(TEXTS[:5]))).sum(axis=1)
    assert 0.95 < cosines.min() < 0.9999  # quantized: close, not equal
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_a_failed_build_says_what_to_do(tmp_path: Path) -> None:
    source = tmp_path / "broken"
    source.mkdir()
    (source / "config.json").write_text("{}")
    with pytest.raises(EmbeddingModelError, match="embedding_runtime=torch"):
        ensure_onnx_model(source, tmp_path / "cache", quantization="none")
    assert not list((tmp_path / "cache" / "onnx").glob("broken-*"))  # nothing half-built kept


def test_unsupported_folders_are_refused(tmp_path: Path) -> None:
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    with pytest.raises(EmbeddingModelError, match="mean pooling only"):
        check_pooling(tmp_path)
    with pytest.raises(EmbeddingModelError, match=r"no tokenizer\.json"):
        load_tokenizer(tmp_path)


@pytest.mark.parametrize(
    ("update", "says"),
    [
        ({"embedding_runtime": "tensorflow"}, "onnx"),
        ({"embedding_quantization": "int4"}, "int8"),
        ({"embedding_model": "someone/some-model-on-a-hub"}, "embedding_runtime=torch"),
    ],
)
def test_bad_embedding_settings_are_refused(update: dict[str, str], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        MemorySettings(**update)  # type: ignore[arg-type]
    MemorySettings(embedding_runtime="torch", embedding_model="someone/some-model-on-a-hub")


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_batch_tokens"):
        OnnxEmbeddings(cache_dir=tmp_path, max_batch_tokens=0)
    with pytest.raises(ValueError, match="batch_size"):
        OnnxEmbeddings(cache_dir=tmp_path, batch_size=0)


def test_embedding_process_never_imports_torch(onnx_embeddings: OnnxEmbeddings) -> None:
    onnx_embeddings.embed_query("built")  # so that the child finds the graph in the cache
    code = (
        "import sys\n"
        "from memory_chain.config import MemorySettings\n"
        "from memory_chain.services import build_embeddings\n"
        "assert len(build_embeddings(MemorySettings()).embed_query('hi')) == 384\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.stdout.strip() == "[]", done.stderr
