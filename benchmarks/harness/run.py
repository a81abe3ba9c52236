"""A benchmark run: its header, progress lines, command line, settings and JSON file.

A run prints a header naming the machine and the package versions, reports progress on
stderr, and at the end prints its report lines and writes every figure as JSON
(:meth:`Run.finish`), where ``memory-chain bench`` reads the ``verdicts``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

S = TypeVar("S")
R = TypeVar("R")


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


def run_and_report(
    title: str,
    json_path: Path | None,
    settings: S,
    measure: Callable[[S, Run], R],
    report: Callable[[R, S], Sequence[str]],
    *,
    packages: Sequence[str] = (),
    intro: str | None = None,
    verdicts: Callable[[R], Mapping[str, str]] | None = None,
    **sections: Any,
) -> R:
    """A whole benchmark run: header, measurement, report, JSON.

    Args:
        title: What is benchmarked, for the header.
        json_path: Where every figure goes (``--json``); nothing is written when None.
        settings: The run's settings (written as the JSON's ``settings`` unless None).
        measure: Measures, given the settings and the :class:`Run` (``run.started``,
            ``run.progress``).
        report: The report's lines, from what ``measure`` returned and the settings.
        packages: Packages whose versions the header and the JSON name.
        intro: A line printed after the header (the settings in words).
        verdicts: Each goal's "ok"/"MISSED", from what ``measure`` returned.
        **sections: More JSON sections (``settings=``, ``goals=``...), written first.

    Returns:
        What ``measure`` returned (its ``results`` section in the JSON).
    """
    bench = Run(title, packages)
    print(bench.header(), flush=True)
    if intro:
        print(intro + "\n", flush=True)
    result = measure(settings, bench)
    if settings is not None:
        sections = {"settings": settings, **sections}
    if verdicts is not None:
        sections["verdicts"] = verdicts(result)
    bench.finish(report(result, settings), json_path, **sections, results=result)
    return result


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
