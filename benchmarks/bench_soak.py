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

import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from harness import (
    Run,
    configure,
    memory_mb,
    parser,
    progress,
    rss_mb,
    run_and_report,
    scratch_server,
    summarize,
)
from loadgen import Outcome, chat_once, check_conversations, client
from soak_report import bounded, index_memory, report, verdict_lines

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
    memory = memory_mb(pid)
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
                        row["latency_ms"] = summarize(outcome.latencies_ns[window_start:])
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
        "latency_ms": summarize(outcome.latencies_ns),
        "samples": samples,
        "drain": {
            "seconds": drain_seconds,
            "queued_at_start": drain[0]["queued_turns"],
            "queued_at_end": drain[-1]["queued_turns"],
            "samples": drain,
        },
        "contiguity_sample": check,
    }


def run(settings: Settings, bench: Run) -> dict[str, Any]:
    """The soak; every figure."""
    extra: dict[str, object] = {"log_level": "WARNING"}
    if settings.tier1_max_conversations:
        extra["memory_tier1_max_conversations"] = settings.tier1_max_conversations
    with scratch_server("memory-chain-soak-", **extra) as server:
        bench.progress(f"server up (pid {server.pid}), RSS {rss_mb(server.pid):.0f} MB")
        result = asyncio.run(soak(settings, server.url, server.pid, bench.started))
        result["rss_mb_after_drain"] = rss_mb(server.pid)
        result["data_mb"] = server.data_mb()
    # With the server gone: the embedded index's own heap for as many points, in a process
    # of its own, to tell the data the index keeps in RAM from a leak.
    bench.progress("measuring the embedded index's heap per point (bench_index_memory.py)")
    slope = index_memory(result["turns_stored"])
    result["bounded"] = bounded(result["samples"] + result["drain"]["samples"][1:], slope)
    result["seconds"] = bench.seconds
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, quick="4k turns over 400 conversations")
    args.add_argument("--turns", type=int, help="stored turns in total (100,000)")
    args.add_argument("--conversations", type=int, help="conversations (10,000)")
    args.add_argument("--clients", type=int, help="concurrent clients (8)")
    args.add_argument("--sample-every", type=int, help="turns between RSS samples (2,000)")
    args.add_argument("--table-every", type=int, help="turns between table rows (10,000)")
    args.add_argument(
        "--tier1-max-conversations", type=int, help="tier-1 LRU cap (server default 1,000)"
    )
    args.add_argument("--wave", type=int, help="conversations visited together (2,000)")
    args.add_argument("--max-seconds", type=float, help="stop sending after this long")
    args.add_argument(
        "--backfill-timeout", type=float, help="longest wait for the backfill to drain (900 s)"
    )
    args.add_argument(
        "--rejudge", type=Path, help="recompute the memory verdict of a saved --json run"
    )
    options = args.parse_args(argv)
    if options.rejudge:
        saved = json.loads(options.rejudge.read_text(encoding="utf-8"))["results"]
        slope = index_memory(saved["turns_stored"])
        for line in verdict_lines(bounded(saved["samples"] + saved["drain"]["samples"][1:], slope)):
            print(line)
        return 0

    settings = configure(Settings(), options, QUICK)
    result = run_and_report(
        "soak",
        options.json,
        settings,
        run,
        report,
    )
    failed = result["errors"] or not result["contiguity_sample"]["ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
