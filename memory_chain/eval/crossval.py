"""Leave-one-conversation-out cross-validation of the fusion weights on a LoCoMo file.

Tuning retrieval on the conversations it is then measured on overstates its recall. Here each
conversation is held out in turn: the weights (:class:`~memory_chain.retrieval.FusionWeights`)
that do best on the other conversations (the sum of Recall@k over every k) are chosen from a
grid, and the held-out conversation is measured with them. The held-out figures, pooled over
questions, are what to expect on conversations nobody tuned on; the report also gives, for
every mode, which weights each fold chose (weights that differ between folds are a sign of
overfitting) and the whole file ranked with the shipped defaults.

A fold of a few dozen questions moves by one question's worth of recall (over a point) with
any change, so the hybrid is also compared with each other mode question by question: per
fold and k, on how many questions its held-out recall is higher and on how many lower, and
the two-sided sign test of those counts (:func:`sign_test`). A fold where a mode is behind
by a few questions at a p of 0.5 is not evidence that it is worse there.

Every mode is measured the same way: ``hybrid`` tunes every weight, ``keyword`` only the time
bonus, ``dense`` every weight but the keyword one. Candidates are gathered once per question
(the same :meth:`MemorySearch.gather <memory_chain.retrieval.MemorySearch.gather>` a chat
uses) and ranked under each grid point, so a run costs one evaluation plus the ranking.

Example:
    >>> report = cross_validate_locomo("locomo-dev.json")  # doctest: +SKIP
    >>> report.held_out["hybrid"].recall[10]
    76.9
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

from memory_chain.config import MemorySettings
from memory_chain.eval.locomo import (
    DEFAULT_KS,
    EVAL_USER,
    EvalProgress,
    EvalScope,
    RecallTable,
    evidence_turns,
    found_turns,
    ingested,
    latency_summary,
    recall_row,
    recall_table,
    searched,
)
from memory_chain.eval.locomo_data import CATEGORIES, LocomoSample, load_locomo
from memory_chain.eval.report import SCOPE_WORDS, latency_lines, recall_lines
from memory_chain.eval.stores import backend_name
from memory_chain.manager import MemoryManager
from memory_chain.retrieval import FusionWeights, RetrievalMode
from memory_chain.retrieval.candidates import Candidates

#: The grid searched per mode: weight name → values (the others stay at their defaults).
#: Every rule of fusion has 0 among its values, which turns it off: each fold chooses which
#: rules to use, not only how much, from the other conversations alone.
GRIDS: dict[RetrievalMode, dict[str, tuple[Any, ...]]] = {
    "hybrid": {
        "keyword": (0.3, 0.4, 0.5),
        "answer_of_question": (0.0, 0.3, 0.6),
        "question_penalty": (0.0, 0.2),
        "time": (0.0, 0.3, 0.6),
        "when": (0.0, 0.15, 0.3),
        "when_keyword": (0.4, 0.6, 0.8, 1.0),
    },
    "keyword": {
        "time": (0.0, 0.3, 0.5, 0.7, 1.0),
        "when": (0.0, 0.15, 0.3),
    },
    "dense": {
        "answer_of_question": (0.0, 0.3, 0.6),
        "question_penalty": (0.0, 0.2),
        "time": (0.0, 0.3, 0.6),
        "when": (0.0, 0.15, 0.3),
    },
}


@dataclass
class Asked:
    """A question asked: its conversation, category, evidence turns and gathered candidates."""

    conversation: str
    category: str
    evidence: set[int]
    candidates: Candidates


@dataclass
class Timings:
    """Per-question times, in ms: retrieval to ``depth`` items, and the query's embedding."""

    depth: int
    retrieval: list[float] = field(default_factory=list)
    embedding: list[float] = field(default_factory=list)


@dataclass
class FoldResult:
    """One held-out conversation of one mode."""

    conversation: str
    weights: dict[str, Any]
    recall: dict[int, float]
    questions: int


@dataclass
class Paired:
    """The hybrid's held-out recall against another mode's, question by question.

    Attributes:
        conversation: The held-out conversation, or ``None`` (every fold pooled).
        better: k → questions where the hybrid's recall@k is higher.
        worse: k → questions where it is lower (the others are ties).
        p: k → the two-sided sign test of ``better`` against ``worse``.
    """

    conversation: str | None
    better: dict[int, int]
    worse: dict[int, int]
    p: dict[int, float]


