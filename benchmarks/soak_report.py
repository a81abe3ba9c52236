"""The soak's verdict and report: is the server's memory bounded, and the figures by turns.

The heap (``RssAnon``) of the server is judged over the second half of the turns, once the
embedded vector index's own data is taken out: its heap per point is measured apart by
``bench_index_memory.py``, in a process of its own, for as many points as turns were stored
(the ids and payload indexes it keeps in RAM grow with what is stored, not with requests).
Mapped files grow with the data and the kernel can drop them; VmRSS is printed too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import fmt, second_half, stats_cells, table


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
    middle, last = second_half(samples, "turns")
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


def report(result: dict[str, Any], settings: Any) -> list[str]:
    """The soak's table (every ``settings.table_every`` turns), backfill, latency, verdict."""
    cap = settings.tier1_max_conversations or "default (1,000)"
    lines = [
        f"== soak: {result['turns_stored']:,} of {settings.turns:,} turns over "
        f"{settings.conversations:,} conversations, {settings.clients} clients, "
        f"tier-1 cap {cap} ==",
    ]
    samples = result["samples"]
    shown = [samples[0]]
    for boundary in range(settings.table_every, samples[-1]["turns"] + 1, settings.table_every):
        shown.append(next(s for s in samples if s["turns"] >= boundary))
    if shown[-1]["turns"] != samples[-1]["turns"]:
        shown.append(samples[-1])
    headers = ("turns", "time s", "RSS MB", "anon MB", "file MB", "tier-3 queue", "tier-1 convs")
    rows = [
        (s["turns"], round(s["seconds"]), round(s["rss_mb"]), s.get("anon_mb"), s.get("file_mb"),
         s["queued_turns"], s["tier1_conversations"],
         *stats_cells(s.get("latency_ms", {}), ("p50", "p95")))
        for s in shown
    ]  # fmt: skip
    lines += table((*headers, "p50 ms", "p95 ms"), rows)
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
