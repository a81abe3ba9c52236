"""Several replicas on one database: what a request pays for them, and chat throughput.

Run from the repository root::

    python benchmarks/bench_replicas.py                  # both parts, ~8 min on 2 cores
    python benchmarks/bench_replicas.py --quick          # a smoke run, ~2 min
    python benchmarks/bench_replicas.py --parts check    # only the per-request check
    python benchmarks/bench_replicas.py --parts throughput --setups 1 3 --rounds 5
    python benchmarks/bench_replicas.py --postgres-url postgresql+psycopg://u@h/postgres

Two parts (``--parts``), on a throwaway local PostgreSQL with pgvector, or on the server of
``--postgres-url`` (a fresh database per run, dropped afterwards):

- ``check`` (``replicas_check.py``): the cost of the tier-1 freshness check a replica makes
  before it serves a cached conversation, next to the memory read it protects, on SQLite
  and PostgreSQL; and the consolidation lock.
- ``throughput`` (``replicas_throughput.py``): chat requests/s and latency with 1 replica, 3
  replicas with requests spread over them, and 3 routed by conversation (``--setups``),
  alternating, ``--rounds`` times; every run reads its conversations and points back.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import replicas_check
import replicas_throughput
from harness import Run, configure, local_postgres, parser, postgres_database
from replicas_throughput import QUICK, Settings, parse_setup


def run(settings: Settings, bench: Run) -> tuple[dict[str, Any], list[str]]:
    """The chosen parts; their figures and report lines."""
    results: dict[str, Any] = {}
    lines: list[str] = []
    with contextlib.ExitStack() as stack:
        server_url = settings.postgres_url or stack.enter_context(local_postgres())
        if "check" in settings.parts:
            bench.progress("check: SQLite")
            folder = Path(stack.enter_context(TemporaryDirectory(prefix="mc-bench-replicas-")))
            sqlite = f"sqlite:///{folder / 'memory.db'}"
            check = {"sqlite": replicas_check.measure(sqlite, settings.samples, settings.seed)}
            bench.progress("check: PostgreSQL")
            with postgres_database(server_url) as url:
                check["postgresql"] = replicas_check.measure(url, settings.samples, settings.seed)
            results["check"] = check
            for name, result in check.items():
                lines += replicas_check.report(name, result)
        if "throughput" in settings.parts:
            throughput = replicas_throughput.run(settings, server_url, bench.started)
            results["throughput"] = throughput
            lines += replicas_throughput.report(throughput, settings)
    return results, lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, quick="one round of 10 clients x 10 requests, a shorter check")
    args.add_argument("--parts", nargs="+", choices=("check", "throughput"), help="(both)")
    args.add_argument("--samples", type=int, help="check: reads per kind (3000)")
    args.add_argument("--seed", type=int, help="check: random seed (7)")
    args.add_argument("--postgres-url", help="a server to use (a database is made and dropped)")
    args.add_argument("--clients", type=int, help="throughput: concurrent clients (30)")
    args.add_argument("--turns", type=int, help="throughput: chat requests per client (20)")
    args.add_argument("--conversations", type=int, help="throughput: conversations shared (10)")
    args.add_argument("--rounds", type=int, help="throughput: rounds over the setups (3)")
    args.add_argument("--setups", nargs="+", help="replica counts; N-sticky routes by conversation")
    options = args.parse_args(argv)
    for name in ("parts", "setups"):
        if getattr(options, name):
            setattr(options, name, tuple(getattr(options, name)))
    for setup in options.setups or ():
        parse_setup(setup)
    settings = configure(Settings(), options, QUICK)
    bench = Run("replicas")
    print(bench.header(), flush=True)
    results, lines = run(settings, bench)
    verdicts = {}
    if "throughput" in results:
        bad = replicas_throughput.failed(results["throughput"])
        verdicts["0 errors, turns contiguous, one point per turn"] = "MISSED" if bad else "ok"
    bench.finish(lines, options.json, settings=settings, results=results, verdicts=verdicts)
    return 1 if "MISSED" in verdicts.values() else 0


if __name__ == "__main__":
    sys.exit(main())
