"""Answer quality on LoCoMo questions: does what memory finds make the LLM's reply right?

Recall says whether the right turns were found; this says whether the reply the user reads
is right. ``N`` questions are sampled (seeded) from a LoCoMo file, each conversation stored
for a user of its own, and each question is asked three ways with the configured LLM:

- ``memory``: through the real chat chain (:func:`~memory_chain.chain.build_chat_chain`), in a
  new conversation of that user, so the default retrieval searches everything the user said
  (the question's conversation is deleted after the reply: it never becomes memory);
- ``recent``: the same prompt built from the conversation's last turns only (tier 1), no
  retrieval: what a chat app without long-term memory sees;
- ``none``: the question alone.

Replies are scored with LoCoMo's answer F1 (:func:`~memory_chain.eval.answer_score.answer_f1`:
normalized token overlap with the reference answer, a multi-hop reference per part).
Every question gets the suffix :data:`ANSWER_HINT`, the same in every way it is asked. The
model answers greedily (:func:`answering_settings`): the same prompt gets the same reply, so
the three ways differ by their context alone and a run can be repeated.

Example:
    >>> report = evaluate_answers("locomo-dev.json", llm, questions=50)  # doctest: +SKIP
    >>> report.f1["memory"], report.f1["none"]
    (31.5, 6.2)
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from memory_chain.chain import build_chat_chain
from memory_chain.chat.budget import Budget, build_prompt
from memory_chain.chat.core import ChatCore
from memory_chain.chat.models import ModelSource, OneModel
from memory_chain.chat.request import ReplyOptions
from memory_chain.config import MemorySettings
from memory_chain.eval.answer_score import answer_f1
from memory_chain.eval.locomo import EvalProgress, ingested
from memory_chain.eval.locomo_data import CATEGORIES, LocomoQuestion, LocomoSample, load_locomo
from memory_chain.messages import message_text
from memory_chain.schemas import MemoryContext

#: Appended to every question: LoCoMo's answers are short phrases.
ANSWER_HINT = " Answer in a few words."
#: The ways each question is asked, in report order.
CONDITIONS = ("memory", "recent", "none")


def answering_settings(settings: MemorySettings) -> MemorySettings:
    """``settings`` for the model that answers: greedy replies of at most 64 tokens.

    Sampled replies (the chat's ``llm_temperature``) of a small model move the F1 of 40
    questions by points from run to run with nothing else changed; greedy ones depend on the
    prompt only. Answers are a few words: the cap keeps a rambling model from taking minutes.
    """
    return settings.model_copy(update={"llm_max_tokens": 64, "llm_temperature": 0.0})


@dataclass
class AnswerReport:
    """What :func:`evaluate_answers` measured.

    Attributes:
        f1: Condition → mean answer F1 over the questions, in percent.
        per_category: Condition → category → mean F1, in percent.
        questions: Category → questions asked (``"overall"`` too).
        seconds_per_answer: Condition → median seconds per reply.
        examples: A few (question, reference, condition → reply) for reading.
    """

    path: str
    f1: dict[str, float] = field(default_factory=dict)
    per_category: dict[str, dict[str, float]] = field(default_factory=dict)
    questions: dict[str, int] = field(default_factory=dict)
    seconds_per_answer: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""
        return {
            "path": self.path,
            "f1": self.f1,
            "per_category": self.per_category,
            "questions": self.questions,
            "seconds_per_answer": self.seconds_per_answer,
            "seconds": self.seconds,
            "examples": self.examples,
        }


def _user(sample: LocomoSample) -> str:
    return f"locomo-{sample.sample_id}"


def sample_questions(
    samples: Sequence[LocomoSample], count: int, *, seed: int = 0
) -> list[tuple[LocomoSample, LocomoQuestion]]:
    """``count`` questions drawn without replacement (seeded), in file order."""
    every = [(s, q) for s in samples for q in s.questions if q.answer.strip()]
    chosen = sorted(random.Random(seed).sample(range(len(every)), min(count, len(every))))
    return [every[i] for i in chosen]


@dataclass(frozen=True)
class Reply:
    """The model's reply to one prompt.

    Attributes:
        text: What it said.
        prompt_tokens: The prompt's tokens as the model counted them (as the prompt builder
            counted them when the model does not say).
        seconds: From the call to the whole reply.
    """

    text: str
    prompt_tokens: int
    seconds: float


def answer(
    core: ChatCore, context: MemoryContext, question: str, *, window: int | None = None
) -> Reply:
    """The model's reply to ``question`` with ``context``, in a prompt built as the chat builds it.

    Args:
        core: The chat's core (its models and the reply's room).
        context: What goes in the prompt besides the question.
        question: The user's message.
        window: The budget's window (default: the model's): the prompt is built to fit it.
    """
    models = core.models
    model = models.resolve(None)
    budget = Budget.of(
        window=window or model.window, max_tokens=None, default_reply=core.default_reply_tokens
    )
    built = build_prompt(
        system="", context=context, message=question, budget=budget, counter=model.counter
    )
    kwargs = models.call_options(model, ReplyOptions(), budget.reserve)
    started = time.perf_counter()
    reply = models.chat_model(model).invoke(built.messages, **kwargs)
    seconds = time.perf_counter() - started
    usage = getattr(reply, "usage_metadata", None) or {}
    return Reply(message_text(reply), int(usage.get("input_tokens") or built.tokens), seconds)


def reply_to(core: ChatCore, context: MemoryContext, question: str) -> str:
    """The model's reply to ``question`` with ``context``, built as the chat builds prompts."""
    return answer(core, context, question).text


