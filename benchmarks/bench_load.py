"""Concurrency benchmark: many chat clients against a real server, on SQLite and PostgreSQL.

Run from the repository root::

    python benchmarks/bench_load.py                       # 50 clients x 100 turns, both DBs
    python benchmarks/bench_load.py --quick               # 10 clients x 20 turns, smoke run
    python benchmarks/bench_load.py --database sqlite --json /tmp/load.json
    python benchmarks/bench_load.py --database postgres --postgres-url postgresql+psycopg://u@h/db

For each database a ``memory-chain serve`` process (uvicorn on 127.0.0.1, as in the tests)
runs on a fresh data folder: SQLite under it, or a new database on the PostgreSQL server of
``--postgres-url`` (dropped afterwards) or on a throwaway local server started like the test
run's. The server's chat model is the stub LLM of ``loadgen.py`` (Ollama API, fixed reply at
once, in its own process), because turns are only stored by chatting. ``--clients`` clients
(one asyncio loop, one keep-alive connection each) send ``--turns`` requests each to
``POST /v1/chat/completions`` with only the new message and a ``conversation_id``; client
``c``'s ``t``-th request goes to conversation ``(c + t) % --conversations``, so several clients
write to each conversation at once. Each acknowledged request stores two turns (the message
and the reply).

Reported: errors (anything but a 200 with the stub's reply; must be 0), latency p50/p95/p99,
throughput (requests/s and stored turns/s), the tier-3 backfill's lag when the clients stop,
and a read-back of every conversation through ``GET /v1/conversations/{id}/turns``: turn
numbers exactly 1..N with N = 2 x acknowledged requests, every acknowledged message stored
once, each followed by its reply.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gil_profile
from harness import (
    Run,
    configure,
    parser,
    postgres_database,
    rss_mb,
    run_and_report,
    scratch_server,
    stats_cells,
    summarize,
    table,
    wait_for_backfill,
)
from loadgen import StubOllama, check_conversations, run_clients

USER = "load-user"
QUICK = {"clients": 10, "turns": 20, "conversations": 5}


@dataclass(frozen=True)
class Settings:
    clients: int = 50
    turns: int = 100
    conversations: int = 10
    database: str = "both"  # sqlite | postgres | both
    postgres_url: str | None = None
    backfill_timeout: float = 300.0
    quick: bool = False
    py_spy: Path | None = None


def py_spy_output(path: Path | None, database: str) -> Path | None:
    """Where the profile of ``database``'s run goes (``FILE-<database>``)."""
    return path.with_name(f"{path.stem}-{database}{path.suffix or '.txt'}") if path else None


