"""Answer F1 on LoCoMo with the user's facts in the prompt and without: does learning pay?

Run from the repository root (the data stays where it is)::

    python benchmarks/bench_answers_facts.py --quick
    python benchmarks/bench_answers_facts.py --conversations 2 --sessions 4 --json /tmp/af.json

The first ``--sessions`` sessions of each of the first ``--conversations`` conversations of a
LoCoMo-format file are stored for a user of their own, as ``memory-chain eval locomo
--answers`` stores them (speaker A as the user, ``"<speaker>: <text>"``; tier 3 filled). Then,
as consolidation would, the :class:`FactExtractor` reads the stored turns of each session
(as said: without the speaker's name), ``--range-turns`` at a time, and files the user's
facts, with the embedded model behind Ollama's API (or the Ollama at ``--llm-url``), the same
model that answers.

Every non-adversarial question whose evidence lies in those sessions (a seeded sample of
``--questions`` when there are more) is asked in a new conversation of the user (deleted
afterwards), so retrieval searches the user's stored conversation, and answered twice from
the same retrieved context: ``facts on`` is ``MemoryManager.retrieve``'s context as the chat
gets it (the user's profile facts in their own section), ``facts off`` the same context with
no facts. Both prompts are built as the chat builds them (:func:`reply_to`) and answered
greedily, at most 64 tokens (:func:`answering_settings`), so the two replies differ by the
facts alone. The order alternates from question to question.

Scored with LoCoMo's answer F1 (:func:`answer_f1`: normalized token overlap with the reference,
multi-hop references per part); a question counts as better or worse with facts when its F1
differs, and the split is tested with the two-sided exact sign test (ties left out).
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_extraction import Settings as ExtractionSettings
from bench_extraction import learn_ranges, locomo_options, served_models
from harness import Run, alternated, configure, fmt, parser, summarize, table, timed

from memory_chain.chat.core import ChatCore
from memory_chain.config import MemorySettings
from memory_chain.eval.answers import (
    ANSWER_HINT,
    answer_f1,
    answering_settings,
    reply_to,
    sample_questions,
)
from memory_chain.eval.crossval import sign_test
from memory_chain.eval.locomo import EvalProgress, ingested
from memory_chain.eval.locomo_data import CATEGORIES, LocomoQuestion, LocomoSample, load_locomo
from memory_chain.extraction import FactExtractor
from memory_chain.manager import MemoryManager
from memory_chain.schemas import MemoryContext

CONDITIONS = ("facts on", "facts off")


@dataclass(frozen=True)
class Settings(ExtractionSettings):
    """The extraction benchmark's settings (the data, the model), and the questions."""

    conversations: int = 2
    sessions: int = 4
    questions: int | None = None
    seed: int = 0


QUICK = {"conversations": 1, "sessions": 2, "questions": 6}


def session_of(dia_id: str) -> int:
    """The session of a LoCoMo turn id ("D3:5" → 3)."""
    return int(dia_id.split(":", maxsplit=1)[0].removeprefix("D"))


def first_sessions(sample: LocomoSample, count: int) -> LocomoSample:
    """``sample`` cut to its first ``count`` sessions, with the questions they answer alone."""
    return LocomoSample(
        sample.sample_id,
        sample.speakers,
        [turn for turn in sample.turns if session_of(turn.dia_id) <= count],
        [q for q in sample.questions if all(session_of(d) <= count for d in q.evidence)],
    )


def user_of(sample: LocomoSample) -> str:
    return f"locomo-{sample.sample_id}"


def run_progress(run: Run) -> EvalProgress:
    """Tell ``run`` when a stage of storing the conversations is done."""

    def notify(stage: str, done: int, total: int) -> None:
        if done == total:
            run.progress(f"{stage}: {total} done")

    return notify


