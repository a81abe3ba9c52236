"""Chat throughput with 1 and with 3 replicas on one PostgreSQL with pgvector.

Part ``throughput`` of ``bench_replicas.py``. Each run starts its replicas (``memory-chain
serve`` processes, ``vector_backend=pgvector``, every tier in one fresh database) and uses the
stub LLM of ``loadgen.py`` (a fixed reply at once, in its own process: what is measured is
memory_chain, not a model). ``clients`` clients send ``turns`` chat requests each, only the
new message and a conversation id; client ``c``'s ``t``-th request goes to conversation
``(c + t) % conversations`` and to replica ``(c + t) % replicas``, as a load balancer
spreading requests would, so every conversation is written through every replica; in an
``N-sticky`` setup, to the replica of its conversation, as a load balancer routing by
conversation would (each replica's tier-1 cache then stays valid between requests). Runs
alternate between the setups, the order reversed every other round, since the machine is
shared.

Per run: requests/s, latency p50/p95, errors, the tier-3 backlog when the clients stop and
how long the replicas' backfills (which claim turns from one shared queue) take to drain it,
the servers' CPU seconds per request, the machine's CPU use and 1-minute load average during
the load, and a read-back of every conversation (turns 1..N, every acknowledged message
stored once) and of tier 3 (one point per turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import psutil
from harness import (
    alternated,
    memory_chain_server,
    postgres_database,
    progress,
    summarize,
    table,
    wait_for_backfill,
)
from loadgen import StubOllama, check_conversations, run_clients

USER = "scale-user"
#: ``--quick``: a smoke run of the throughput part, and a shorter check.
QUICK = {"clients": 10, "turns": 10, "rounds": 1, "samples": 500}


@dataclass(frozen=True)
class Settings:
    """Both parts' settings (``bench_replicas.py --help``)."""

    parts: tuple[str, ...] = ("check", "throughput")
    samples: int = 3_000
    seed: int = 7
    postgres_url: str | None = None
    clients: int = 30
    turns: int = 20
    conversations: int = 10
    rounds: int = 3
    setups: tuple[str, ...] = field(default=("1", "3", "3-sticky"))
    quick: bool = False


def parse_setup(setup: str) -> tuple[int, bool]:
    """``"3"`` -> (3 replicas, requests spread); ``"3-sticky"`` -> (3, routed by conversation)."""
    count, _, mode = setup.partition("-")
    if not count.isdigit() or int(count) < 1 or mode not in ("", "sticky"):
        raise SystemExit(f"a setup is a replica count, optionally -sticky (3-sticky): {setup!r}")
    return int(count), mode == "sticky"


def _cpu_seconds(pids: Sequence[int]) -> float:
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def _points(database_url: str) -> tuple[int, int]:
    """(points, distinct turns) of the measured conversations in the turns' collection."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT count(*), count(DISTINCT (user_id, conversation_id, turn_number)) "
                "FROM vector_points WHERE collection = 'conversation_memory' "
                "AND conversation_id LIKE 'scale-%'"
            )
        ).one()
    engine.dispose()
    return int(row[0]), int(row[1])


def run_one(settings: Settings, setup: str, llm_url: str, database_url: str) -> dict[str, Any]:
    """One setup's run on a fresh database."""
    replicas, sticky = parse_setup(setup)
    extra = {"database_url": database_url, "vector_backend": "pgvector", "log_level": "WARNING"}
    with TemporaryDirectory(prefix="mc-scale-") as folder, contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(memory_chain_server(Path(folder) / f"r{n}", llm_url, **extra))
            for n in range(replicas)
        ]
        urls = [server.url for server in servers]
        pids = [server.pid for server in servers]
        # Warm-up outside the measured conversations: each replica loads its lazy state.
        asyncio.run(run_clients(urls, USER, ["warm-up"], clients=replicas, turns=3))
        cpu_before, machine = _cpu_seconds(pids), psutil.cpu_times()
        ids = [f"scale-{n}" for n in range(settings.conversations)]
        outcome = asyncio.run(
            run_clients(
                urls, USER, ids, clients=settings.clients, turns=settings.turns, sticky=sticky
            )
        )
        cpu = _cpu_seconds(pids) - cpu_before
        after, load = psutil.cpu_times(), os.getloadavg()[0]
        idle = (after.idle - machine.idle) / max(sum(after) - sum(machine), 1e-9)
        drain = wait_for_backfill(urls[0], timeout=300, poll=0.2)
        check = check_conversations(urls[-1], USER, dict(outcome.acknowledged))
        problems = [p for server in servers for p in server.log_problems()]
    requests = sum(len(texts) for texts in outcome.acknowledged.values())
    points, distinct = _points(database_url)
    return {
        "setup": setup,
        "replicas": replicas,
        "sticky": sticky,
        "requests": requests,
        "errors": outcome.error_count,
        "error_examples": outcome.error_examples,
        "seconds": outcome.seconds,
        "requests_per_second": requests / outcome.seconds if outcome.seconds else 0.0,
        "latency_ms": summarize(outcome.latencies_ns),
        "backlog_at_end": drain["queued_at_end_of_load"],
        "drain_seconds": drain["drain_seconds"],
        "server_cpu_ms_per_request": 1000 * cpu / max(requests, 1),
        "machine_cpu_busy": 1.0 - idle,
        "load_average_1m": load,
        "contiguity": check,
        "points": points,
        "points_distinct": distinct,
        "turns_stored": check["turns_checked"],
        "server_log_problems": problems[:10],
        "ok": bool(check["ok"]) and points == distinct == check["turns_checked"],
    }


