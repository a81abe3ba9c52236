"""What a test needs from the machine: skipped where it is missing, a failure under CI.

CI (``CI`` set) installs everything the tests need (``scripts/setup.sh --test``) and runs next
to ``../shared/data``: a test that would skip there fails instead, so a green run never hides
a test that did not run.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    """Skip a test that cannot run here (``reason`` says how to fix it); fail it under CI."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run every test)")
    pytest.skip(reason)


def hide_package(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``importlib.util.find_spec`` report ``module`` as not installed, for this test."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == module else real_find_spec(name, *args),
    )