def learn_facts(
    manager: MemoryManager,
    extractor: FactExtractor,
    sample: LocomoSample,
    numbers: dict[str, int],
    range_turns: int,
    run: Run,
) -> tuple[list[str], list[float]]:
    """File the user's facts from the stored turns, session by session.

    Returns the user's current facts after it, and the seconds of each range's extraction.
    """
    user = user_of(sample)
    stored = manager.turns(sample.sample_id, user)
    # Read as said (no "<speaker>: " in front, as the evaluation stores them so that retrieval
    # and the answering model see who spoke): with the name, the 1.5B copied turns whole
    # as facts ("Jon: Ahhahha, really!?"), 6 of the 11 current facts of one run.
    said = {numbers[turn.dia_id]: turn for turn in sample.turns}
    session = {number: session_of(turn.dia_id) for number, turn in said.items()}
    seconds: list[float] = []
    outcomes: Counter[str] = Counter()
    for number in sorted(set(session.values())):
        turns = [
            replace(turn, content=said[turn.turn_number].said)
            for turn in stored
            if session[turn.turn_number] == number
        ]
        label = f"{sample.sample_id} session {number}"
        found, took, _ = learn_ranges(
            extractor,
            user,
            sample.sample_id,
            turns,
            range_turns,
            lambda error, label=label: run.progress(f"{label}: {error}"),
            outcomes=outcomes,
        )
        seconds += took
        run.progress(f"{label}: {len(found)} facts extracted in {sum(took):.0f} s")
    filed = ", ".join(f"{count} {action}" for action, count in outcomes.most_common())
    run.progress(f"{sample.sample_id}: filed {filed or 'nothing'}")
    return [fact.text for fact in manager.facts(user, limit=10_000)], seconds


def without_facts(context: MemoryContext) -> MemoryContext:
    """``context`` with no facts section, and no recalled turn's note of the fact now in its
    place: what the chat would have shown had nothing been learnt."""
    items = tuple(replace(item, note=None) for item in context.items)
    return replace(context, facts=(), items=items)


def retrieved(
    manager: MemoryManager, sample: LocomoSample, question: LocomoQuestion, number: int
) -> tuple[str, MemoryContext, dict[str, Any]]:
    """What the chat's retrieval finds for a question asked in a new conversation of the user
    (deleted afterwards): the message asked, the context, and the question's row."""
    user = user_of(sample)
    asked_in = f"question-{number}"
    text = question.question + ANSWER_HINT
    try:
        context = manager.retrieve(asked_in, user, text)
    finally:
        manager.delete_conversation(asked_in, user)
    row: dict[str, Any] = {
        "conversation": sample.sample_id,
        "question": question.question,
        "reference": question.answer,
        "category": CATEGORIES[question.category],
        "facts": len(context.facts),
        "degraded": list(context.degraded),
    }
    return text, context, row


def ask(
    core: ChatCore, sample: LocomoSample, question: LocomoQuestion, number: int
) -> dict[str, Any]:
    """One question, answered with the facts and without: replies, F1, seconds, facts shown."""
    text, context, row = retrieved(core.manager, sample, question, number)
    contexts = {"facts on": context, "facts off": without_facts(context)}
    for condition in alternated(CONDITIONS, number + 1):
        nanoseconds, reply = timed(reply_to, core, contexts[condition], text)
        row[condition] = {
            "reply": reply,
            "f1": answer_f1(reply, question.answer, question.category),
            "seconds": nanoseconds / 1e9,
        }
    return row


def mean_f1(rows: list[dict[str, Any]], condition: str) -> float:
    return 100 * statistics.fmean(row[condition]["f1"] for row in rows) if rows else 0.0


