"""Answers end to end on LoCoMo: memory's context against the whole conversation, by tokens.

Run from the repository root (the data stays where it is)::

    python benchmarks/bench_answers.py --quick
    python benchmarks/bench_answers.py --model-path qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --model qwen2.5-coder:1.5b --samples conv-30,conv-26 --questions 40 --minutes 75 \\
        --json /tmp/answers.json

Each conversation of a LoCoMo-format file (``--samples``, default all, in file order) is
stored for a user of its own, as ``memory-chain eval locomo --answers`` stores it (speaker A
as the user, ``"<speaker>: <text>"``, each session's date on its turns; tier 3 filled). Its
non-adversarial questions (a seeded sample of ``--questions`` per conversation, in a seeded
random order: the file lists them by kind) are asked, one conversation after the other,
each with the answer hint of ``eval/answers.py``, through the chat's own prompt
(:func:`~memory_chain.eval.answers.answer`: ``build_prompt``, greedy, at most 64 reply
tokens), with:

- ``memory 2048`` / ``memory 4096``: what ``MemoryManager.retrieve`` finds for the question,
  asked in a new conversation of the user (deleted afterwards), in a prompt built for a
  window of 2,048 / 4,096 tokens;
- ``whole``: the whole conversation as the recent turns, as far as it fits ``--whole-window``
  tokens (the 1.5B's 32k), each session's date before its first turn
  (:mod:`memory_chain.eval.history_prompt`);
- ``last 4096``: the last turns that fit 4,096 tokens, dated the same way;
- ``none``: the question alone;
- with ``--dates-ablation``: ``memory 4096 -dates``, memory's prompt without the dates its
  lines' relative times name (``"yesterday" = 2023-05-09``, :mod:`memory_chain.chat.lines`),
  beside the same prompt with them;
- with ``--facts``: the facts consolidation learns (the :class:`FactExtractor` over every
  stored turn, ``--range-turns`` at a time, as ``bench_answers_facts.py`` does) in the memory
  prompts (``+facts``), beside the same prompts without them. Extraction with the 1.5B takes
  about 20-30 s per range of 10 turns on 2 shared cores: 15-30 minutes per conversation.

The model is served in this process by the embedded llama.cpp server, once per kind of
prompt (memory and none; whole; last turns), each with its own KV cache: the whole
conversation's prompt (16-26k tokens) is read once per conversation and the prompts of its
later questions, which differ only in the question at the end, reuse the cached prefix
(llama-cpp-python's prefix match), as do the last turns'; ``memory 4096`` reuses what it shares
with ``memory 2048`` (the instructions and the first lines). With ``--llm-url`` one server
serves all of them and the caches evict each other.

``--category temporal`` asks only that kind of question, ``--conditions`` only the conditions
named (comma-separated); the whole conversation and the last turns are served only when asked.

Scored per question with LoCoMo's answer F1 and whether the reply contains the reference
(:mod:`memory_chain.eval.answer_score`), with the prompt's tokens as the model counted them and
the seconds of the reply. Memory and the whole conversation are compared question by question
(:func:`~memory_chain.eval.paired.paired_test`: exact sign test, paired bootstrap 95 %
interval of the mean difference). Nothing is tuned here: the chat's defaults as shipped.
``--minutes`` stops asking new questions after that long; every question answered so far is
in the JSON, written after each question.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest.mock import patch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_answers_facts import learn_facts, retrieved, run_progress, user_of, without_facts
from bench_extraction import DATA, served_models
from harness import Run, configure, parser, table, verdict

from memory_chain.chat.budget import Budget
from memory_chain.chat.core import ChatCore
from memory_chain.config import MemorySettings
from memory_chain.eval.answer_score import answer_f1, contains_answer
from memory_chain.eval.answers import answer, answering_settings, sample_questions
from memory_chain.eval.history_prompt import dated_turns, history_context, turns_that_fit
from memory_chain.eval.locomo import ingested
from memory_chain.eval.locomo_data import CATEGORIES, LocomoQuestion, LocomoSample, load_locomo
from memory_chain.eval.paired import paired_test
from memory_chain.extraction import FactExtractor
from memory_chain.llm import ChatModels
from memory_chain.schemas import MemoryContext, MemoryItem

#: The memory prompts' windows.
MEMORY_WINDOWS = (2048, 4096)
#: The last turns' window: the larger memory budget.
RECENT_WINDOW = 4096
#: The baseline memory is compared with, and the goal's share of its prompt tokens.
WHOLE = "whole"
TOKEN_SHARE_GOAL = 0.25


@dataclass(frozen=True)
class Settings:
    data: Path = DATA
    samples: str | None = None
    questions: int | None = None
    seed: int = 0
    whole_window: int = 32768
    minutes: float | None = None
    facts: bool = False
    range_turns: int = 10
    model_path: Path | None = None
    llm_url: str | None = None
    model: str | None = None
    dates_ablation: bool = False
    category: str | None = None
    conditions: str | None = None
    quick: bool = False


QUICK = {"samples": "conv-30", "questions": 3, "whole_window": 4096}
#: The ablation of the resolved dates: memory's prompt with its lines' dates left out.
NO_DATES = " -dates"


def conditions(facts: bool, dates_ablation: bool = False, only: str | None = None) -> list[str]:
    """The conditions in the order each question is asked them (prefix-sharing pairs).

    Args:
        facts: With the ``+facts`` memory prompts.
        dates_ablation: With ``memory 4096 -dates``: memory's prompt without the dates its
            lines' relative times name (``"yesterday" = 2023-05-09``), the ablation.
        only: Comma-separated conditions to keep (of the others), in the same order.
    """
    memory = [f"memory {w}" for w in MEMORY_WINDOWS]
    with_facts = [f"{name} +facts" for name in memory] if facts else []
    undated = [f"memory {max(MEMORY_WINDOWS)}{NO_DATES}"] if dates_ablation else []
    every = [*with_facts, *memory, *undated, "none", WHOLE, f"last {RECENT_WINDOW}"]
    if not only:
        return every
    wanted = [name.strip() for name in only.split(",")]
    unknown = [name for name in wanted if name not in every]
    if unknown:
        raise SystemExit(f"no condition {', '.join(unknown)}: choose among {', '.join(every)}")
    return [name for name in every if name in wanted]


def _no_dates(item: MemoryItem) -> str:
    return ""


@dataclass
class Asking:
    """What a question is asked with: the chat cores by server, the histories that fit."""

    memory: ChatCore
    whole: ChatCore
    recent: ChatCore
    history: dict[str, MemoryContext]


def histories(core: ChatCore, window: int, sample: LocomoSample) -> MemoryContext:
    """The conversation's last turns that fit ``window`` with any question, dated by session."""
    manager = core.manager
    user = user_of(sample)
    model = core.models.resolve(None)
    budget = Budget.of(window=window, max_tokens=None, default_reply=core.default_reply_tokens)
    turns = dated_turns(manager.turns(sample.sample_id, user))
    return history_context(sample.sample_id, user, turns_that_fit(turns, budget, model.counter))


