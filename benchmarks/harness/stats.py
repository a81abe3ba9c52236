"""Figures from samples: percentiles, medians, ratios and verdicts against goals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def summarize(samples_ns: Sequence[float], unit: str = "ms") -> dict[str, Any]:
    """n, p50, p95, p99, mean and max of nanosecond samples, in ``unit`` ("ms" or "us").

    Args:
        samples_ns: Durations in nanoseconds (``time.perf_counter_ns`` differences).
        unit: The unit of the figures returned.

    Returns:
        ``{"n", "unit", "p50", "p95", "p99", "mean", "max"}``; only ``n`` and ``unit`` when
        there are no samples.
    """
    if not len(samples_ns):
        return {"n": 0, "unit": unit}
    scale = 1e3 if unit == "us" else 1e6
    values = np.asarray(samples_ns, dtype=np.float64) / scale
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "n": len(values),
        "unit": unit,
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": float(values.mean()),
        "max": float(values.max()),
    }


def median_ratio(samples: Sequence[float], baseline: Sequence[float]) -> float:
    """The median of ``samples`` over the median of ``baseline`` (nan when either is empty)."""
    if not len(samples) or not len(baseline):
        return math.nan
    return float(np.median(np.asarray(samples, np.float64)) / np.median(baseline))


def paired_ratio(samples: Sequence[float], baseline: Sequence[float]) -> float:
    """The median of ``samples[i] / baseline[i]``: pairs measured back to back.

    Machine load colours both sides of a pair alike, so on a shared machine this is the
    steadier figure. The shorter list sets the pairs.
    """
    pairs = min(len(samples), len(baseline))
    if not pairs:
        return math.nan
    top = np.asarray(samples[:pairs], np.float64)
    return float(np.median(top / np.asarray(baseline[:pairs], np.float64)))


def verdict(value: float | None, goal: float, higher_is_better: bool) -> str:
    """ "ok", "MISSED" or "n/a" (no figure) for a figure against its goal."""
    if value is None or math.isnan(value):
        return "n/a"
    ok = value >= goal if higher_is_better else value <= goal
    return "ok" if ok else "MISSED"


def second_half(
    samples: Sequence[dict[str, Any]], key: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sample nearest half of the last one's ``key`` (turns, points...), and the last.

    Growth is judged over the second half of a run: the first part holds fixed costs
    (start-up, first segments, caches filling).
    """
    last = samples[-1]
    middle = min(samples, key=lambda sample: abs(sample[key] - last[key] / 2))
    return middle, last
