"""One way to print figures: numbers, rows of percentiles, goal lines and plain tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def fmt(value: float | None, digits: int = 2) -> str:
    """A figure for a table: thousands separators from 100 up, "-" when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def goal_line(label: str, value: str, goal: str, ok: str) -> str:
    """One line of a figure, its goal and its verdict."""
    return f"  {label:<58} {value:>18}   goal {goal:<12} {ok}"


def stats_header(
    label: str, columns: Sequence[str] = ("p50", "p95", "p99", "max"), width: int = 58
) -> str:
    """The header of a table of :func:`stats_row` rows."""
    return f"  {label:<{width}} {'n':>6} " + " ".join(f"{column:>8}" for column in columns)


def stats_row(
    label: str,
    stats: Mapping[str, Any],
    columns: Sequence[str] = ("p50", "p95", "p99", "max"),
    width: int = 58,
    digits: int = 2,
) -> str:
    """One row of latencies: the label, the sample count, then ``columns`` of ``stats``."""
    figures = " ".join(f"{fmt(stats.get(column), digits):>8}" for column in columns)
    return f"  {label:<{width}} {stats['n']:>6,} {figures}"


def cell(value: object, digits: int = 2) -> str:
    """A table cell: numbers through :func:`fmt`, booleans as yes/NO, the rest as text."""
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float) or value is None:
        return fmt(value, digits)
    return str(value)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, digits: int = 2
) -> list[str]:
    """A plain table: columns of numbers right-aligned, the others left-aligned, to fit.

    Args:
        headers: Column titles.
        rows: One sequence of values per row (numbers are formatted by :func:`cell`).
        digits: Decimals of numbers under 100.

    Returns:
        The header line and one line per row, each indented by two spaces.
    """
    cells = [[cell(value, digits) for value in row] for row in rows]
    numeric = [
        bool(rows) and all(_is_number(row[n]) or row[n] is None for row in rows)
        for n in range(len(headers))
    ]
    widths = [
        max([len(str(header)), *(len(row[n]) for row in cells)]) for n, header in enumerate(headers)
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            f"{value:>{width}}" if right else f"{value:<{width}}"
            for value, width, right in zip(values, widths, numeric, strict=True)
        ]
        return "  " + "  ".join(parts).rstrip()

    return [line([str(h) for h in headers]), *(line(row) for row in cells)]


def stats_cells(
    stats: Mapping[str, Any], columns: Sequence[str] = ("p50", "p95", "p99", "max")
) -> list[float | None]:
    """``columns`` of a :func:`~harness.stats.summarize` result, for a :func:`table` row."""
    return [stats.get(column) for column in columns]