def report(
    rows: list[dict[str, Any]], learnt: dict[str, list[str]], seconds: list[float]
) -> tuple[list[str], dict[str, Any]]:
    """The printed lines and the JSON figures of a run."""
    timing = summarize([s * 1e9 for s in seconds], unit="ms")
    lines = ["", "facts learnt: " + ", ".join(f"{c} {len(f)}" for c, f in learnt.items())]
    lines.append(
        f"extraction seconds per range ({timing['n']} ranges): p50 "
        f"{fmt(timing.get('p50', 0) / 1000)}, max {fmt(timing.get('max', 0) / 1000)}"
    )
    shown = statistics.fmean(row["facts"] for row in rows) if rows else 0.0
    lines.append(f"\nanswer F1, {len(rows)} questions ({shown:.1f} facts in context on average)")
    groups = {"overall": rows} | {
        c: [row for row in rows if row["category"] == c]
        for c in CATEGORIES.values()
        if any(row["category"] == c for row in rows)
    }
    f1: dict[str, dict[str, float]] = {}
    rows_f1 = []
    for name, group in groups.items():
        on, off = mean_f1(group, "facts on"), mean_f1(group, "facts off")
        f1[name] = {"n": len(group), "facts on": round(on, 1), "facts off": round(off, 1)}
        rows_f1.append((name, len(group), on, off, f"{on - off:+.1f}"))
    lines += table(("", "n", "facts on", "facts off", "on - off"), rows_f1, digits=1)
    better = sum(row["facts on"]["f1"] > row["facts off"]["f1"] for row in rows)
    worse = sum(row["facts on"]["f1"] < row["facts off"]["f1"] for row in rows)
    p = sign_test(better, worse)
    lines.append(
        f"facts on better on {better}, worse on {worse}, tied on {len(rows) - better - worse} "
        f"questions; sign test p = {p:.3f}"
    )
    per_answer = {
        c: round(statistics.median(row[c]["seconds"] for row in rows), 2) if rows else 0.0
        for c in CONDITIONS
    }
    lines.append(
        "median seconds per answer: " + ", ".join(f"{c} {s:.1f}" for c, s in per_answer.items())
    )
    results = {
        "facts_learnt": learnt,
        "range_ms": timing,
        "f1": f1,
        "better": better,
        "worse": worse,
        "sign_test_p": p,
        "seconds_per_answer": per_answer,
        "questions": rows,
    }
    return lines, results


def main() -> None:
    found = parser(__doc__, quick="one conversation, two sessions, at most 6 questions")
    locomo_options(found, "conversations stored (2)", "first sessions of each stored (4)")
    found.add_argument("--questions", type=int, help="ask at most this many (default: all)")
    found.add_argument("--seed", type=int, help="which questions, when there are more (0)")
    args = found.parse_args()
    settings = configure(Settings(), args, QUICK)
    run = Run("answers with facts", packages=("llama-cpp-python", "langchain-ollama"))
    print(run.header())
    loaded, _ = load_locomo(settings.data)
    samples = [first_sessions(s, settings.sessions) for s in loaded[: settings.conversations]]
    chosen = sample_questions(samples, settings.questions or sys.maxsize, seed=settings.seed)
    memory = MemorySettings()
    stages: dict[str, float] = {}
    learnt: dict[str, list[str]] = {}
    seconds: list[float] = []
    rows: list[dict[str, Any]] = []
    with (
        served_models(settings.llm_url, settings.model) as models,
        ingested(
            samples,
            memory,
            run_progress(run),
            stages,
            user_of=user_of,
        ) as (manager, numbers),
    ):
        catalog = models.catalog
        extractor = FactExtractor(
            models.summary, manager.fact_store, model=lambda: catalog.resolve(None)
        )
        for sample in samples:
            learnt[sample.sample_id], took = learn_facts(
                manager, extractor, sample, numbers[sample.sample_id], settings.range_turns, run
            )
            seconds += took
        reply_tokens = answering_settings(memory).llm_max_tokens
        core = ChatCore(manager, models, default_reply_tokens=reply_tokens)
        for number, (sample, question) in enumerate(chosen, start=1):
            rows.append(ask(core, sample, question, number))
            f1 = " / ".join(f"{rows[-1][c]['f1']:.2f}" for c in CONDITIONS)
            run.progress(f"question {number}/{len(chosen)}: F1 on / off {f1}")
    lines, results = report(rows, learnt, seconds)
    run.finish(lines, args.json, settings=settings, results=results | {"stages": stages})


if __name__ == "__main__":
    sys.exit(main())