def ask(
    asking: Asking,
    sample: LocomoSample,
    question: LocomoQuestion,
    number: int,
    names: list[str],
) -> dict[str, Any]:
    """One question asked each way of ``names``: reply, F1, contains, prompt tokens, seconds."""
    text, found, row = retrieved(asking.memory.manager, sample, question, number)
    empty = MemoryContext(f"question-{number}", user_of(sample), None, (), ())
    for condition in names:
        if condition.endswith(NO_DATES):
            window = int(condition.split()[1])
            # The ablation: the memory lines as they read before their relative times were
            # given as dates (the label's one source of them, switched off for this prompt).
            with patch("memory_chain.chat.lines._dates", _no_dates):
                reply = answer(asking.memory, without_facts(found), text, window=window)
        elif condition == WHOLE:
            reply = answer(asking.whole, asking.history[WHOLE], text)
        elif condition.startswith("last"):
            reply = answer(asking.recent, asking.history["last"], text)
        elif condition == "none":
            reply = answer(asking.memory, empty, text)
        else:
            window = int(condition.split()[1])
            context = found if condition.endswith("+facts") else without_facts(found)
            reply = answer(asking.memory, context, text, window=window)
        row[condition] = {
            "reply": reply.text,
            "f1": answer_f1(reply.text, question.answer, question.category),
            "contains": contains_answer(reply.text, question.answer, question.category),
            "prompt_tokens": reply.prompt_tokens,
            "seconds": round(reply.seconds, 2),
        }
    return row


def _mean(rows: list[dict[str, Any]], condition: str, key: str, scale: float = 100) -> float:
    return scale * statistics.fmean(float(row[condition][key]) for row in rows) if rows else 0.0


