"""`memory-chain bench`: runs the benchmark scripts and gathers every goal's verdict."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import memory_chain

CLI = str(Path(sys.executable).parent / "memory-chain")


def test_bench_runs_a_benchmark_and_reports_its_goals(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [CLI, "bench", "--only", "tiers,locomo", "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    tiers = figures["tiers"]
    assert [scale["conversations"] for scale in tiers["scales"]] == [100]
    verdicts = tiers["verdicts"]
    assert "100x1000 append NORMAL p95" in verdicts
    assert set(verdicts.values()) <= {"ok", "MISSED", "n/a"}
    # The script's own report streams through, then the summary lists every goal.
    assert "tier-2 append_turns" in done.stdout
    summary = done.stdout.split("== summary: every goal ==")[1]
    assert all(goal in summary for goal in verdicts)
    assert "locomo: skipped (give --locomo FILE" in done.stdout


def test_bench_refuses_unknown_benchmarks() -> None:
    done = subprocess.run(
        [CLI, "bench", "--only", "tiers,warp-speed"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "unknown benchmarks ['warp-speed']" in done.stderr


def _installed_copy(tmp_path: Path) -> dict[str, str]:
    """The package as a wheel installs it: ``memory_chain/`` alone, no ``benchmarks/`` by it."""
    site = tmp_path / "site-packages"
    shutil.copytree(Path(memory_chain.__file__).parent, site / "memory_chain")
    return {**os.environ, "PYTHONPATH": str(site)}


def _bench_installed(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = "from memory_chain.cli import app; app()"
    return subprocess.run(
        [sys.executable, "-c", command, "bench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=_installed_copy(tmp_path),
    )


def test_bench_says_it_needs_a_checkout_when_installed(tmp_path: Path) -> None:
    done = _bench_installed(tmp_path, "--only", "locomo,tiers", "--quick")
    assert done.returncode == 1
    assert "`memory-chain bench` needs a source checkout" in done.stderr
    # It says where it looked (the installed copy, not this checkout) and runs nothing first.
    assert str(tmp_path / "site-packages" / "benchmarks") in done.stderr
    assert "== locomo" not in done.stdout


def test_bench_runs_the_recall_evaluation_without_a_checkout(tmp_path: Path) -> None:
    done = _bench_installed(tmp_path, "--only", "locomo")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "locomo: skipped (give --locomo FILE" in done.stdout