@dataclass
class CrossValReport:
    """What :func:`cross_validate_locomo` measured.

    Attributes:
        held_out: Mode → recall pooled over every held-out fold (question-weighted).
        folds: Mode → each fold's chosen weights and held-out recall.
        whole_file: Mode → recall of the whole file with the shipped default weights.
        hybrid_against: Mode → the hybrid compared with it, per fold then pooled
            (:class:`Paired`; when the hybrid and that mode are both measured).
        defaults: The shipped default weights.
        backend: The stores the run used (:func:`.stores.backend_name`).

    Each held-out table's ``latency_ms`` is the time of one retrieval (gathering the
    candidates and ranking them, what :meth:`MemorySearch.find` does) and ``embedding_ms``
    that of embedding the question alone, timed right before it.
    """

    path: str
    ks: tuple[int, ...]
    scope: EvalScope = "conversation"
    backend: str = backend_name(None)
    held_out: dict[str, RecallTable] = field(default_factory=dict)
    folds: dict[str, list[FoldResult]] = field(default_factory=dict)
    whole_file: dict[str, RecallTable] = field(default_factory=dict)
    hybrid_against: dict[str, list[Paired]] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""

        def table(t: RecallTable) -> dict[str, Any]:
            return {
                "recall": {str(k): v for k, v in t.recall.items()},
                "per_category": {
                    c: {str(k): v for k, v in row.items()} for c, row in t.per_category.items()
                },
                "questions": t.questions,
                "latency_ms": t.latency_ms,
                "embedding_ms": t.embedding_ms,
            }

        return {
            "path": self.path,
            "scope": self.scope,
            "backend": self.backend,
            "held_out": {mode: table(t) for mode, t in self.held_out.items()},
            "whole_file": {mode: table(t) for mode, t in self.whole_file.items()},
            "folds": {
                mode: [
                    {
                        "conversation": f.conversation,
                        "weights": f.weights,
                        "recall": {str(k): v for k, v in f.recall.items()},
                        "questions": f.questions,
                    }
                    for f in folds
                ]
                for mode, folds in self.folds.items()
            },
            "hybrid_against": {
                mode: [
                    {
                        "conversation": c.conversation,
                        "better": {str(k): v for k, v in c.better.items()},
                        "worse": {str(k): v for k, v in c.worse.items()},
                        "p": {str(k): v for k, v in c.p.items()},
                    }
                    for c in compared
                ]
                for mode, compared in self.hybrid_against.items()
            },
            "defaults": self.defaults,
            "seconds": self.seconds,
        }


def _grid(mode: RetrievalMode) -> list[FusionWeights]:
    grid = GRIDS[mode]
    return [
        replace(FusionWeights(), **dict(zip(grid, values, strict=True)))
        for values in itertools.product(*grid.values())
    ]


def _recalls(
    asked: Sequence[Asked], weights: FusionWeights, ks: Sequence[int]
) -> list[dict[int, float]]:
    depth = max(ks)
    return [
        recall_row(found_turns(a.candidates.rank(weights, depth), a.conversation), a.evidence, ks)
        for a in asked
    ]


def _mean(rows: Sequence[dict[int, float]], ks: Sequence[int]) -> dict[int, float]:
    return {k: round(100 * statistics.fmean(row[k] for row in rows), 1) for k in ks}


def _pooled(
    asked: Sequence[Asked], rows: Sequence[dict[int, float]], ks: Sequence[int]
) -> RecallTable:
    by_category: dict[str, list[dict[int, float]]] = defaultdict(list)
    for question, row in zip(asked, rows, strict=True):
        by_category[question.category].append(row)
    return recall_table(by_category, [], ks)


def _changed(weights: FusionWeights, mode: RetrievalMode) -> dict[str, Any]:
    return {
        name: (value.days if isinstance(value, timedelta) else value)
        for name in GRIDS[mode]
        for value in [getattr(weights, name)]
    }


def sign_test(better: int, worse: int) -> float:
    """The two-sided exact sign test: how likely a split at least this uneven is by chance.

    Args:
        better: Pairs where the first is ahead.
        worse: Pairs where the second is ahead (ties are left out before).

    Returns:
        The p-value, 1.0 with no pairs.
    """
    pairs = better + worse
    tail = sum(math.comb(pairs, i) for i in range(min(better, worse) + 1))
    return min(1.0, float(Fraction(2 * tail, 1 << pairs)))


