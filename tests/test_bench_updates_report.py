"""The update benchmark's report (``benchmarks/update_report.py``): counts, pass rule, table.

``benchmarks/bench_updates.py`` runs the scenarios on a real model; what it makes of their
results needs none, so hand-made results stand in here.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.bench_scripts import benchmark_module


@pytest.fixture(scope="module")
def update_report() -> Iterator[ModuleType]:
    """``benchmarks/update_report.py`` as the scripts import it (``benchmarks/`` on the path)."""
    with benchmark_module("update_report") as module:
        yield module


def _result(name: str, *, missing: int = 0, retired: bool = False) -> dict[str, Any]:
    """A scenario's result as ``run_scenario`` leaves it, before :func:`score`."""
    superseded = {"text": "lives in Bergen", "status": "superseded"}
    probe = {
        "retired_in_facts": [superseded] if retired else [],
        "stale_in_facts": [],
        "retired_elsewhere": [superseded],
        "retired_noted": [superseded, {"text": "smokes", "status": "dismissed"}],
    }
    fact = {"text": "lives in Oslo", "subject": "user", "label": None}
    filed = {"action": "added", "text": "lives in Oslo", "replaced": None}
    extracted = {"turns": [1, 4], "facts": [fact], "filed": [filed], "error": None, "seconds": 2.0}
    step = {
        "requests": {"saved": ["likes tea"], "dismissed": []},
        "consolidation_error": None,
        "ranges": [extracted],
        "extraction_failures": 0,
        "probe": probe,
    }
    return {
        "name": name,
        "kind": "plain",
        "topic": "home",
        "error": None,
        "steps": [step, step],
        "expected": [{"expect": "Oslo", "found": [] if missing else ["lives in Oslo"]}],
        "missing": missing,
        "stale_current": [],
        "seconds": 30.0,
    }


def test_a_scenario_passes_only_with_nothing_missing_or_retired_in_a_prompt(
    update_report: ModuleType,
) -> None:
    clean, missing, retired = _result("a"), _result("b", missing=1), _result("c", retired=True)
    for result in (clean, missing, retired):
        update_report.score(result)
    assert [clean["passed"], missing["passed"], retired["passed"]] == [True, False, False]
    # The same fact in two probes counts once; noted counts only what is not elsewhere too.
    assert retired["counts"]["retired_in_prompt"] == 1
    assert clean["counts"]["retired_elsewhere"] == 1
    assert clean["counts"]["retired_noted"] == 1
    assert clean["counts"] | {"ranges": 2, "facts_extracted": 2, "saved": 2} == clean["counts"]


def test_the_report_traces_only_failures_and_judges_the_goals(update_report: ModuleType) -> None:
    results = [_result("passes"), _result("fails", retired=True)]
    for result in results:
        update_report.score(result)
    lines, summary, verdicts = update_report.report(results)
    cells = [line.split() for line in lines if line.startswith(("  passes ", "  fails "))]
    rows = {row[0]: row[2] for row in cells}
    assert rows == {"passes": "pass", "fails": "FAIL"}
    assert [line for line in lines if line.startswith("\n")] == ["\nfails (plain, home):"]
    assert summary["passed"] == 1
    assert summary["totals"]["retired_in_prompt"] == 1
    assert verdicts == {
        "scenarios_passing": "MISSED",
        "stale_values_current": "ok",
        "retired_in_prompt": "MISSED",
    }