def start_py_spy(pid: int, out: Path | None) -> subprocess.Popen[bytes] | None:
    """Sample the server's threads with py-spy into ``out`` (collapsed stacks), if asked."""
    if out is None:
        return None
    binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    command = [binary, "record", "--pid", str(pid), "--format", "raw", "--rate", "100"]
    command += ["--threads", "--gil", "--nonblocking", "--output", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    return process


def stop_py_spy(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)


def run_one(settings: Settings, database: str, llm_url: str, database_url: str | None) -> dict:
    extra: dict[str, object] = {"log_level": "WARNING"}
    if database_url:
        extra["database_url"] = database_url
    started_at = time.perf_counter()
    with scratch_server(f"memory-chain-load-{database}-", llm_url=llm_url, **extra) as server:
        startup = time.perf_counter() - started_at
        # Warm-up outside the measured conversations: first requests load lazy state.
        asyncio.run(run_clients(server.url, USER, ["warm-up"], clients=2, turns=3))
        rss_before = rss_mb(server.pid)
        ids = [f"load-{n}" for n in range(settings.conversations)]
        profile = py_spy_output(settings.py_spy, database)
        profiler = start_py_spy(server.pid, profile)
        outcome = asyncio.run(
            run_clients(server.url, USER, ids, clients=settings.clients, turns=settings.turns)
        )
        stop_py_spy(profiler)
        rss_after = rss_mb(server.pid)
        backfill = wait_for_backfill(server.url, settings.backfill_timeout)
        check = check_conversations(server.url, USER, dict(outcome.acknowledged))
        problems = server.log_problems()
    requests = sum(len(v) for v in outcome.acknowledged.values())
    gil = gil_profile.report(profile, requests) if profile and profile.exists() else []
    return {
        "database": database,
        "startup_seconds": startup,
        "requests_sent": settings.clients * settings.turns,
        "requests_acknowledged": requests,
        "turns_stored": 2 * requests,
        "errors": outcome.error_count,
        "errors_by_kind": dict(outcome.errors),
        "error_examples": outcome.error_examples,
        "seconds": outcome.seconds,
        "requests_per_second": requests / outcome.seconds if outcome.seconds else 0.0,
        "turns_per_second": 2 * requests / outcome.seconds if outcome.seconds else 0.0,
        "latency_ms": summarize(outcome.latencies_ns),
        "backfill": backfill,
        "contiguity": check,
        "server_rss_mb": {"before": rss_before, "after": rss_after},
        "server_log_problems": problems[:20],
        "gil_profile": gil,
    }


def run(settings: Settings, bench: Run) -> dict[str, Any]:
    """Every configured database in turn; the figures of each."""
    databases = ["sqlite", "postgres"] if settings.database == "both" else [settings.database]
    results: dict[str, Any] = {}
    with StubOllama() as stub:
        for database in databases:
            bench.progress(f"{database}: {settings.clients} clients x {settings.turns} turns")
            if database == "sqlite":
                results[database] = run_one(settings, database, stub.url, None)
            else:
                with postgres_database(settings.postgres_url) as url:
                    results[database] = run_one(settings, database, stub.url, url)
    return results


def report(results: dict[str, Any], settings: Settings) -> list[str]:
    lines = [
        f"== {settings.clients} clients x {settings.turns} chat requests over "
        f"{settings.conversations} conversations (2 turns stored per request) ==",
    ]
    lines += table(
        ("database", "errors", "req", "p50 ms", "p95 ms", "p99 ms", "max ms", "req/s", "turns/s",
         "contiguous"),
        [
            (name, r["errors"], r["requests_acknowledged"], *stats_cells(r["latency_ms"]),
             round(r["requests_per_second"], 1), round(r["turns_per_second"], 1),
             r["contiguity"]["ok"])
            for name, r in results.items()
        ],
        digits=1,
    )  # fmt: skip
    for name, r in results.items():
        b = r["backfill"]
        lines.append(
            f"  {name}: {r['contiguity']['turns_checked']:,} turns read back; tier-3 backlog "
            f"{b['queued_at_end_of_load']} turns when the clients stopped, drained in "
            f"{b['drain_seconds']:.1f} s ({b['queued_after_wait']} left); server RSS after "
            "start-up and warm-up "
            f"{r['server_rss_mb']['before']:.0f} -> {r['server_rss_mb']['after']:.0f} MB; "
            f"start-up {r['startup_seconds']:.1f} s"
        )
        if r["errors"]:
            lines.append(f"    errors: {r['errors_by_kind']}")
            lines.extend(f"      {e}" for e in r["error_examples"])
        for problem in r["contiguity"]["problems"][:10]:
            lines.append(f"    CONTIGUITY: {problem}")
        for problem in r["server_log_problems"][:5]:
            lines.append(f"    server log: {problem}")
        lines.extend(f"    {line}" for line in r["gil_profile"])
    if len(results) == 2:
        s, p = results["sqlite"], results["postgres"]
        lines.append(
            f"  postgres / sqlite: p95 {p['latency_ms']['p95'] / s['latency_ms']['p95']:.2f}x, "
            f"throughput {p['turns_per_second'] / s['turns_per_second']:.2f}x"
        )
    return lines


def verdicts(results: dict[str, Any]) -> dict[str, str]:
    """Every goal's ok/MISSED, for the JSON file."""
    return {
        f"{name} 0 errors, turn numbers contiguous": (
            "ok" if not r["errors"] and r["contiguity"]["ok"] else "MISSED"
        )
        for name, r in results.items()
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, quick="10 clients x 20 turns smoke run")
    args.add_argument("--clients", type=int, help="concurrent clients (50)")
    args.add_argument("--turns", type=int, help="chat requests per client (100)")
    args.add_argument("--conversations", type=int, help="conversations shared (10)")
    args.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    args.add_argument(
        "--postgres-url",
        help="a PostgreSQL server (SQLAlchemy URL) to create a fresh database on; default: "
        "start a throwaway local server",
    )
    args.add_argument(
        "--py-spy",
        type=Path,
        metavar="FILE",
        help="sample the server with py-spy during the load (collapsed stacks, FILE-<database>)",
    )
    options = args.parse_args(argv)
    settings = configure(Settings(), options, QUICK)

    results = run_and_report(
        "load",
        options.json,
        settings,
        run,
        report,
        verdicts=verdicts,
    )
    failed = any(r["errors"] or not r["contiguity"]["ok"] for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