def report(rows: list[dict[str, Any]], names: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The printed tables and the JSON figures of the questions answered ``names`` ways."""
    categories = [c for c in CATEGORIES.values() if any(r["category"] == c for r in rows)]
    by_category = {c: [r for r in rows if r["category"] == c] for c in categories}
    counts = ", ".join(f"{c} {len(by_category[c])}" for c in categories)
    lines = [f"\nLoCoMo answers, {len(rows)} questions ({counts})"]
    results: dict[str, Any] = {"questions": len(rows), "per_category_n": {}, "conditions": {}}
    body = []
    for name in names:
        seconds = [row[name]["seconds"] for row in rows]
        figures = {
            "f1": round(_mean(rows, name, "f1"), 1),
            "contains": round(_mean(rows, name, "contains"), 1),
            "prompt_tokens": round(_mean(rows, name, "prompt_tokens", 1)),
            "seconds_p50": round(statistics.median(seconds), 1) if rows else 0.0,
            "seconds_mean": round(statistics.fmean(seconds), 1) if rows else 0.0,
            "per_category": {
                c: {
                    "f1": round(_mean(g, name, "f1"), 1),
                    "contains": round(_mean(g, name, "contains"), 1),
                }
                for c, g in by_category.items()
            },
        }
        results["conditions"][name] = figures
        body.append(
            (
                name,
                figures["f1"],
                figures["contains"],
                figures["prompt_tokens"],
                figures["seconds_p50"],
                figures["seconds_mean"],
            )
        )
    lines += table(
        ("condition", "F1", "contains %", "prompt tokens", "s p50", "s mean"), body, digits=1
    )
    lines.append("\nper category, F1 / contains %")
    lines += table(
        ("condition", *(f"{c} ({len(by_category[c])})" for c in categories)),
        [
            (
                name,
                *(
                    f"{results['conditions'][name]['per_category'][c]['f1']:.1f} / "
                    f"{results['conditions'][name]['per_category'][c]['contains']:.1f}"
                    for c in categories
                ),
            )
            for name in names
        ],
    )
    results["per_category_n"] = {c: len(g) for c, g in by_category.items()}
    tests: dict[str, Any] = {}
    pairs = [(f"memory {w}", WHOLE) for w in MEMORY_WINDOWS]
    pairs += [(f"memory {w} +facts", f"memory {w}") for w in MEMORY_WINDOWS]
    pairs += [(f"memory {w}", f"memory {w}{NO_DATES}") for w in MEMORY_WINDOWS]
    pairs = [(first, second) for first, second in pairs if {first, second} <= set(names)]
    lines.append("\npaired, question by question (first - second, points; 95 % bootstrap CI)")
    for first, second in pairs if rows else []:
        for key in ("f1", "contains"):
            test = paired_test(
                [float(r[first][key]) for r in rows], [float(r[second][key]) for r in rows]
            )
            tests[f"{first} - {second}: {key}"] = test.as_dict()
            lines.append(
                f"  {first} - {second}, {key}: {100 * test.mean_difference:+.1f} "
                f"[{100 * test.low:+.1f}, {100 * test.high:+.1f}]; better on {test.better}, "
                f"worse on {test.worse}, tied {test.ties}; sign test p = {test.sign_p:.3f}; "
                + ("outside the noise" if test.outside_noise else "inside the noise")
            )
    results["paired"] = tests
    return lines, results


def verdicts(results: dict[str, Any]) -> dict[str, str]:
    """The issue's goal: memory at least as right as the whole conversation, on a quarter of
    its prompt tokens (the point estimate; the paired interval says how sure)."""
    found = {}
    figures = results.get("conditions", {})
    whole = figures.get(WHOLE)
    for window in MEMORY_WINDOWS:
        memory = figures.get(f"memory {window}")
        if not memory or not whole or not whole["prompt_tokens"]:
            continue
        share = memory["prompt_tokens"] / whole["prompt_tokens"]
        found[f"memory {window} F1 >= whole"] = verdict(memory["f1"] - whole["f1"], 0, True)
        found[f"memory {window} tokens <= 1/4 whole"] = verdict(share, TOKEN_SHARE_GOAL, False)
    return found


def asked_order(
    sample: LocomoSample, count: int, seed: int, category: str | None = None
) -> list[tuple[LocomoSample, LocomoQuestion]]:
    """``count`` of the conversation's questions (seeded; of ``category`` only, when given),
    shuffled: the file lists them by kind, so a run stopped by ``--minutes`` still asks a mix
    of every category."""
    if category is not None:
        kept = [q for q in sample.questions if CATEGORIES.get(q.category) == category]
        sample = replace(sample, questions=kept)
    chosen = sample_questions([sample], count, seed=seed)
    random.Random(seed).shuffle(chosen)
    return chosen


def chosen_samples(settings: Settings) -> list[LocomoSample]:
    loaded, _ = load_locomo(settings.data)
    if not settings.samples:
        return loaded
    wanted = settings.samples.split(",")
    by_id = {sample.sample_id: sample for sample in loaded}
    missing = [name for name in wanted if name not in by_id]
    if missing:
        raise SystemExit(f"no conversation {', '.join(missing)} in {settings.data}")
    return [by_id[name] for name in wanted]


def main() -> None:
    found = parser(__doc__, quick="conv-30, 3 questions, the whole conversation cut to 4,096")
    found.add_argument("--data", type=Path, help=f"a LoCoMo-format file (default {DATA})")
    found.add_argument("--samples", help="conversation ids, comma-separated (default: all)")
    found.add_argument("--questions", type=int, help="per conversation (default: all)")
    found.add_argument("--seed", type=int, help="which questions, when fewer (0)")
    found.add_argument("--whole-window", type=int, help="window of the whole conversation (32768)")
    found.add_argument("--minutes", type=float, help="ask no new question after this long")
    found.add_argument("--facts", action="store_true", default=None, help="learn facts first")
    found.add_argument("--range-turns", type=int, help="turns per extraction range (10)")
    found.add_argument("--model-path", type=Path, help="a GGUF (default: the embedded model)")
    found.add_argument("--llm-url", help="an Ollama API instead, for every condition")
    found.add_argument("--model", help="the model's name (default: the embedded model's)")
    found.add_argument(
        "--dates-ablation",
        action="store_true",
        default=None,
        help="also memory 4096 without the dates its lines' relative times name",
    )
    found.add_argument("--category", choices=sorted(CATEGORIES.values()), help="only these")
    found.add_argument("--conditions", help="only these conditions, comma-separated")
    args = found.parse_args()
    settings = configure(Settings(), args, QUICK)
    names = conditions(settings.facts, settings.dates_ablation, settings.conditions)
    run = Run("answers", packages=("llama-cpp-python", "langchain-ollama"))
    print(run.header())
    samples = chosen_samples(settings)
    per_sample = settings.questions or sys.maxsize
    chosen = [
        pair
        for s in samples
        for pair in asked_order(s, per_sample, settings.seed, settings.category)
    ]
    memory = MemorySettings()
    reply_tokens = answering_settings(memory).llm_max_tokens
    stages: dict[str, float] = {}
    learnt: dict[str, list[str]] = {}
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60 * settings.minutes if settings.minutes else None
    with ExitStack() as stack:

        def serve(window: int) -> ChatModels:
            models = served_models(
                settings.llm_url, settings.model, model_path=settings.model_path, window=window
            )
            return stack.enter_context(models)

        # A server per kind of prompt asked (each with its own KV cache).
        servers = {"memory": serve(max(MEMORY_WINDOWS))}
        servers[WHOLE] = serve(settings.whole_window) if WHOLE in names else servers["memory"]
        needs_last = f"last {RECENT_WINDOW}" in names
        servers["last"] = serve(RECENT_WINDOW) if needs_last else servers["memory"]
        manager, numbers = stack.enter_context(
            ingested(samples, memory, run_progress(run), stages, user_of=user_of)
        )
        cores = {
            name: ChatCore(manager, models, default_reply_tokens=reply_tokens)
            for name, models in servers.items()
        }
        if settings.facts:
            catalog = servers["memory"].catalog
            extractor = FactExtractor(
                servers["memory"].summary, manager.fact_store, model=lambda: catalog.resolve(None)
            )
            began = time.perf_counter()
            for sample in samples:
                learnt[sample.sample_id], _ = learn_facts(
                    manager, extractor, sample, numbers[sample.sample_id], settings.range_turns, run
                )
            stages["facts"] = round(time.perf_counter() - began, 1)
        history: dict[str, dict[str, MemoryContext]] = {}
        for number, (sample, question) in enumerate(chosen, start=1):
            if deadline is not None and time.monotonic() > deadline:
                run.progress(f"--minutes reached: {number - 1} of {len(chosen)} questions asked")
                break
            if sample.sample_id not in history:
                history[sample.sample_id] = {
                    WHOLE: histories(cores[WHOLE], settings.whole_window, sample),
                    "last": histories(cores["last"], RECENT_WINDOW, sample),
                }
            asking = Asking(cores["memory"], cores[WHOLE], cores["last"], history[sample.sample_id])
            rows.append(ask(asking, sample, question, number, names))
            f1 = ", ".join(
                f"{c} {rows[-1][c]['f1']:.2f}/{rows[-1][c]['seconds']:.0f}s" for c in names
            )
            run.progress(f"question {number}/{len(chosen)} ({sample.sample_id}): {f1}")
            run.write_json(args.json, settings=settings, partial={"rows": rows})
    turns = {
        sample_id: {name: len(context.recent) for name, context in kept.items()}
        for sample_id, kept in history.items()
    }
    lines, results = report(rows, names)
    lines.append("turns in the history prompts: " + str(turns))
    run.finish(
        lines,
        args.json,
        settings=settings,
        results=results
        | {"stages": stages, "facts_learnt": learnt, "history_turns": turns, "rows": rows},
        verdicts=verdicts(results),
    )


if __name__ == "__main__":
    sys.exit(main())