def _paired(
    asked: Sequence[Asked],
    hybrid: Sequence[dict[int, float]],
    other: Sequence[dict[int, float]],
    ks: Sequence[int],
) -> list[Paired]:
    """Per fold, then pooled, the questions where ``hybrid`` finds more or less than ``other``.

    Row ``i`` of both is question ``i`` of ``asked`` (every mode asks them in the same order).
    """
    groups: dict[str | None, list[int]] = {}
    for i, question in enumerate(asked):
        groups.setdefault(question.conversation, []).append(i)
    groups[None] = list(range(len(asked)))
    compared: list[Paired] = []
    for conversation, indexes in groups.items():
        better = {k: sum(hybrid[i][k] > other[i][k] for i in indexes) for k in ks}
        worse = {k: sum(hybrid[i][k] < other[i][k] for i in indexes) for k in ks}
        p = {k: round(sign_test(better[k], worse[k]), 3) for k in ks}
        compared.append(Paired(conversation, better, worse, p))
    return compared


def fold_choices(
    asked: Sequence[Asked], mode: RetrievalMode, ks: Sequence[int]
) -> tuple[list[FusionWeights], dict[str, int], list[list[dict[int, float]]]]:
    """Leave one conversation out: the grid point each fold chooses on the others.

    Returns:
        The grid, conversation → index of the weights chosen without it, and the recall of
        every question under every grid point (computed once).
    """
    grid = _grid(mode)
    table = [_recalls(asked, weights, ks) for weights in grid]
    chosen: dict[str, int] = {}
    for conversation in dict.fromkeys(a.conversation for a in asked):
        train = [i for i, a in enumerate(asked) if a.conversation != conversation]

        def fit(j: int, train: list[int] = train) -> float:
            return sum(_mean([table[j][i] for i in train], ks).values())

        chosen[conversation] = max(range(len(grid)), key=fit)
    return grid, chosen, table


def _cross_validate(
    asked: Sequence[Asked], mode: RetrievalMode, ks: Sequence[int]
) -> tuple[list[dict[int, float]], list[FoldResult]]:
    grid, chosen, table = fold_choices(asked, mode, ks)
    held: list[dict[int, float] | None] = [None] * len(asked)
    folds: list[FoldResult] = []
    for conversation, best in chosen.items():
        test = [i for i, a in enumerate(asked) if a.conversation == conversation]
        for i in test:
            held[i] = table[best][i]
        folds.append(
            FoldResult(
                conversation,
                _changed(grid[best], mode),
                _mean([table[best][i] for i in test], ks),
                len(test),
            )
        )
    return [row for row in held if row is not None], folds


def gather_questions(
    manager: MemoryManager,
    samples: Sequence[LocomoSample],
    numbers: dict[str, dict[str, int]],
    *,
    scope: EvalScope,
    notify: EvalProgress,
    stage: str,
    timings: Timings | None = None,
) -> list[Asked]:
    """Every question of ``samples`` with its candidates, gathered once (the chat's search).

    With ``timings``, each question is also embedded alone and timed, then its retrieval
    (gathering and ranking with the shipped weights, as :meth:`MemorySearch.find` does).
    """
    asked: list[Asked] = []
    total = sum(len(s.questions) for s in samples)
    tier3 = manager.tier3
    for sample in samples:
        for question in sample.questions:
            if timings is not None and tier3 is not None:
                t0 = time.perf_counter()
                tier3.embed_query(question.question)
                timings.embedding.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            candidates = manager.memory_search.gather(
                question.question, user_id=EVAL_USER, conversation_id=searched(sample, scope)
            )
            if timings is not None:
                candidates.rank(manager.memory_search.settings.weights, timings.depth)
                timings.retrieval.append((time.perf_counter() - t0) * 1000)
            asked.append(
                Asked(
                    sample.sample_id,
                    CATEGORIES[question.category],
                    evidence_turns(sample, question, numbers),
                    candidates,
                )
            )
            notify(stage, len(asked), total)
    return asked


