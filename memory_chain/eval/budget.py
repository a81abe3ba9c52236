"""Evidence recall within a token budget: what a small local model actually gets to read.

Recall@k counts evidence among the first k results, whatever their length; a model reads a
window of tokens. Here each LoCoMo question is asked as the first message of a new chat, and
for each window (``1,024`` … ``8,192`` tokens, the reply's room kept) the memory context the
chat would send is built (:func:`~memory_chain.chat.budget.build_prompt`: the same
retrieval, the same budget, the same lines). Budget recall is the share of a question's
evidence turns whose text, whole or as an excerpt, is in that context. Beside it, from the
same run and with the same lines:

- ``last_turns``: the conversation's last turns that fit (a chat buffer without retrieval);
- ``top_k``: the first ten retrieved turns concatenated in rank order until the next one
  does not fit (the usual retrieval-augmented prompt).

Tokens are counted with the embedded model's tokenizer when it is installed (else with the
estimate that counts high, as for an Ollama model). With cross-validation the fusion weights
ranking each question are those its fold chose on the other conversations.

Example:
    >>> report = evaluate_budget("locomo-dev.json", budgets=(1024, 2048))  # doctest: +SKIP
    >>> report.methods["memory"].recall[2048]
    87.2
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_chain.chat.budget import PROMPT_OVERHEAD, Budget, build_prompt, check_fits
from memory_chain.chat.core import DEFAULT_REPLY_TOKENS
from memory_chain.chat.lines import MEMORIES_HEADING, instructions, memory_line
from memory_chain.chat.sections import MESSAGE_OVERHEAD
from memory_chain.config import MemorySettings
from memory_chain.eval.crossval.folds import Asked, fold_choices
from memory_chain.eval.crossval.run import gather_questions
from memory_chain.eval.locomo import EVAL_USER, EvalProgress, EvalScope, ingested
from memory_chain.eval.locomo_data import LocomoSample, load_locomo
from memory_chain.manager import MemoryManager
from memory_chain.retrieval import FusionWeights
from memory_chain.schemas import MemoryContext, MemoryItem, Turn
from memory_chain.tokens import EstimatingCounter, TokenCount

DEFAULT_BUDGETS = (1024, 2048, 4096, 8192)
#: What is compared, in report order.
METHODS = ("memory", "top_k", "last_turns")
#: Retrieved turns the ``top_k`` baseline concatenates.
TOP_K = 10
#: The conversation a question is asked in (a new chat: none of its turns are memory).
_ASKED_IN = "budget-question"
_CV_KS = (1, 5, 10, 20)


@dataclass
class BudgetTable:
    """Budget recall of one method.

    Attributes:
        recall: Budget → mean share of evidence turns in the context, in percent.
        per_category: Category → budget → the same.
        tokens: Budget → median tokens of the prompt (memory's context, question, framing).
    """

    recall: dict[int, float]
    per_category: dict[str, dict[int, float]]
    tokens: dict[int, float]


@dataclass
class BudgetReport:
    """What :func:`evaluate_budget` measured."""

    path: str
    budgets: tuple[int, ...]
    scope: EvalScope
    held_out: bool
    counted_with: str
    questions: int = 0
    methods: dict[str, BudgetTable] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""
        return {
            "path": self.path,
            "budgets": list(self.budgets),
            "scope": self.scope,
            "held_out": self.held_out,
            "counted_with": self.counted_with,
            "questions": self.questions,
            "methods": {
                name: {
                    "recall": {str(b): v for b, v in table.recall.items()},
                    "per_category": {
                        c: {str(b): v for b, v in row.items()}
                        for c, row in table.per_category.items()
                    },
                    "tokens": {str(b): v for b, v in table.tokens.items()},
                }
                for name, table in self.methods.items()
            },
            "seconds": self.seconds,
        }


def _found(turns: set[tuple[str, int]], asked: Asked) -> float:
    hits = {number for conversation, number in turns if conversation == asked.conversation}
    return len(asked.evidence & hits) / len(asked.evidence)


class _Packer:
    """The three contexts of one question at one budget, and the evidence each holds."""

    def __init__(self, counter: TokenCount, question: str, budget: Budget) -> None:
        self.counter = counter
        self.question = question
        self.budget = budget
        head = instructions("")
        head_tokens, question_tokens = check_fits(
            budget, counter, head, question, model="the model"
        )
        fixed = head_tokens + question_tokens + 2 * MESSAGE_OVERHEAD + PROMPT_OVERHEAD
        self.fixed = fixed
        self.room = budget.prompt - fixed

    def memory(self, items: Sequence[MemoryItem]) -> tuple[set[tuple[str, int]], int]:
        context = MemoryContext(_ASKED_IN, "eval", None, (), tuple(items))
        built = build_prompt(
            system="", context=context, message=self.question, budget=self.budget,
            counter=self.counter,
        )  # fmt: skip
        held = {
            (entry.conversation_id or "", entry.turn_number or 0)
            for section in built.sections
            if section.name in ("memories", "recent")
            for entry in section.entries
        }
        return held, built.tokens

    def top_k(self, items: Sequence[MemoryItem]) -> tuple[set[tuple[str, int]], int]:
        left = self.room - self.counter.count(MEMORIES_HEADING) - 2
        held: set[tuple[str, int]] = set()
        for item in items[:TOP_K]:
            cost = self.counter.count(memory_line(item, _ASKED_IN)) + 1
            if cost > left:
                break
            left -= cost
            held.add((item.conversation_id, item.turn_number or 0))
        return held, self.budget.prompt - left

    def last_turns(self, turns: Sequence[Turn]) -> tuple[set[tuple[str, int]], int]:
        left = self.room
        held: set[tuple[str, int]] = set()
        for turn in reversed(turns):
            cost = self.counter.count(turn.content) + MESSAGE_OVERHEAD
            if cost > left:
                break
            left -= cost
            held.add((turn.conversation_id, turn.turn_number))
        return held, self.budget.prompt - left


def _table(
    rows: list[tuple[str, dict[int, float], dict[int, int]]], budgets: Sequence[int]
) -> BudgetTable:
    by_category: dict[str, list[dict[int, float]]] = defaultdict(list)
    for category, row, _ in rows:
        by_category[category].append(row)

    def mean(found: list[dict[int, float]]) -> dict[int, float]:
        return {b: round(100 * statistics.fmean(r[b] for r in found), 1) for b in budgets}

    return BudgetTable(
        recall=mean([row for _, row, _ in rows]),
        per_category={c: mean(found) for c, found in by_category.items()},
        tokens={b: float(statistics.median(t[b] for _, _, t in rows)) for b in budgets},
    )


#: Per method, one row per question: its category, budget → evidence share, budget → tokens.
BudgetRows = dict[str, list[tuple[str, dict[int, float], dict[int, int]]]]


def budget_rows(
    manager: MemoryManager,
    samples: Sequence[LocomoSample],
    asked: Sequence[Asked],
    *,
    budgets: Sequence[int],
    counter: TokenCount,
    reply: int,
    weights: dict[str, FusionWeights],
    notify: EvalProgress,
) -> BudgetRows:
    """Each question's evidence share and prompt tokens, per method and budget.

    ``asked`` are the questions of ``samples`` in order, with their candidates
    (:func:`~memory_chain.eval.crossval.run.gather_questions`); each is ranked with the
    weights of its conversation in ``weights`` (the shipped ones when absent).
    """
    rows: BudgetRows = {m: [] for m in METHODS}
    questions = [q for sample in samples for q in sample.questions]
    last = {
        sample.sample_id: manager.turns(sample.sample_id, EVAL_USER)[-200:] for sample in samples
    }
    depth = manager.retrieval.max_items
    for number, (question, one) in enumerate(zip(questions, asked, strict=True), start=1):
        ranked = one.candidates.rank(weights.get(one.conversation, FusionWeights()), depth)
        found: dict[str, dict[int, float]] = {m: {} for m in METHODS}
        tokens: dict[str, dict[int, int]] = {m: {} for m in METHODS}
        for window in budgets:
            budget = Budget.of(window=window, max_tokens=None, default_reply=reply)
            packer = _Packer(counter, question.question, budget)
            for method, (held, used) in {
                "memory": packer.memory(ranked),
                "top_k": packer.top_k(ranked),
                "last_turns": packer.last_turns(last[one.conversation]),
            }.items():
                found[method][window] = _found(held, one)
                tokens[method][window] = used
        for method in METHODS:
            rows[method].append((one.category, found[method], tokens[method]))
        notify("packing", number, len(asked))
    return rows


def budget_tables(rows: BudgetRows, budgets: Sequence[int]) -> dict[str, BudgetTable]:
    """The table of each method (:func:`budget_rows`' rows)."""
    return {m: _table(rows[m], budgets) for m in METHODS}


def evaluate_budget(
    path: str | Path,
    *,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    scope: EvalScope = "conversation",
    cross_validate: bool = False,
    counter: TokenCount | None = None,
    settings: MemorySettings | None = None,
    max_conversations: int | None = None,
    progress: EvalProgress | None = None,
    postgres_url: str | None = None,
) -> BudgetReport:
    """Budget recall of memory's context and of the two baselines (see the module docstring).

    Args:
        path: A LoCoMo-format file.
        budgets: Context windows, in tokens.
        scope: What each question searches (its conversation, or all of the user's).
        cross_validate: Rank each question with the weights its fold chose on the others.
        counter: Counts tokens (default: the embedded model's tokenizer, else the estimate).
        settings: Embedding and tier-3 settings (the stores go to a temporary folder); its
            ``llm_max_tokens`` is the reply's room (at most a quarter of the window).
        max_conversations: Only the first conversations (a CI slice).
        progress: Told of each stage's progress.
        postgres_url: Run on PostgreSQL + pgvector: a scratch database on this server.

    Returns:
        The report.

    Raises:
        ValueError: A budget under 512 tokens, or cross-validation on one conversation.
    """
    budgets = tuple(sorted(set(budgets)))
    if not budgets or budgets[0] < 512:
        raise ValueError("budgets must be context windows of at least 512 tokens")
    started = time.perf_counter()
    samples, _ = load_locomo(path)
    samples = samples[:max_conversations] if max_conversations else samples
    if cross_validate and len(samples) < 2:
        raise ValueError("cross-validation needs at least two conversations")
    if counter is None:
        from memory_chain.local_llm.tokenizer import embedded_model_counter

        counter = embedded_model_counter() or EstimatingCounter()
    counted_with = "estimate" if isinstance(counter, EstimatingCounter) else "embedded model"
    report = BudgetReport(str(path), budgets, scope, cross_validate, counted_with)
    notify = progress or (lambda _stage, _done, _total: None)
    reply = (settings or MemorySettings()).llm_max_tokens or DEFAULT_REPLY_TOKENS
    with ingested(samples, settings, notify, report.seconds, postgres_url=postgres_url) as (
        manager,
        numbers,
    ):
        asked = gather_questions(
            manager, samples, numbers, scope=scope, notify=notify, stage="gathering"
        )
        weights: dict[str, FusionWeights] = {}
        if cross_validate:
            grid, chosen, _ = fold_choices(asked, "hybrid", _CV_KS)
            weights = {conversation: grid[index] for conversation, index in chosen.items()}
        rows = budget_rows(
            manager, samples, asked, budgets=budgets, counter=counter, reply=reply,
            weights=weights, notify=notify,
        )  # fmt: skip
    report.questions = len(asked)
    report.methods = budget_tables(rows, budgets)
    report.seconds["total"] = round(time.perf_counter() - started, 2)
    return report


def format_budget(report: BudgetReport) -> str:
    """The budget-recall table: methods by window, overall then per category."""
    budgets = report.budgets
    held = "held out (leave one conversation out)" if report.held_out else "default weights"
    lines = [
        f"Evidence recall within a token budget: {report.path}",
        f"  {report.questions} questions, {held}; tokens counted with the "
        f"{report.counted_with}{'' if report.counted_with == 'estimate' else ' tokenizer'}",
        f"  {'method / category':<24}" + "".join(f"{f'{b:,}':>9}" for b in budgets),
    ]
    for method, table in report.methods.items():
        lines.append(f"  {method:<24}" + "".join(f"{table.recall[b]:>9.1f}" for b in budgets))
        for category, row in table.per_category.items():
            lines.append(f"    {category:<22}" + "".join(f"{row[b]:>9.1f}" for b in budgets))
    lines.append("  median prompt tokens:")
    for method, table in report.methods.items():
        lines.append(f"    {method:<22}" + "".join(f"{table.tokens[b]:>9.0f}" for b in budgets))
    return "\n".join(lines)
