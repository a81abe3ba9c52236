"""A test that cannot run here is skipped, and fails under CI, where everything must run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_missing_skips_here_and_fails_under_ci(tmp_path: Path) -> None:
    test = tmp_path / "test_needs_data.py"
    test.write_text(
        "from tests.needs import missing\n\n\n"
        "def test_it() -> None:\n"
        "    missing('the data is not here: put it in ../shared/data')\n"
    )
    for ci, outcome in (("", "1 skipped"), ("true", "1 failed")):
        env = {key: value for key, value in os.environ.items() if key != "CI"}
        env["PYTHONPATH"] = str(ROOT)
        if ci:
            env["CI"] = ci
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(test)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
            check=False,
        )
        assert outcome in done.stdout, done.stdout[-2000:]
        assert "the data is not here" in done.stdout