def cross_validate_locomo(
    path: str | Path,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    modes: Sequence[RetrievalMode] = ("hybrid", "keyword", "dense"),
    scope: EvalScope = "conversation",
    settings: MemorySettings | None = None,
    progress: EvalProgress | None = None,
    postgres_url: str | None = None,
) -> CrossValReport:
    """Leave-one-conversation-out cross-validation of the fusion weights.

    Args:
        path: A LoCoMo-format file with at least two conversations.
        ks: Cut-offs.
        modes: Retrieval modes to measure.
        scope: What each question searches: its ``"conversation"``, or every conversation
            of the file (``"user"``); folds are held out by conversation either way.
        settings: Embedding and tier-3 settings (the stores go to a temporary folder).
        progress: Told of each stage's progress.
        postgres_url: Run on PostgreSQL + pgvector instead: a scratch database on this
            server, dropped afterwards (:func:`.stores.scratch_database`).

    Returns:
        Held-out and whole-file recall per mode, the weights each fold chose, and the
        retrieval and embedding times of the held-out questions.

    Raises:
        InvalidInputError: If the file is not LoCoMo-format JSON.
        ValueError: If it has fewer than two conversations, or a k is not positive.
    """
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1:
        raise ValueError("k values must be positive integers")
    started = time.perf_counter()
    samples, _ = load_locomo(path)
    if len(samples) < 2:
        raise ValueError("cross-validation needs at least two conversations")
    notify = progress or (lambda _stage, _done, _total: None)
    report = CrossValReport(path=str(path), ks=ks, scope=scope, backend=backend_name(postgres_url))
    defaults = FusionWeights()
    report.defaults = {m: _changed(defaults, m) for m in modes}
    held: dict[str, list[dict[int, float]]] = {}
    with ingested(samples, settings, notify, report.seconds, postgres_url=postgres_url) as (
        manager,
        numbers,
    ):
        saved = manager.retrieval
        for mode in modes:
            manager.retrieval = replace(saved, mode=mode)
            timings = Timings(max(ks))
            asked = gather_questions(
                manager, samples, numbers, scope=scope, notify=notify,
                stage=f"gathering ({mode})", timings=timings,
            )  # fmt: skip
            tune_start = time.perf_counter()
            held[mode], report.folds[mode] = _cross_validate(asked, mode, ks)
            report.held_out[mode] = _pooled(asked, held[mode], ks)
            report.held_out[mode].latency_ms = latency_summary(timings.retrieval)
            report.held_out[mode].embedding_ms = (
                latency_summary(timings.embedding) if timings.embedding else {}
            )
            report.whole_file[mode] = _pooled(asked, _recalls(asked, defaults, ks), ks)
            report.seconds[f"tune_{mode}"] = round(time.perf_counter() - tune_start, 2)
        manager.retrieval = saved
    if "hybrid" in held:
        report.hybrid_against = {
            mode: _paired(asked, held["hybrid"], rows, ks)
            for mode, rows in held.items()
            if mode != "hybrid"
        }
    report.seconds["total"] = round(time.perf_counter() - started, 2)
    return report


def _p(p: float) -> str:
    return "<0.01" if p < 0.01 else f"={p:.2f}"


def format_crossval(report: CrossValReport) -> str:
    """The held-out and whole-file tables, each fold's choice, the hybrid against the rest."""
    ks = report.ks
    lines = [
        f"LoCoMo leave-one-conversation-out cross-validation: {report.path}",
        f"  each question searched {SCOPE_WORDS[report.scope]}; stores: {report.backend}",
    ]
    for title, tables in (
        ("held-out folds (weights chosen on the other conversations)", report.held_out),
        ("whole file, shipped default weights", report.whole_file),
    ):
        lines += [f"  {title}", *recall_lines(tables, ks)]
    lines.append("  per fold: held-out recall, weights chosen on the other conversations")
    for mode, folds in report.folds.items():
        lines.append(f"    {mode}  (defaults: {report.defaults.get(mode)})")
        for fold in folds:
            recall = " ".join(f"{fold.recall[k]:5.1f}" for k in ks)
            lines.append(
                f"      {fold.conversation:<10}{fold.questions:>5}  {recall}  {fold.weights}"
            )
        spread = " ".join(
            f"{min(f.recall[k] for f in folds):5.1f}-{max(f.recall[k] for f in folds):<5.1f}"
            for k in ks
        )
        lines.append(f"      {'spread':<10}{'':>5}  {spread}  (lowest-highest fold)")
    lines += latency_lines(report.held_out)
    for mode, compared in report.hybrid_against.items():
        lines.append(
            f"  hybrid against {mode}, held out: questions where the hybrid finds more / fewer"
            " of the evidence, and the sign test's p"
        )
        for c in compared:
            cells = "  ".join(f"@{k} {c.better[k]}/{c.worse[k]} p{_p(c.p[k])}" for k in ks)
            lines.append(f"      {c.conversation or 'all':<10}{cells}")
    timings = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report.seconds.items())
    lines.append(f"  time: {timings}")
    return "\n".join(lines)
