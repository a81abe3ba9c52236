"""Browser tests' plumbing: Debian's Chromium driven by playwright-core scripts.

Each script in ``tests/browser/`` takes its options as one JSON argument, drives the page as
a person would, and prints one JSON report (no assertions: the tests make them).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.needs import missing

BROWSER_DIR = Path(__file__).resolve().parent / "browser"


def browser_tools() -> tuple[str, str]:
    """Paths of node and chromium, once playwright-core is installed (else :func:`missing`)."""
    node = shutil.which("node")
    chromium = shutil.which("chromium")
    if node is None:
        missing("Node.js (`node`) is not installed: the browser tests drive Chromium from it")
    if chromium is None:
        missing("Chromium is not installed: `apt-get install -y chromium` (Debian's package)")
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        missing(f"playwright-core is not installed: run `npm ci --prefix {BROWSER_DIR}`")
    return node, chromium


def drive(node: str, script: str, options: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run ``tests/browser/<script>`` with ``options``; its report, with its stderr."""
    completed = subprocess.run(
        [node, str(BROWSER_DIR / script), json.dumps(options)],
        check=False,  # a failed step still prints its report
        cwd=BROWSER_DIR,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    try:
        report: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            f"the browser driver {script} printed no report (exit {completed.returncode}):\n"
            f"{completed.stdout}\n{completed.stderr}"
        )
    report["stderr"] = completed.stderr
    return report
