"""``python -m memory_chain.cli`` is the ``memory-chain`` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).parent / "memory-chain")


def test_python_dash_m_runs_the_command() -> None:
    env = {**os.environ, "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
    script = subprocess.run(
        [CLI, "import", "--help"], capture_output=True, text=True, env=env, check=True
    )
    module = subprocess.run(
        [sys.executable, "-m", "memory_chain.cli", "import", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "Usage: memory-chain import" in module.stdout
    assert module.stdout == script.stdout
