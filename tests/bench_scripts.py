"""The benchmark scripts' modules, imported as the scripts import each other.

The benchmarks run from the repository root (``python benchmarks/bench_x.py``), so Python
puts ``benchmarks/`` first on the import path and they import ``harness``, ``update_report``
and the like by their plain names; a test does the same for the time of its fixture::

    @pytest.fixture(scope="module")
    def harness() -> Iterator[ModuleType]:
        with benchmark_module("harness") as module:
            yield module
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

#: The benchmark scripts' folder.
BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@contextmanager
def benchmark_module(name: str) -> Iterator[ModuleType]:
    """``benchmarks/<name>`` imported with ``benchmarks/`` first on the path, then taken off it.

    Args:
        name: The module's (or package's) name in ``benchmarks/``, e.g. ``"harness"``.

    Yields:
        The module.
    """
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))
