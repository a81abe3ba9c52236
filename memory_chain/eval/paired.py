"""Is a difference between two ways of answering the same questions outside the noise?

Two conditions scored on the same questions give pairs of scores. Two tests of the pairs:

- the two-sided exact sign test (:func:`~memory_chain.eval.crossval.sign_test`) on the
  questions where one scores higher (ties left out): no assumption about the scores' spread;
- a paired bootstrap confidence interval of the mean difference: questions drawn with
  replacement (seeded), the difference of the means over each draw, its percentiles.

A difference is outside the noise when the interval excludes 0 and the sign test's p is
under 0.05: a handful of pairs that all agree give an interval of one point (one question: a
bootstrap of one value) but no evidence. With a few dozen questions a difference of 5-10
points of F1 is usually inside the noise: the interval says how large a difference the
sample could have shown.

Example:
    >>> test = paired_test([1.0, 0.5, 1.0, 0.0], [0.0, 0.5, 0.5, 0.0])
    >>> test.better, test.worse, test.ties
    (2, 0, 2)
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memory_chain.eval.crossval import sign_test

#: The sign test's p under which a difference is not the sample's noise.
SIGNIFICANCE = 0.05
#: Bootstrap draws: the interval's ends move by well under 0.1 point between seeds.
RESAMPLES = 10_000


@dataclass(frozen=True)
class PairedTest:
    """Two conditions compared on the same items (first minus second).

    Attributes:
        n: Pairs.
        mean_difference: Mean of first minus second.
        low: Lower end of the bootstrap interval of the mean difference.
        high: Upper end.
        level: The interval's confidence level.
        better: Pairs where the first is higher.
        worse: Pairs where the first is lower.
        ties: Pairs where they are equal.
        sign_p: The two-sided exact sign test's p-value.
    """

    n: int
    mean_difference: float
    low: float
    high: float
    level: float
    better: int
    worse: int
    ties: int
    sign_p: float

    @property
    def outside_noise(self) -> bool:
        """Whether the interval excludes 0 and the sign test's p is under 0.05."""
        return (self.low > 0 or self.high < 0) and self.sign_p < SIGNIFICANCE

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (with ``outside_noise``)."""
        return asdict(self) | {"outside_noise": self.outside_noise}


def bootstrap_interval(
    differences: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``differences``.

    Raises:
        ValueError: With no differences, or a level outside (0, 1).
    """
    if not differences:
        raise ValueError("a bootstrap interval needs at least one pair")
    if not 0 < level < 1:
        raise ValueError("the level is a fraction between 0 and 1")
    draw = random.Random(seed)
    n = len(differences)
    means = sorted(
        sum(differences[draw.randrange(n)] for _ in range(n)) / n for _ in range(resamples)
    )
    tail = (1 - level) / 2
    low = means[int(tail * (resamples - 1))]
    high = means[round((1 - tail) * (resamples - 1))]
    return low, high


def paired_test(
    first: Sequence[float],
    second: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> PairedTest:
    """Compare ``first[i]`` with ``second[i]`` over every item ``i``.

    Raises:
        ValueError: If the sequences differ in length or are empty.
    """
    if len(first) != len(second):
        raise ValueError(f"{len(first)} scores against {len(second)}: pairs need both")
    differences = [a - b for a, b in zip(first, second, strict=True)]
    low, high = bootstrap_interval(differences, level=level, resamples=resamples, seed=seed)
    better = sum(d > 0 for d in differences)
    worse = sum(d < 0 for d in differences)
    return PairedTest(
        n=len(differences),
        mean_difference=statistics.fmean(differences),
        low=low,
        high=high,
        level=level,
        better=better,
        worse=worse,
        ties=len(differences) - better - worse,
        sign_p=sign_test(better, worse),
    )
