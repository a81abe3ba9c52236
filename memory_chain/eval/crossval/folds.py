"""Leave one conversation out: the fusion weights each fold chooses, and the sign test.

Each question's candidates are gathered once (:class:`Asked`); under every point of a mode's
grid (:data:`GRIDS`) they are ranked and each question's Recall@k computed once. A fold, one
conversation held out, chooses the grid point whose recall (the sum over every k) is best on
the other conversations (:func:`fold_choices`), and is measured with it
(:func:`cross_validate`). :func:`paired_counts` compares two modes question by question with
the two-sided sign test (:func:`sign_test`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from fractions import Fraction
from typing import Any

from memory_chain.eval.locomo import RecallTable, found_turns, recall_row, recall_table
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


def _grid(mode: RetrievalMode) -> list[FusionWeights]:
    grid = GRIDS[mode]
    return [
        replace(FusionWeights(), **dict(zip(grid, values, strict=True)))
        for values in itertools.product(*grid.values())
    ]


def recalls(
    asked: Sequence[Asked], weights: FusionWeights, ks: Sequence[int]
) -> list[dict[int, float]]:
    """Each question's recall@k (0 to 1) with its candidates ranked under ``weights``."""
    depth = max(ks)
    return [
        recall_row(found_turns(a.candidates.rank(weights, depth), a.conversation), a.evidence, ks)
        for a in asked
    ]


def _mean(rows: Sequence[dict[int, float]], ks: Sequence[int]) -> dict[int, float]:
    return {k: round(100 * statistics.fmean(row[k] for row in rows), 1) for k in ks}


def pooled(
    asked: Sequence[Asked], rows: Sequence[dict[int, float]], ks: Sequence[int]
) -> RecallTable:
    """The questions' recall rows (row ``i`` is ``asked[i]``'s) as a table, per category."""
    by_category: dict[str, list[dict[int, float]]] = defaultdict(list)
    for question, row in zip(asked, rows, strict=True):
        by_category[question.category].append(row)
    return recall_table(by_category, [], ks)


def grid_values(weights: FusionWeights, mode: RetrievalMode) -> dict[str, Any]:
    """The weights ``mode``'s grid varies, as they are in ``weights`` (a time span in days)."""
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


def paired_counts(
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
    asked: Sequence[Asked],
    mode: RetrievalMode,
    ks: Sequence[int],
    grid: Sequence[FusionWeights] | None = None,
) -> tuple[list[FusionWeights], dict[str, int], list[list[dict[int, float]]]]:
    """Leave one conversation out: the grid point each fold chooses on the others.

    ``grid`` replaces the mode's grid (:data:`GRIDS`) when given.

    Returns:
        The grid, conversation → index of the weights chosen without it, and the recall of
        every question under every grid point (computed once).
    """
    grid = list(grid) if grid is not None else _grid(mode)
    table = [recalls(asked, weights, ks) for weights in grid]
    chosen: dict[str, int] = {}
    for conversation in dict.fromkeys(a.conversation for a in asked):
        train = [i for i, a in enumerate(asked) if a.conversation != conversation]

        def fit(j: int, train: list[int] = train) -> float:
            return sum(_mean([table[j][i] for i in train], ks).values())

        chosen[conversation] = max(range(len(grid)), key=fit)
    return grid, chosen, table


def cross_validate(
    asked: Sequence[Asked], mode: RetrievalMode, ks: Sequence[int]
) -> tuple[list[dict[int, float]], list[FoldResult]]:
    """Every question measured with the weights its fold chose on the other conversations.

    Returns:
        Each question's held-out recall row (in the order of ``asked``), and each fold.
    """
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
                grid_values(grid[best], mode),
                _mean([table[best][i] for i in test], ks),
                len(test),
            )
        )
    return [row for row in held if row is not None], folds
