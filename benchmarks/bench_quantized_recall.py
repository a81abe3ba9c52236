"""Held-out LoCoMo recall with int8 turn vectors: may a bulk import embed with int8?

A bulk import (``memory-chain import``, ``reindex``) embeds queued turns with the model of
``embedding_bulk_quantization``; live queries use ``embedding_quantization``. Three stores are
filled from the same file in one process and cross-validated leave-one-conversation-out (the
same folds and grids as ``memory-chain eval locomo FILE --cross-validate``):

- ``fp32``: turns and queries in float32 (the shipped model, both ways);
- ``int8-turns``: turns int8, queries float32 (what an int8 bulk import leaves in a store
  whose live queries keep float32);
- ``int8``: turns and queries int8.

For the hybrid and the dense modes it prints held-out Recall@k overall and for the temporal
questions, beside keyword-only (no vectors: the same in every store, measured once), and
compares each int8 variant with ``fp32`` question by question: on how many questions its
held-out recall@k is higher, on how many lower, and the two-sided sign test's p of that
split. The verdict: the int8 turns keep the hybrid's recall when, at every k, the sign test
finds no difference (p >= 0.05) and the pooled recall moved by at most one point.

Run from the repository root::

    python benchmarks/bench_quantized_recall.py [--locomo ../shared/data/locomo/locomo-dev.json]
        [--json out.json]
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import Run, goal_line, parser, progress, table

from memory_chain.config import MemorySettings
from memory_chain.eval.crossval import gather_questions
from memory_chain.eval.crossval.folds import cross_validate, paired_counts, pooled
from memory_chain.eval.locomo import DEFAULT_KS, RecallTable, ingested
from memory_chain.eval.locomo_data import load_locomo
from memory_chain.retrieval import RetrievalMode

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
#: Variant -> (turns, queries) quantization.
VARIANTS: dict[str, tuple[str, str]] = {
    "fp32": ("none", "none"),
    "int8-turns": ("int8", "none"),
    "int8": ("int8", "int8"),
}
VECTOR_MODES: tuple[RetrievalMode, ...] = ("hybrid", "dense")
#: The most the pooled held-out recall may move (points) for int8 turns to be within noise.
MAX_POINTS = 1.0
#: The sign test's p below which a per-question split is a difference.
ALPHA = 0.05


def _quiet(stage: str, done: int, total: int) -> None:
    if done == total:
        progress(f"{stage} {done}/{total}")


def _measure(path: Path, ks: tuple[int, ...]) -> dict[str, Any]:
    """Every variant's held-out recall rows per mode, and keyword-only's once."""
    samples, _ = load_locomo(path)
    rows: dict[str, dict[str, list[dict[int, float]]]] = {}
    tables: dict[str, dict[str, RecallTable]] = {}
    seconds: dict[str, dict[str, float]] = {}
    asked_order: list[Any] = []
    for variant, (turns, queries) in VARIANTS.items():
        progress(f"{variant}: turns {turns}, queries {queries}")
        settings = MemorySettings(embedding_bulk_quantization=turns, embedding_quantization=queries)
        rows[variant], tables[variant], seconds[variant] = {}, {}, {}
        modes: tuple[RetrievalMode, ...] = VECTOR_MODES
        if variant == "fp32":
            modes = (*VECTOR_MODES, "keyword")
        with ingested(samples, settings, _quiet, seconds[variant]) as (manager, numbers):
            saved = manager.retrieval
            for mode in modes:
                manager.retrieval = replace(saved, mode=mode)
                asked = gather_questions(
                    manager, samples, numbers, scope="conversation", notify=_quiet,
                    stage=f"gathering ({variant}, {mode})",
                )  # fmt: skip
                held, _folds = cross_validate(asked, mode, ks)
                name = "keyword" if mode == "keyword" else mode
                rows[variant][name] = held
                tables[variant][name] = pooled(asked, held, ks)
                asked_order = asked
            manager.retrieval = saved
    paired: dict[str, dict[str, Any]] = {}
    for variant in ("int8-turns", "int8"):
        paired[variant] = {}
        for mode in VECTOR_MODES:
            # The pooled comparison is the last one (conversation None).
            pooled_pair = paired_counts(asked_order, rows[variant][mode], rows["fp32"][mode], ks)[
                -1
            ]
            paired[variant][mode] = {
                "better": pooled_pair.better,
                "worse": pooled_pair.worse,
                "p": pooled_pair.p,
            }
    return {"tables": tables, "paired": paired, "seconds": seconds}


def _figures(t: RecallTable, ks: tuple[int, ...]) -> list[float]:
    temporal = t.per_category.get("temporal", {})
    return [t.recall[k] for k in ks] + [temporal.get(k, 0.0) for k in ks]


def _report(result: dict[str, Any], ks: tuple[int, ...]) -> tuple[list[str], dict[str, str]]:
    tables: dict[str, dict[str, RecallTable]] = result["tables"]
    headers = (
        "variant", "mode", *(f"R@{k}" for k in ks), *(f"temp R@{k}" for k in ks), "questions",
    )  # fmt: skip
    body: list[list[object]] = []
    for variant in VARIANTS:
        for mode in VECTOR_MODES:
            t = tables[variant][mode]
            body.append([variant, mode, *_figures(t, ks), t.questions["overall"]])
    keyword = tables["fp32"]["keyword"]
    body.append(["(no vectors)", "keyword", *_figures(keyword, ks), keyword.questions["overall"]])
    lines = ["held-out recall (leave one conversation out), each question in its conversation"]
    lines += table(headers, body, digits=1)
    lines.append("question by question against fp32: higher / lower (sign test p), per k")
    verdicts: dict[str, str] = {}
    for variant, modes in result["paired"].items():
        for mode, pair in modes.items():
            cells = "  ".join(
                f"R@{k} {pair['better'][k]}/{pair['worse'][k]} (p {pair['p'][k]:.2f})" for k in ks
            )
            lines.append(f"  {variant:<11}{mode:<7}{cells}")
    for variant in ("int8-turns", "int8"):
        pair = result["paired"][variant]["hybrid"]
        moved = max(
            abs(tables[variant]["hybrid"].recall[k] - tables["fp32"]["hybrid"].recall[k])
            for k in ks
        )
        lowest = min(pair["p"][k] for k in ks)
        label = f"{variant}: hybrid within noise of fp32 (max |d| points, min p)"
        ok = moved <= MAX_POINTS and lowest >= ALPHA
        verdicts[label] = "ok" if ok else "MISSED"
        goal = f"<= {MAX_POINTS}, >= {ALPHA}"
        lines.append(goal_line(label, f"{moved:.1f}, {lowest:.2f}", goal, verdicts[label]))
    return lines, verdicts


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--locomo", type=Path, default=DEFAULT, help="a LoCoMo-format file")
    options = args.parse_args()
    ks = tuple(DEFAULT_KS)
    run = Run("held-out recall with int8 embeddings", packages=("onnxruntime",))
    print(run.header())
    result = _measure(options.locomo, ks)
    lines, verdicts = _report(result, ks)
    tables = result["tables"]
    results = {
        "locomo": str(options.locomo),
        "held_out": {
            variant: {
                mode: {
                    "recall": {str(k): v for k, v in t.recall.items()},
                    "per_category": {
                        c: {str(k): v for k, v in row.items()} for c, row in t.per_category.items()
                    },
                    "questions": t.questions,
                }
                for mode, t in modes.items()
            }
            for variant, modes in tables.items()
        },
        "against_fp32": {
            variant: {
                mode: {key: {str(k): v for k, v in pair[key].items()} for key in pair}
                for mode, pair in modes.items()
            }
            for variant, modes in result["paired"].items()
        },
        "seconds": result["seconds"],
    }
    run.finish(lines, options.json, results=results, verdicts=verdicts)


if __name__ == "__main__":
    main()
