"""The performance suite behind ``memory-chain bench``: every benchmark, one report.

Each benchmark is a script in the source checkout's ``benchmarks/`` folder, run in its own
process (so that one's memory and threads do not colour the next) with ``--json``; its output
streams to the terminal as it runs. The scripts are not part of the installed package (they
start servers and databases of their own and share a harness module that is no library
code), so they need a source checkout: installed from a wheel, ``memory-chain bench`` says so
before it runs anything. The LoCoMo recall evaluation is part of the package and runs in
process when a data file is given, checkout or not. At the end every goal's verdict is printed
in one table, and ``--json`` writes all figures to one file for tracking.

Example:
    >>> results = run_suite(["tiers", "chat"], quick=True)  # doctest: +SKIP
    >>> results["chat"]["verdicts"]
    {'chat_overhead_settled': 'ok', ...}
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_chain.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class Benchmark:
    """A script of ``benchmarks/`` and its arguments for a full and a quick run."""

    name: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    about: str


SUITE: tuple[Benchmark, ...] = (
    Benchmark(
        "tiers",
        "bench_tiers.py",
        (),
        ("--scales", "100x1000", "--phase-seconds", "5"),
        "tier-1 reads, tier-2 appends and keyword search",
    ),
    Benchmark(
        "vectors",
        "bench_vectors.py",
        ("--local-modes", "memory"),
        ("--quick",),
        "tier-3 search, ingestion and retrieval against the embedding cost",
    ),
    Benchmark(
        "chat",
        "bench_chat.py",
        (),
        ("--quick",),
        "memory's cost of a chat turn; chat latency while consolidation runs",
    ),
    Benchmark(
        "load",
        "bench_load.py",
        (),
        ("--quick",),
        "concurrent clients against a real server (SQLite and PostgreSQL)",
    ),
    Benchmark(
        "embeddings",
        "bench_embeddings.py",
        (),
        ("--quick",),
        "ONNX Runtime against torch: equal vectors, query latency, ingestion",
    ),
    Benchmark(
        "replicas",
        "bench_replicas.py",
        (),
        ("--quick",),
        "three replicas on one PostgreSQL: what they store, and throughput against one",
    ),
)
NAMES = (*(benchmark.name for benchmark in SUITE), "locomo")

#: Called with each line of a report as it is produced.
Echo = Callable[[str], None]


def benchmarks_dir() -> Path:
    """The source checkout's ``benchmarks/`` folder, next to the ``memory_chain`` package.

    Raises:
        InvalidInputError: If memory_chain is not installed from a source checkout.
    """
    folder = Path(__file__).resolve().parent.parent / "benchmarks"
    if not (folder / "harness" / "__init__.py").exists():
        raise InvalidInputError(
            "`memory-chain bench` needs a source checkout: the benchmarks are the scripts of "
            f"the repository's benchmarks/ folder, which an installed package does not ship "
            f"(looked in {folder}). Clone the repository, install it with `pip install -e .` "
            "(`make setup`) and run it there; `--only locomo --locomo FILE` (the recall "
            "evaluation) works without one"
        )
    return folder


def _run_script(benchmark: Benchmark, folder: Path, *, quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memory-chain-bench-") as scratch:
        output = Path(scratch) / f"{benchmark.name}.json"
        arguments = benchmark.quick if quick else benchmark.full
        command = [
            sys.executable,
            str(folder / benchmark.script),
            *arguments,
            "--json",
            str(output),
        ]
        started = time.perf_counter()
        # Our own scripts, run with this interpreter.
        done = subprocess.run(command, cwd=folder.parent, check=False)  # noqa: S603
        seconds = round(time.perf_counter() - started, 1)
        if done.returncode != 0 or not output.exists():
            return {"error": f"exited with {done.returncode}", "seconds": seconds}
        result: dict[str, Any] = json.loads(output.read_text())
        result["seconds"] = seconds
        return result


def _run_locomo(path: Path, *, quick: bool, echo: Echo) -> dict[str, Any]:
    from memory_chain.eval.locomo import evaluate_locomo
    from memory_chain.eval.report import format_report

    report = evaluate_locomo(
        path, modes=("hybrid", "keyword", "dense"), max_conversations=1 if quick else None
    )
    echo(format_report(report))
    result = report.as_dict()
    hybrid, keyword = report.results["hybrid"], report.results["keyword"]
    goal = 76.0
    ratio = hybrid.latency_ms["p95"] / (hybrid.embedding_ms.get("p95") or float("inf"))
    result["verdicts"] = {
        "locomo hybrid R@10 >= 76 %": "ok" if hybrid.recall[10] >= goal else "MISSED",
        "locomo hybrid >= keyword only at every k": (
            "ok" if all(hybrid.recall[k] >= keyword.recall[k] for k in report.ks) else "MISSED"
        ),
        "locomo retrieval p95 <= 1.3x query embedding p95": "ok" if ratio <= 1.3 else "MISSED",
    }
    return result


def run_suite(
    names: Sequence[str],
    *,
    quick: bool = False,
    locomo: Path | None = None,
    echo: Echo = print,
) -> dict[str, Any]:
    """Run benchmarks one after the other.

    Args:
        names: Which of :data:`NAMES` to run, in this order.
        quick: Smoke-sized runs (minutes instead of tens of minutes).
        locomo: A LoCoMo-format file for the recall evaluation (skipped without one).
        echo: Where the suite's own lines go (the scripts print to the terminal directly).

    Returns:
        Name → the benchmark's JSON figures (with ``verdicts`` and ``seconds``), or
        ``{"error": ...}`` for one that failed.

    Raises:
        InvalidInputError: For an unknown name, or a script benchmark without a source
            checkout (both before anything runs).
    """
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        raise InvalidInputError(f"unknown benchmarks {unknown}: choose from {', '.join(NAMES)}")
    # Before anything runs: a missing checkout should not surface after a long evaluation.
    folder = benchmarks_dir() if any(name != "locomo" for name in names) else None
    results: dict[str, Any] = {}
    for name in names:
        if name == "locomo":
            if locomo is None:
                echo("== locomo: skipped (give --locomo FILE, a LoCoMo-format JSON file) ==")
                continue
            echo(f"== locomo: retrieval recall on {locomo} ==")
            results[name] = _run_locomo(locomo, quick=quick, echo=echo)
            continue
        benchmark = next(b for b in SUITE if b.name == name)
        if folder is None or not (folder / benchmark.script).exists():
            results[name] = {"error": f"{benchmark.script} not found in {folder}"}
            continue
        echo(f"== {name}: {benchmark.about} ({benchmark.script}) ==")
        results[name] = _run_script(benchmark, folder, quick=quick)
    return results


def missed_goals(results: dict[str, Any]) -> list[str]:
    """``"<benchmark>: <goal>"`` of every goal whose verdict is ``MISSED``."""
    return [
        f"{name}: {goal}"
        for name, result in results.items()
        for goal, verdict in (result.get("verdicts") or {}).items()
        if verdict == "MISSED"
    ]


def summary(results: dict[str, Any]) -> list[str]:
    """One line per goal (and per failed benchmark), then the count of missed goals."""
    lines = ["== summary: every goal =="]
    missed = 0
    for name, result in results.items():
        if "error" in result:
            lines.append(f"  {name:<10} FAILED: {result['error']}")
            missed += 1
            continue
        for goal, verdict in (result.get("verdicts") or {}).items():
            lines.append(f"  {name:<10} {goal:<60} {verdict}")
            missed += verdict == "MISSED"
        if "seconds" in result and isinstance(result["seconds"], (int, float)):
            lines.append(f"  {name:<10} {'run time, s':<60} {result['seconds']:.0f}")
    lines.append(f"  {missed} goals missed or benchmarks failed")
    return lines