def _ask(
    core: ChatCore,
    sample: LocomoSample,
    question: str,
    number: int,
) -> dict[str, tuple[str, float]]:
    """The reply of every condition, and the seconds it took."""
    user = _user(sample)
    manager = core.manager
    chain = build_chat_chain(core)
    replies: dict[str, tuple[str, float]] = {}
    started = time.perf_counter()
    asked_in = f"question-{number}"
    try:
        reply = chain.invoke(
            {"input": question},
            config={"configurable": {"conversation_id": asked_in, "user_id": user}},
        )
        replies["memory"] = (message_text(reply), time.perf_counter() - started)
    finally:
        manager.delete_conversation(asked_in, user)
    started = time.perf_counter()
    recent = MemoryContext(
        conversation_id=sample.sample_id,
        user_id=user,
        summary=None,
        recent=tuple(manager.recent_turns(sample.sample_id, user)),
        items=(),
    )
    replies["recent"] = (reply_to(core, recent, question), time.perf_counter() - started)
    started = time.perf_counter()
    empty = MemoryContext(asked_in, user, None, (), ())
    replies["none"] = (reply_to(core, empty, question), time.perf_counter() - started)
    return replies


def evaluate_answers(
    path: str | Path,
    llm: BaseChatModel | ModelSource,
    *,
    questions: int,
    settings: MemorySettings | None = None,
    seed: int = 0,
    progress: EvalProgress | None = None,
    postgres_url: str | None = None,
) -> AnswerReport:
    """Answer F1 of ``questions`` sampled LoCoMo questions, with memory, recent turns, none.

    Args:
        path: A LoCoMo-format file.
        llm: The chat model to answer with, or the models of the configured LLM server
            (``memory-chain eval``: its window and token counter bound the prompts).
        questions: How many questions to ask (each is asked three times).
        settings: Embedding and tier-3 settings (the stores go to a temporary folder).
        seed: Which questions are drawn.
        progress: Told of each stage's progress.
        postgres_url: Run on PostgreSQL + pgvector: a scratch database on this server.

    Returns:
        F1 per condition, overall and per category, and the time per reply.

    Raises:
        InvalidInputError: If the file is not LoCoMo-format JSON.
        ValueError: If ``questions`` is not positive.
    """
    if questions < 1:
        raise ValueError("--answers takes a positive number of questions")
    started = time.perf_counter()
    samples, _ = load_locomo(path)
    chosen = sample_questions(samples, questions, seed=seed)
    notify = progress or (lambda _stage, _done, _total: None)
    report = AnswerReport(path=str(path))
    scores: dict[str, dict[str, list[float]]] = {c: {} for c in CONDITIONS}
    seconds: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    used = list(dict.fromkeys(sample.sample_id for sample, _ in chosen))
    stored = [s for s in samples if s.sample_id in used]
    source = OneModel(llm) if isinstance(llm, BaseChatModel) else llm
    reply_tokens = answering_settings(settings or MemorySettings()).llm_max_tokens
    with ingested(
        stored, settings, notify, report.seconds, postgres_url=postgres_url, user_of=_user
    ) as (manager, _):
        core = ChatCore(manager, source, default_reply_tokens=reply_tokens)
        ask_start = time.perf_counter()
        for number, (sample, question) in enumerate(chosen, start=1):
            replies = _ask(core, sample, question.question + ANSWER_HINT, number)
            category = CATEGORIES[question.category]
            for condition, (reply, took) in replies.items():
                f1 = answer_f1(reply, question.answer, question.category)
                scores[condition].setdefault(category, []).append(f1)
                seconds[condition].append(took)
            if len(report.examples) < 5:
                report.examples.append(
                    {
                        "question": question.question,
                        "reference": question.answer,
                        **{c: replies[c][0] for c in CONDITIONS},
                    }
                )
            notify("answering", number, len(chosen))
        report.seconds["answer"] = round(time.perf_counter() - ask_start, 2)
    for condition in CONDITIONS:
        every = [f for rows in scores[condition].values() for f in rows]
        report.f1[condition] = round(100 * statistics.fmean(every), 1)
        report.per_category[condition] = {
            c: round(100 * statistics.fmean(rows), 1) for c, rows in scores[condition].items()
        }
        report.seconds_per_answer[condition] = round(statistics.median(seconds[condition]), 2)
    report.questions = {"overall": len(chosen)} | {
        c: len(rows) for c, rows in scores["memory"].items()
    }
    report.seconds["total"] = round(time.perf_counter() - started, 2)
    return report


def format_answers(report: AnswerReport) -> str:
    """The F1 table (conditions by category) and the time per reply."""
    categories = [c for c in CATEGORIES.values() if c in report.questions]
    header = f"  {'condition':<12}{'F1':>8}" + "".join(f"{c:>13}" for c in categories)
    lines = [
        f"LoCoMo answer F1 ({report.questions.get('overall', 0)} questions): {report.path}",
        header,
    ]
    for condition in CONDITIONS:
        row = report.per_category.get(condition, {})
        lines.append(
            f"  {condition:<12}{report.f1.get(condition, 0.0):>8.1f}"
            + "".join(f"{row.get(c, 0.0):>13.1f}" for c in categories)
        )
    counts = ", ".join(f"{c} {report.questions[c]}" for c in categories)
    lines.append(f"  questions: {counts}")
    per_answer = ", ".join(f"{c} {s:.1f} s" for c, s in report.seconds_per_answer.items())
    lines.append(f"  median per reply: {per_answer}")
    timings = ", ".join(f"{name} {secs:.1f} s" for name, secs in report.seconds.items())
    lines.append(f"  time: {timings}")
    return "\n".join(lines)
