"""What every benchmark shares: statistics, verdicts, tables, the environment, settings, JSON.

The benchmarks are scripts run from the repository root (``python benchmarks/bench_x.py``);
Python puts the script's folder first on the import path, so they import this module as
``harness``. A benchmark is a :class:`Run`: it prints a header naming the machine and the
package versions, reports progress on stderr, prints its figures with :func:`stats_row` and
:func:`goal_line`, and writes every figure with :meth:`Run.write_json`, where
``memory-chain bench`` reads the ``verdicts``.

Example::

    run = Run("tier", packages=("SQLAlchemy",))
    print(run.header())
    stats = summarize([1_200_000, 1_350_000, 980_000])  # nanoseconds -> ms
    print(stats_row("append", stats))
    print(goal_line("append p95", fmt(stats["p95"]), "<= 2 ms", verdict(stats["p95"], 2, False)))
    run.write_json(path, results={"append_ms": stats}, verdicts={"append": "ok"})
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import math
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import psutil

MB = 1024 * 1024

S = TypeVar("S")


# -- statistics -----------------------------------------------------------------------------


def summarize(samples_ns: Sequence[float], unit: str = "ms") -> dict[str, Any]:
    """n, p50, p95, p99, mean and max of nanosecond samples, in ``unit`` ("ms" or "us")."""
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


def verdict(value: float | None, goal: float, higher_is_better: bool) -> str:
    """ "ok", "MISSED" or "n/a" (no figure) for a figure against its goal."""
    if value is None or math.isnan(value):
        return "n/a"
    ok = value >= goal if higher_is_better else value <= goal
    return "ok" if ok else "MISSED"


# -- tables ---------------------------------------------------------------------------------


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


# -- memory ---------------------------------------------------------------------------------


def rss_mb(pid: int | None = None) -> float:
    """Resident memory (VmRSS) of this process or of ``pid``, in MB."""
    return float(psutil.Process(pid).memory_info().rss) / MB


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """VmRSS and its parts from ``/proc/<pid>/status``, in MB (Linux; VmRSS alone elsewhere).

    ``anon`` (``RssAnon``) is the heap, what a leak grows; ``file`` (``RssFile``) is file
    pages mapped in, such as the embedded vector index's segments, which the kernel can drop
    under pressure.
    """
    fields = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}
    found: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in fields:
                found[fields[key]] = int(value.split()[0]) / 1024  # kB
    except OSError:
        pass
    if "rss" not in found:
        found["rss"] = rss_mb(None if pid == "self" else int(pid))
    return found


# -- a run: environment, progress, settings, JSON -------------------------------------------


def versions(packages: Sequence[str]) -> dict[str, str]:
    """The installed version of each package ("not installed" when missing)."""
    found = {}
    for name in packages:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def progress(message: str, started: float | None = None) -> None:
    """A progress line on stderr, with the time since ``started`` when given."""
    elapsed = "" if started is None else f"[{time.perf_counter() - started:6.1f} s] "
    print(f"  .. {elapsed}{message}", file=sys.stderr, flush=True)


class Run:
    """One benchmark run: when it started, the machine and versions, its end and JSON file."""

    def __init__(
        self, title: str, packages: Sequence[str] = (), facts: Mapping[str, Any] | None = None
    ) -> None:
        """Start a run now.

        Args:
            title: What is benchmarked, for the header ("chat", "vector"...).
            packages: Packages whose versions the header and the JSON name.
            facts: More about the environment, for the JSON (the SQLite version...).
        """
        self.title = title
        self.started = time.perf_counter()
        self.load_average_start = os.getloadavg()
        self.versions = versions(packages)
        self.facts = dict(facts or {})

    def header(self) -> str:
        """``memory_chain <title> benchmark: Python, CPUs, load average; versions``."""
        line = (
            f"memory_chain {self.title} benchmark: Python {sys.version.split()[0]}, "
            f"{os.cpu_count()} CPUs, load average {self.load_average_start[0]:.2f}"
        )
        if self.versions:
            line += "; " + ", ".join(f"{k} {v}" for k, v in self.versions.items())
        return line

    def progress(self, message: str) -> None:
        """A progress line on stderr with the time since the run started."""
        progress(message, self.started)

    @property
    def seconds(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.started

    def environment(self) -> dict[str, Any]:
        """Where the run happened (the load average is taken again now)."""
        found: dict[str, Any] = {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_start": tuple(self.load_average_start),
            "load_average_end": os.getloadavg(),
        }
        if self.versions:
            found["versions"] = self.versions
        return found | self.facts

    def footer(self) -> str:
        """The run time and the load average at the end."""
        return (
            f"\ntotal run time {self.seconds:.0f} s; load average at the end "
            f"{os.getloadavg()[0]:.2f}"
        )

    def finish(self, lines: Sequence[str], path: Path | None, **sections: Any) -> None:
        """Print the report's ``lines`` and the footer; write the JSON file (with ``seconds``)."""
        for line in lines:
            print(line)
        print(self.footer())
        self.write_json(path, **sections, seconds=self.seconds)

    def write_json(self, path: Path | None, **sections: Any) -> None:
        """Write ``environment`` and every section (settings, results, verdicts...) to ``path``.

        Dataclass settings are written as dicts (tuples as lists); anything else JSON cannot
        write, as its ``str``.
        """
        if path is None:
            return
        payload: dict[str, Any] = {"environment": self.environment()}
        for name, value in sections.items():
            is_settings = dataclasses.is_dataclass(value) and not isinstance(value, type)
            payload[name] = dataclasses.asdict(value) if is_settings else value
        path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"figures written to {path}")


def parser(doc: str | None, *, quick: str | None = None) -> argparse.ArgumentParser:
    """A benchmark's argument parser: its docstring's first paragraph, ``--json``, ``--quick``.

    Args:
        doc: The script's docstring.
        quick: Help of ``--quick`` (what the smoke run does); no ``--quick`` when None.
    """
    found = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    found.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    if quick is not None:
        found.add_argument("--quick", action="store_true", help=quick)
    return found


def configure(defaults: S, args: argparse.Namespace, quick: Mapping[str, Any] | None = None) -> S:
    """The settings of a run: ``defaults``, then ``quick`` with ``--quick``, then every option
    given on the command line whose name is a field of the settings dataclass."""
    settings = defaults
    if getattr(args, "quick", False):
        settings = dataclasses.replace(settings, quick=True, **(quick or {}))  # type: ignore[type-var]
    given = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(settings)  # type: ignore[arg-type]
        if getattr(args, field.name, None) is not None
    }
    return dataclasses.replace(settings, **given)  # type: ignore[type-var]
