"""Soak benchmark: 100,000 turns over 10,000 conversations through a real server, RSS sampled.

Run from the repository root::

    python benchmarks/bench_soak.py                        # 100k turns, 10k conversations
    python benchmarks/bench_soak.py --quick                # 4k turns, 400 conversations
    python benchmarks/bench_soak.py --max-seconds 1500     # stop sending after 25 minutes
    python benchmarks/bench_soak.py --json /tmp/soak.json

A ``memory-chain serve`` process (uvicorn on 127.0.0.1) on a fresh data folder (SQLite, the
embedded vector index, the tier-3 backfill thread and the consolidation service running, as in
production) answers chat requests from ``--clients`` concurrent clients through
``POST /v1/chat/completions``; its chat model is the stub LLM of ``loadgen.py`` (fixed reply
at once, in its own process). Each request stores two turns. Conversations are visited in
waves of ``--wave`` (2,000) conversations: each conversation of a wave gets one request per
pass, 5 passes (10 turns: the default consolidation threshold, so each conversation is
consolidated once, the stub writing the summary), then the next wave starts. Waves are larger
than tier 1's cap (``memory_tier1_max_conversations``, 1,000 by default), so every request
misses tier 1 and evicts another conversation, and a run stopped early has exercised
consolidation as well.

Why through the server rather than ``MemoryManager`` in-process: what must stay bounded is
the server process (uvicorn, FastAPI, the chain, tier 1, consolidation, the backfill and
their caches together), and the server path measured fast enough on 2 cores to run the full
100k turns in about the time budget (see the README figures).

Every ``--sample-every`` stored turns the server's RSS (psutil, VmRSS) and ``/health`` (tier-3
queued turns: the embedding lag; tier-1 conversations) are sampled; the curve is printed
every ``--table-every`` turns, with its heap (``RssAnon``) and mapped-file (``RssFile``)
parts. When the clients stop, the backfill is left to drain (sampled every 5 s). Verdict (a
heuristic, printed with its figures): memory is "bounded" when the heap grew by at most
max(5 %, 25 MB) over the second half of the turns, once the embedded index's own data is
taken out (its heap per point is measured afterwards by ``bench_index_memory.py``, in a
process of its own, for as many points: the ids and payload indexes it keeps in RAM grow with
what is stored, not with requests). Mapped files grow with the data and the kernel can drop
them; VmRSS is printed too. A sample of conversations is read back and checked for
contiguous turn numbers. ``--rejudge FILE`` recomputes the verdict of a saved ``--json`` run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from common import environment, fmt, progress, summarize_ms
from loadgen import (
    Outcome,
    StubOllama,
    chat_once,
    check_conversations,
    client,
    server_memory_mb,
    server_rss_mb,
)

from tests.servers import RunningServer, server_env

USER = "soak-user"
QUICK = {
    "turns": 4_000,
    "conversations": 400,
    "tier1_max_conversations": 100,
    "wave": 200,
    "sample_every": 200,
    "table_every": 1_000,
}


@dataclass(frozen=True)
class Settings:
    turns: int = 100_000
    conversations: int = 10_000
    clients: int = 8
    sample_every: int = 2_000
    table_every: int = 10_000
    tier1_max_conversations: int | None = None  # the server's default
    max_seconds: float | None = None
    backfill_timeout: float = 900.0
    wave: int = 2_000  # conversations visited together (in passes) before moving on
    check_sample: int = 200
    seed: int = 1234
    quick: bool = False


async def health(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.get("/health")
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def sample_row(pid: int, stored: int, started: float, status: dict[str, Any]) -> dict[str, Any]:
    memory = server_memory_mb(pid)
    return {
        "turns": stored,
        "seconds": time.perf_counter() - started,
        "rss_mb": memory["rss"],
        "anon_mb": memory.get("anon"),
        "file_mb": memory.get("file"),
        "queued_turns": status["tier3"]["queued_turns"],
        "tier1_conversations": status["tier1"]["conversations"],
    }


def conversation_of(request: int, wave: int, per_conversation: int, conversations: int) -> int:
    """Request ``request``'s conversation: waves of ``wave`` conversations, visited in passes.

    A wave's conversations get one request each per pass, ``per_conversation`` passes, then
    the next wave starts: with waves larger than tier 1's cap every request misses tier 1,
    and every conversation reaches its full length (and the consolidation threshold) within
    its wave, so a run stopped early has exercised consolidation too.
    """
    per_wave = wave * per_conversation
    number, within = divmod(request, per_wave)
    return (number * wave + within % wave) % conversations


async def soak(settings: Settings, url: str, pid: int, started: float) -> dict[str, Any]:
    requests_total = settings.turns // 2
    ids = [f"soak-{n}" for n in range(settings.conversations)]
    wave = min(settings.wave, len(ids))
    per_conversation = max(1, requests_total // len(ids))
    outcome = Outcome()
    samples: list[dict[str, Any]] = []
    next_request = 0
    stored = 0
    deadline = started + settings.max_seconds if settings.max_seconds else None
    stopped_early = False
    window_start = 0  # latencies since the last sample start here

    async with client(url, USER, settings.clients + 1) as http:
        samples.append(sample_row(pid, 0, started, await health(http)))
        next_sample = settings.sample_every
        sample_lock = asyncio.Lock()

        async def worker() -> None:
            nonlocal next_request, stored, stopped_early, next_sample, window_start
            while next_request < requests_total:
                if deadline is not None and time.perf_counter() > deadline:
                    stopped_early = True
                    return
                j = next_request
                next_request += 1
                cid = ids[conversation_of(j, wave, per_conversation, len(ids))]
                text = f"note {j} about {cid}, keep it."
                if await chat_once(http, cid, text, outcome):
                    stored += 2
                if stored >= next_sample and not sample_lock.locked():
                    async with sample_lock:
                        row = sample_row(pid, stored, started, await health(http))
                        row["latency_ms"] = summarize_ms(outcome.latencies_ns[window_start:])
                        window_start = len(outcome.latencies_ns)
                        samples.append(row)
                        next_sample = (stored // settings.sample_every + 1) * settings.sample_every
                        progress(
                            f"{stored:,} turns, RSS {row['rss_mb']:.0f} MB, tier-3 queue "
                            f"{row['queued_turns']:,}, errors {outcome.error_count}",
                            started,
                        )

        load_started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(settings.clients)))
        load_seconds = time.perf_counter() - load_started
        samples.append(sample_row(pid, stored, started, await health(http)))

        # Let the backfill finish, sampling as it goes.
        drain: list[dict[str, Any]] = [samples[-1]]
        drain_started = time.perf_counter()
        while drain[-1]["queued_turns"] > 0:
            if time.perf_counter() - drain_started > settings.backfill_timeout:
                break
            await asyncio.sleep(5)
            drain.append(sample_row(pid, stored, started, await health(http)))
        drain_seconds = time.perf_counter() - drain_started

    rng = random.Random(settings.seed)
    acked = dict(outcome.acknowledged)
    picked = rng.sample(sorted(acked), min(settings.check_sample, len(acked)))
    check = await asyncio.to_thread(
        check_conversations, url, USER, {cid: acked[cid] for cid in picked}
    )
    return {
        "requests_acknowledged": sum(len(v) for v in acked.values()),
        "turns_stored": stored,
        "stopped_early": stopped_early,
        "load_seconds": load_seconds,
        "turns_per_second": stored / load_seconds if load_seconds else 0.0,
        "errors": outcome.error_count,
        "errors_by_kind": dict(outcome.errors),
        "error_examples": outcome.error_examples,
        "latency_ms": summarize_ms(outcome.latencies_ns),
        "samples": samples,
        "drain": {
            "seconds": drain_seconds,
            "queued_at_start": drain[0]["queued_turns"],
            "queued_at_end": drain[-1]["queued_turns"],
            "samples": drain,
        },
        "contiguity_sample": check,
    }


def bounded(
    samples: list[dict[str, Any]], index_mb_per_1k_points: float | None = None
) -> dict[str, Any]:
    """Heap growth over the second half of the turns, less the vector index's (the verdict).

    Args:
        samples: The run's samples.
        index_mb_per_1k_points: The embedded index's own heap per 1,000 points
            (``bench_index_memory.py``): the data it keeps in RAM, which grows with what is
            stored; ``None`` leaves it in.
    """
    last = samples[-1]
    half_turns = last["turns"] / 2
    middle = min(samples, key=lambda s: abs(s["turns"] - half_turns))
    growth = last["rss_mb"] - middle["rss_mb"]
    allowed = max(0.05 * middle["rss_mb"], 25.0)
    peak = max(s["rss_mb"] for s in samples)
    anon_growth = None
    index_growth = None
    if last.get("anon_mb") is not None and middle.get("anon_mb") is not None:
        anon_growth = last["anon_mb"] - middle["anon_mb"]
        # The heap is what a leak grows; mapped files grow with the data and can be dropped.
        growth, allowed = anon_growth, max(0.05 * middle["anon_mb"], 25.0)
        if index_mb_per_1k_points is not None:
            # One point per turn: what the index keeps for the turns added in the second half.
            index_growth = index_mb_per_1k_points * (last["turns"] - middle["turns"]) / 1000
            growth = anon_growth - index_growth
    return {
        "verdict_on": "heap (RssAnon)" if anon_growth is not None else "RSS",
        "anon_second_half_growth_mb": anon_growth,
        "index_second_half_growth_mb": index_growth,
        "index_mb_per_1k_points": index_mb_per_1k_points,
        "growth_judged_mb": growth,
        "rss_mb_at_half": middle["rss_mb"],
        "rss_mb_at_end": last["rss_mb"],
        "rss_mb_peak": peak,
        "second_half_growth_mb": last["rss_mb"] - middle["rss_mb"],
        "allowed_growth_mb": allowed,
        "bounded": growth <= allowed,
    }


def index_memory(points: int) -> float | None:
    """The embedded index's heap per 1,000 points, from ``bench_index_memory.py``."""
    script = Path(__file__).with_name("bench_index_memory.py")
    done = subprocess.run(
        [
            *(sys.executable, str(script), "--points", str(points)),
            *("--step", str(max(points // 20, 100)), "--json", "-"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(f"bench_index_memory.py failed: {done.stderr[-500:]}", file=sys.stderr)
        return None
    slope: float = json.loads(done.stdout)["heap_mb_per_1k_points"]
    return slope


def run(settings: Settings) -> dict[str, Any]:
    """The soak; every figure."""
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="memory-chain-soak-"))
    extra: dict[str, object] = {"log_level": "WARNING"}
    if settings.tier1_max_conversations:
        extra["memory_tier1_max_conversations"] = settings.tier1_max_conversations
    try:
        with StubOllama() as stub:
            server = RunningServer(folder / "data", server_env(folder / "data", stub.url, **extra))
            try:
                server.start()
                assert server.process is not None
                pid = server.process.pid
                progress(f"server up (pid {pid}), RSS {server_rss_mb(pid):.0f} MB", started)
                result = asyncio.run(soak(settings, server.url, pid, started))
                result["rss_mb_after_drain"] = server_rss_mb(pid)
                result["data_mb"] = sum(
                    f.stat().st_size for f in (folder / "data").rglob("*") if f.is_file()
                ) / (1024 * 1024)
            finally:
                server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # With the server gone: the embedded index's own heap for as many points, in a process
    # of its own, to tell the data the index keeps in RAM from a leak.
    progress("measuring the embedded index's heap per point (bench_index_memory.py)", started)
    slope = index_memory(result["turns_stored"])
    result["bounded"] = bounded(result["samples"] + result["drain"]["samples"][1:], slope)
    result["seconds"] = time.perf_counter() - started
    return result


def verdict_lines(b: dict[str, Any]) -> list[str]:
    """The memory verdict, with its figures."""
    heap, index = b["anon_second_half_growth_mb"], b.get("index_second_half_growth_mb")
    lines = [
        f"  RSS at half {b['rss_mb_at_half']:.0f} MB, at end {b['rss_mb_at_end']:.0f} MB, peak "
        f"{b['rss_mb_peak']:.0f} MB; second-half growth: RSS "
        f"{b['second_half_growth_mb']:+.0f} MB"
        + (f", heap (RssAnon) {heap:+.0f} MB" if heap is not None else "")
    ]
    if index is not None:
        lines.append(
            f"  of which the embedded index's data ({b['index_mb_per_1k_points']:.2f} MB per "
            f"1,000 points, bench_index_memory.py) {index:+.0f} MB; the rest "
            f"{b['growth_judged_mb']:+.0f} MB"
        )
    lines.append(
        f"  {b['verdict_on']} allowed {b['allowed_growth_mb']:.0f} MB: "
        + ("bounded" if b["bounded"] else "NOT BOUNDED")
    )
    return lines


def report(result: dict[str, Any], settings: Settings) -> list[str]:
    cap = settings.tier1_max_conversations or "default (1,000)"
    lines = [
        f"== soak: {result['turns_stored']:,} of {settings.turns:,} turns over "
        f"{settings.conversations:,} conversations, {settings.clients} clients, "
        f"tier-1 cap {cap} ==",
        f"  {'turns':>8} {'time s':>8} {'RSS MB':>8} {'anon MB':>8} {'file MB':>8} "
        f"{'tier-3 queue':>13} {'tier-1 convs':>13} {'p50 ms':>8} {'p95 ms':>8}",
    ]
    samples = result["samples"]
    table = [samples[0]]
    for boundary in range(settings.table_every, samples[-1]["turns"] + 1, settings.table_every):
        table.append(next(s for s in samples if s["turns"] >= boundary))
    if table[-1]["turns"] != samples[-1]["turns"]:
        table.append(samples[-1])
    for s in table:
        lat = s.get("latency_ms", {})
        lines.append(
            f"  {s['turns']:>8,} {s['seconds']:>8.0f} {s['rss_mb']:>8.0f} "
            f"{fmt(s.get('anon_mb')):>8} {fmt(s.get('file_mb')):>8} {s['queued_turns']:>13,} "
            f"{s['tier1_conversations']:>13,} "
            f"{fmt(lat.get('p50')):>8} {fmt(lat.get('p95')):>8}"
        )
    drain = result["drain"]
    lines.append(
        f"  backfill after the clients stopped: {drain['queued_at_start']:,} queued turns, "
        f"{drain['queued_at_end']:,} left after {drain['seconds']:.0f} s; RSS after "
        f"{result['rss_mb_after_drain']:.0f} MB"
    )
    lat = result["latency_ms"]
    lines.append(
        f"  {result['requests_acknowledged']:,} requests in {result['load_seconds']:.0f} s: "
        f"{result['turns_per_second']:.1f} turns/s; latency p50 {fmt(lat.get('p50'))} / p95 "
        f"{fmt(lat.get('p95'))} / p99 {fmt(lat.get('p99'))} ms; errors {result['errors']}"
        + (f" {result['errors_by_kind']}" if result["errors"] else "")
    )
    if result["stopped_early"]:
        lines.append(f"  STOPPED EARLY after --max-seconds {settings.max_seconds:g}")
    lines.extend(verdict_lines(result["bounded"]))
    check = result["contiguity_sample"]
    lines.append(
        f"  read back {len(check['problems']) or 'no'} problems in a sample of "
        f"{min(settings.check_sample, result['requests_acknowledged'])} conversations "
        f"({check['turns_checked']:,} turns, {check['summarized']} with a summary); data folder "
        f"{result['data_mb']:.0f} MB"
    )
    lines.extend(f"    CONTIGUITY: {p}" for p in check["problems"][:10])
    lines.extend(f"    error: {e}" for e in result["error_examples"][:5])
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4k turns over 400 conversations")
    parser.add_argument("--turns", type=int, help="stored turns in total (100,000)")
    parser.add_argument("--conversations", type=int, help="conversations (10,000)")
    parser.add_argument("--clients", type=int, help="concurrent clients (8)")
    parser.add_argument("--sample-every", type=int, help="turns between RSS samples (2,000)")
    parser.add_argument("--table-every", type=int, help="turns between table rows (10,000)")
    parser.add_argument(
        "--tier1-max-conversations", type=int, help="tier-1 LRU cap (server default 1,000)"
    )
    parser.add_argument("--wave", type=int, help="conversations visited together (2,000)")
    parser.add_argument("--max-seconds", type=float, help="stop sending after this long")
    parser.add_argument(
        "--backfill-timeout", type=float, help="longest wait for the backfill to drain (900 s)"
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument(
        "--rejudge", type=Path, help="recompute the memory verdict of a saved --json run"
    )
    args = parser.parse_args(argv)
    if args.rejudge:
        saved = json.loads(args.rejudge.read_text(encoding="utf-8"))["results"]
        slope = index_memory(saved["turns_stored"])
        for line in verdict_lines(bounded(saved["samples"] + saved["drain"]["samples"][1:], slope)):
            print(line)
        return 0

    settings = Settings(quick=args.quick)
    if args.quick:
        settings = replace(settings, **QUICK)
    overrides = {
        "turns": args.turns,
        "conversations": args.conversations,
        "clients": args.clients,
        "sample_every": args.sample_every,
        "table_every": args.table_every,
        "tier1_max_conversations": args.tier1_max_conversations,
        "max_seconds": args.max_seconds,
        "wave": args.wave,
        "backfill_timeout": args.backfill_timeout,
    }
    settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    load_start = os.getloadavg()
    print(
        f"memory_chain soak benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {load_start[0]:.2f}",
        flush=True,
    )
    result = run(settings)
    for line in report(result, settings):
        print(line)
    print(
        f"\ntotal run time {result['seconds']:.0f} s; load average at the end "
        f"{os.getloadavg()[0]:.2f}"
    )
    if args.json:
        payload = {
            "environment": environment(load_start),
            "settings": asdict(settings),
            "results": result,
        }
        args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"figures written to {args.json}")
    failed = result["errors"] or not result["contiguity_sample"]["ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
