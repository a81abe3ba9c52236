"""One way to time a loop: warm-up, variants taking turns, samples in nanoseconds.

On a shared machine the load changes from second to second, so variants that are compared
(before/after, with/without, engine A/B) are timed on the same input back to back, their
order changing from input to input: :func:`alternate`. What it returns, :class:`Timings`,
gives each variant's percentiles (:func:`~harness.stats.summarize`) and its ratio to a
baseline, both of the medians and the median of the pairs.

Example::

    timings = alternate(
        {"before": old_search, "after": new_search}, questions, warmup=20
    )
    timings.summary("after")["p95"]          # ms
    timings.paired_ratio("after", "before")  # < 1: after is faster
    print("\\n".join(comparison_lines(timings, baseline="before")))
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from .report import fmt, stats_header, stats_row
from .stats import median_ratio, paired_ratio, summarize

T = TypeVar("T")
R = TypeVar("R")

#: How the order of the variants changes from one input to the next: ``rotate`` starts
#: input ``i`` at variant ``i % n``; ``reverse`` reverses the order every other input;
#: ``fixed`` keeps it (when one variant must follow another: a cold read, then a warm one).
Order = Literal["rotate", "reverse", "fixed"]

clock = time.perf_counter_ns


def rotated(items: Sequence[T], step: int) -> list[T]:
    """``items`` rotated left by ``step`` (each item leads once every ``len(items)`` steps)."""
    if not items:
        return []
    shift = step % len(items)
    return [*items[shift:], *items[:shift]]


def alternated(items: Sequence[T], step: int) -> list[T]:
    """``items`` as given on even steps, reversed on odd ones."""
    return list(items) if step % 2 == 0 else list(reversed(items))


def ordered(items: Sequence[T], step: int, order: Order = "rotate") -> list[T]:
    """The order of ``items`` at ``step``: :func:`rotated`, :func:`alternated` or as given."""
    if order == "fixed":
        return list(items)
    return rotated(items, step) if order == "rotate" else alternated(items, step)


def timed(call: Callable[..., R], *args: Any, **kwargs: Any) -> tuple[int, R]:
    """Call ``call(*args, **kwargs)`` once; (nanoseconds it took, what it returned)."""
    started = clock()
    result = call(*args, **kwargs)
    return clock() - started, result


def repeat(call: Callable[[], object], times: int, warmup: int = 0) -> list[int]:
    """Nanoseconds of ``times`` calls of ``call``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(times):
        started = clock()
        call()
        samples.append(clock() - started)
    return samples


def timer_overhead_ns() -> float:
    """The median cost of one ``perf_counter_ns`` pair (it is inside every sample)."""
    samples = []
    for _ in range(10_000):
        start = clock()
        samples.append(clock() - start)
    return float(statistics.median(samples))


def time_calls(
    calls: Sequence[Callable[[], Any]], max_seconds: float, check: Callable[[Any], None] | None
) -> tuple[list[int], float]:
    """Time each call separately; stop early after ``max_seconds`` of wall time.

    Args:
        calls: Calls of nothing, timed one by one in this order.
        max_seconds: Stop after the call that ends past this much wall time.
        check: Called untimed with each call's result (to check it).

    Returns:
        The samples in nanoseconds, and the wall seconds of the loop.
    """
    samples: list[int] = []
    deadline = clock() + int(max_seconds * 1e9)
    began = clock()
    for call in calls:
        start = clock()
        result = call()
        end = clock()
        samples.append(end - start)
        if check is not None:
            check(result)
        if end > deadline:
            break
    return samples, (clock() - began) / 1e9


@dataclass
class Timings:
    """Samples in nanoseconds by variant, in the order measured (sample i: input i)."""

    samples: dict[str, list[int]] = field(default_factory=dict)

    def add(self, name: str, nanoseconds: int) -> None:
        """Record one sample of ``name``."""
        self.samples.setdefault(name, []).append(nanoseconds)

    @property
    def names(self) -> list[str]:
        """The variants, in the order they were first recorded."""
        return list(self.samples)

    def summary(self, name: str, unit: str = "ms") -> dict[str, Any]:
        """Percentiles of ``name`` (:func:`~harness.stats.summarize`)."""
        return summarize(self.samples.get(name, []), unit)

    def summaries(self, unit: str = "ms") -> dict[str, dict[str, Any]]:
        """Percentiles of every variant."""
        return {name: self.summary(name, unit) for name in self.samples}

    def ratio(self, name: str, baseline: str) -> float:
        """Median of ``name`` over the median of ``baseline``."""
        return median_ratio(self.samples[name], self.samples[baseline])

    def paired_ratio(self, name: str, baseline: str) -> float:
        """Median over inputs of ``name``'s time over ``baseline``'s on the same input."""
        return paired_ratio(self.samples[name], self.samples[baseline])

    def differences(self, name: str, baseline: str) -> list[int]:
        """``name`` minus ``baseline`` on each input, nanoseconds (what ``name`` adds)."""
        return [a - b for a, b in zip(self.samples[name], self.samples[baseline], strict=False)]


def alternate(
    variants: Mapping[str, Callable[[T], object]],
    inputs: Iterable[T],
    *,
    warmup: int = 0,
    order: Order = "rotate",
    before: Callable[[str, T], None] | None = None,
    after: Callable[[str, T, Any], None] | None = None,
    into: Timings | None = None,
) -> Timings:
    """Every input through every variant, the variants taking turns; their times.

    Args:
        variants: Name -> a call of one input; only the call is timed.
        inputs: What each variant is given, one after the other (questions, batches...).
        warmup: The first ``warmup`` inputs run through every variant untimed.
        order: How the variants' order changes from input to input (:data:`Order`).
        before: Called untimed before each timed call, with the variant's name and the
            input (to settle background work, clear a cache...).
        after: Called untimed after each timed call with the name, the input and what the
            call returned (to check a result).
        into: Timings to add to (several passes, one result); a new one when None.

    Returns:
        The samples of every variant, sample ``i`` of each from the same input.
    """
    timings = into if into is not None else Timings()
    for name in variants:
        timings.samples.setdefault(name, [])
    names = list(variants)
    gc.collect()
    for step, item in enumerate(inputs):
        for name in ordered(names, step, order):
            if before is not None:
                before(name, item)
            started = clock()
            result = variants[name](item)
            elapsed = clock() - started
            if after is not None:
                after(name, item, result)
            if step >= warmup:
                timings.add(name, elapsed)
    return timings


def comparison_lines(
    timings: Timings,
    baseline: str,
    *,
    label: str = "ms",
    width: int = 30,
    digits: int = 2,
    unit: str = "ms",
) -> list[str]:
    """A table of every variant's percentiles and its ratios to ``baseline``.

    Columns: n, p50, p95, max, then ``x base`` (median over median) and ``paired`` (median
    of the per-input ratios).
    """
    columns = ("p50", "p95", "max")
    lines = [stats_header(label, columns, width) + f" {'x base':>8} {'paired':>8}"]
    for name in timings.names:
        row = stats_row(name, timings.summary(name, unit), columns, width, digits)
        ratio = timings.ratio(name, baseline) if timings.samples[name] else None
        paired = timings.paired_ratio(name, baseline) if timings.samples[name] else None
        lines.append(f"{row} {fmt(ratio, 3):>8} {fmt(paired, 3):>8}")
    return lines