def run(settings: Settings, server_url: str, started: float) -> dict[str, list[dict[str, Any]]]:
    """Every setup, ``rounds`` times, alternating; each run on a fresh database."""
    results: dict[str, list[dict[str, Any]]] = {setup: [] for setup in settings.setups}
    with StubOllama() as stub:
        for number in range(settings.rounds):
            for setup in alternated(settings.setups, number):
                progress(f"throughput round {number + 1}: {setup} replica(s)", started)
                with postgres_database(server_url) as database_url:
                    results[setup].append(run_one(settings, setup, stub.url, database_url))
    return results


def _median(runs: list[dict[str, Any]], *path: str) -> float:
    values = []
    for run_ in runs:
        value: Any = run_
        for key in path:
            value = value[key]
        values.append(float(value))
    return statistics.median(values)


def failed(results: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether any run had errors, a conversation read back wrong, or not one point per turn."""
    return any(r["errors"] or not r["ok"] for runs in results.values() for r in runs)


def report(results: dict[str, list[dict[str, Any]]], settings: Settings) -> list[str]:
    """The throughput table (medians over the rounds) and the ratios to one replica."""
    lines = [
        f"== chat throughput: {settings.clients} clients x {settings.turns} requests over "
        f"{settings.conversations} conversations, {settings.rounds} round(s); medians ==",
    ]
    columns = {
        "req/s": ("requests_per_second",),
        "p50 ms": ("latency_ms", "p50"),
        "p95 ms": ("latency_ms", "p95"),
        "backlog": ("backlog_at_end",),
        "drain s": ("drain_seconds",),
        "cpu ms/req": ("server_cpu_ms_per_request",),
        "busy %": ("machine_cpu_busy",),
        "load": ("load_average_1m",),
    }
    rows = []
    for setup, runs in results.items():
        medians = {name: _median(runs, *path) for name, path in columns.items()}
        medians["busy %"] *= 100
        errors = sum(r["errors"] for r in runs)
        checks = "ok" if all(r["ok"] for r in runs) else "FAILED"
        rows.append((setup, *medians.values(), errors, checks))
    lines += table(("replicas", *columns, "errors", "checks"), rows, digits=1)
    for runs in results.values():
        for run_ in runs:
            lines.extend(f"    {p}" for p in run_["contiguity"]["problems"][:5])
            lines.extend(f"    error: {e}" for e in run_["error_examples"][:3])
            lines.extend(f"    server log: {p}" for p in run_["server_log_problems"][:3])
    one = results.get("1")
    for setup, runs in results.items():
        if one and setup != "1":
            ratio = _median(runs, "requests_per_second") / _median(one, "requests_per_second")
            cpu = _median(runs, "server_cpu_ms_per_request") / _median(
                one, "server_cpu_ms_per_request"
            )
            lines.append(
                f"  {setup} / 1: throughput {ratio:.2f}x, server CPU per request {cpu:.2f}x"
            )
    return lines
