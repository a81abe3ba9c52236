"""Helpers shared by the benchmarks: percentiles, verdicts, formatting, chat vocabulary.

The benchmarks run as scripts (``python benchmarks/bench_x.py``), so this module is imported
from the scripts' folder.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psutil

MB = 1024 * 1024


def rss_mb() -> float:
    """Resident memory of this process, in MB."""
    return float(psutil.Process().memory_info().rss) / MB


def environment(load_average_start: Sequence[float]) -> dict[str, Any]:
    """Where a run happened, for the JSON file (the load average is taken again at the end)."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_start": tuple(load_average_start),
        "load_average_end": os.getloadavg(),
    }


def progress(message: str, started: float) -> None:
    """A progress line on stderr, with the time since ``started``."""
    print(f"  .. [{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)


def summarize_ms(samples_ns: Sequence[float]) -> dict[str, Any]:
    """n, p50, p95, p99, mean and max of nanosecond samples, in milliseconds."""
    if not samples_ns:
        return {"n": 0}
    values = np.asarray(samples_ns, dtype=np.float64) / 1e6
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "n": len(values),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": float(values.mean()),
        "max": float(values.max()),
    }


def verdict(value: float | None, goal: float, higher_is_better: bool) -> str:
    """ "ok", "MISSED" or "n/a" for a figure against its goal."""
    if value is None or math.isnan(value):
        return "n/a"
    ok = value >= goal if higher_is_better else value <= goal
    return "ok" if ok else "MISSED"


def fmt(value: float | None, digits: int = 2) -> str:
    """A figure for a table: thousands separators above 100, "-" when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def goal_line(label: str, value: str, goal: str, ok: str) -> str:
    """One line of a figure, its goal and its verdict."""
    return f"  {label:<58} {value:>18}   goal {goal:<12} {ok}"


# Vocabulary of the synthetic chats.
CITIES = ["Lisbon", "Osaka", "Denver", "Nairobi", "Oslo", "Bogotá", "Krakow", "Hanoi", "Perth"]
DAYS = ["Monday", "Tuesday", "Friday", "the weekend", "3 May", "next week", "the 14th"]
PEOPLE = ["Ana", "my sister", "Dr. Patel", "the landlord", "Tom", "my manager", "Yuki"]
FOODS = ["lentil soup", "pad thai", "sourdough", "a vegan lasagna", "shakshuka", "ramen"]
TOPICS = [
    "the quarterly budget",
    "my knee injury",
    "the Python migration",
    "our wedding playlist",
    "the tax return",
    "learning Spanish",
    "the garden irrigation",
    "the job interview",
    "my sleep schedule",
    "the SQL index",
]
THINGS = ["passport", "laptop charger", "insurance card", "spare keys", "receipt", "tent"]
