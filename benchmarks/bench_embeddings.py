"""Embedding runtimes side by side: torch, ONNX float32, ONNX int8 (same weights).

Run from the repository root::

    python benchmarks/bench_embeddings.py --locomo ../shared/data/locomo/locomo-dev.json
    python benchmarks/bench_embeddings.py --quick --json /tmp/embeddings.json

Texts are the turns of a LoCoMo-format file as tier 3 embeds them (``"<role>: <content>"``)
and its questions as queries; without ``--locomo`` the benchmarks' template chat turns.
1. Equality: every turn embedded by each runtime; per-sentence cosine to the torch vector
   (min, 1st percentile, mean).
2. ``embed_query``: each question through every runtime in rotating order, one thread each.
3. Ingestion: ``embed_documents`` of batches of 64 turns, runtimes in rotating order per
   batch; sentences/s and the per-batch speed-up over torch (median). The ONNX runtime runs
   a call's texts longest first in forward passes of at most 256 padded tokens; for
   information, the torch path is also timed with ``batch_size=8`` (``torch-b8``), which
   makes it faster per sentence too on this machine.
Ratios are medians of pairs measured back to back, so machine load colours both sides alike.
Goals: ONNX ``embed_query`` p50 <= 0.5x torch's; ingestion >= 2x torch's sentences/s.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from corpus import CITIES, TOPICS
from harness import alternate, goal_line, parser, progress, run_and_report, table, verdict

from memory_chain.config import MemorySettings
from memory_chain.services import build_embeddings
from memory_chain.tiers.vectors.embeddings import LocalEmbeddings, SentenceEmbeddings

GOALS = {"query_p50_ratio": 0.5, "ingest_speedup": 2.0}
RUNTIMES = {"torch": ("torch", "none"), "onnx": ("onnx", "none"), "onnx-int8": ("onnx", "int8")}
#: For information: the torch path with small batches (it too runs faster per sentence).
TORCH_SMALL_BATCH = 8
BATCH = 64


def load_texts(path: Path | None, quick: bool) -> tuple[list[str], list[str]]:
    if path is None:
        turns = [f"user: What did we say about {t} before {c}?" for t in TOPICS for c in CITIES]
        return turns, turns[:50]
    from memory_chain.eval.locomo_data import load_locomo

    samples, _ = load_locomo(path)
    turns, questions = [], []
    for sample in samples[:1] if quick else samples:
        first = sample.speakers[0]
        turns += [
            f"{'user' if t.speaker == first else 'assistant'}: {t.content}" for t in sample.turns
        ]
        questions += [q.question for q in sample.questions]
    return turns, questions


def run(turns: list[str], questions: list[str], queries: int) -> dict[str, Any]:
    started = time.perf_counter()
    models: dict[str, LocalEmbeddings] = {}
    for name, (runtime, quantization) in RUNTIMES.items():
        settings = MemorySettings(embedding_runtime=runtime, embedding_quantization=quantization)
        models[name] = build_embeddings(settings)
        models[name].embed_query("warm up")
    models[f"torch-b{TORCH_SMALL_BATCH}"] = SentenceEmbeddings(batch_size=TORCH_SMALL_BATCH)
    progress("models loaded; equality over every turn", started)
    vectors = {name: np.asarray(models[name].embed_documents(turns)) for name in RUNTIMES}
    equality = {}
    for name in ("onnx", "onnx-int8"):
        cosine = (vectors[name] * vectors["torch"]).sum(axis=1)
        norms = np.linalg.norm(vectors[name], axis=1)
        equality[name] = {
            "min": float(cosine.min()),
            "p1": float(np.percentile(cosine, 1)),
            "mean": float(cosine.mean()),
            "norm_max_error": float(np.abs(norms - 1).max()),
        }
    progress(f"embed_query x {queries}", started)
    embed_query = {name: model.embed_query for name, model in models.items()}
    query = alternate(embed_query, [questions[i % len(questions)] for i in range(queries)])
    progress("ingestion in batches of 64", started)
    batches = [turns[start : start + BATCH] for start in range(0, len(turns) - BATCH + 1, BATCH)]
    embed_documents = {name: model.embed_documents for name, model in models.items()}
    batch = alternate(embed_documents, batches)
    result: dict[str, Any] = {"turns": len(turns), "equality": equality, "runtimes": {}}
    for name in models:
        median_batch_s = float(np.median(batch.samples[name])) / 1e9
        result["runtimes"][name] = {
            "embed_query_ms": query.summary(name),
            "query_p50_ratio": query.ratio(name, "torch"),
            "query_paired_ratio": query.paired_ratio(name, "torch"),
            "batches": len(batch.samples[name]),
            "sentences_per_second": BATCH / median_batch_s,
            "ingest_speedup": batch.paired_ratio("torch", name),
        }
    return result


def report(result: dict[str, Any]) -> list[str]:
    lines = [f"== equality over {result['turns']:,} turns: cosine to the torch vector =="]
    for name, e in result["equality"].items():
        lines.append(
            f"  {name:<10} min {e['min']:.6f}  p1 {e['p1']:.6f}  mean {e['mean']:.6f}  "
            f"max |norm - 1| {e['norm_max_error']:.1e}"
        )
    lines.append("== speed, one thread each, runtimes taking turns ==")
    rows = [
        (name, r["embed_query_ms"]["p50"], r["embed_query_ms"]["p95"], r["query_p50_ratio"],
         r["query_paired_ratio"], round(r["sentences_per_second"]), r["ingest_speedup"])
        for name, r in result["runtimes"].items()
    ]  # fmt: skip
    headers = ("runtime", "query p50", "p95", "x torch", "paired", "sent/s", "x torch")
    lines += table(headers, rows)
    for name in ("onnx", "onnx-int8"):
        r = result["runtimes"][name]
        lines.append(
            goal_line(
                f"{name}: embed_query p50 / torch's",
                f"{r['query_p50_ratio']:.2f}",
                f"<= {GOALS['query_p50_ratio']}",
                verdict(r["query_p50_ratio"], GOALS["query_p50_ratio"], False),
            )
        )
        lines.append(
            goal_line(
                f"{name}: ingestion speed-up over torch",
                f"{r['ingest_speedup']:.2f}",
                f">= {GOALS['ingest_speedup']}",
                verdict(r["ingest_speedup"], GOALS["ingest_speedup"], True),
            )
        )
    return lines


def verdicts(result: dict[str, Any]) -> dict[str, str]:
    """Every goal's ok/MISSED, for the JSON file."""
    return {
        f"{name} {key}": verdict(result["runtimes"][name][key], GOALS[key], key == "ingest_speedup")
        for name in ("onnx", "onnx-int8")
        for key in GOALS
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, quick="one conversation, 60 queries")
    args.add_argument("--locomo", type=Path, help="a LoCoMo-format file (texts, questions)")
    args.add_argument("--queries", type=int, help="embed_query calls per runtime (300)")
    options = args.parse_args(argv)
    turns, questions = load_texts(options.locomo, options.quick)
    queries = options.queries or (60 if options.quick else 300)
    run_and_report(
        "embedding",
        options.json,
        None,
        lambda _settings, _bench: run(turns, questions, queries),
        lambda result, _settings: report(result),
        verdicts=verdicts,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
