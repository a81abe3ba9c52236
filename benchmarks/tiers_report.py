"""The report of ``bench_tiers.py``: one table per scale, and every goal's verdict."""

from __future__ import annotations

from typing import Any

from harness import fmt, stats_header, stats_row, verdict
from tiers_phases import USERS

GOALS = {
    "tier1_p99_us": 50.0,
    "append_p95_ms": 2.0,
    "search_p95_ms": 5.0,
}


def _row(label: str, stats: dict[str, Any], goal: tuple[str, float] | None = None) -> str:
    unit = "µs" if stats.get("unit") == "us" else "ms"
    if not stats.get("n"):
        return f"  {label:<46} {'no samples':>8}"
    judged = ""
    if goal is not None:
        key, limit = goal
        judged = f"{key} <= {fmt(limit, 0)} {unit}: " + verdict(stats[key], limit, False)
    return stats_row(label, stats, width=46) + f"  {unit:<3} {judged}"


def verdicts(result: dict[str, Any]) -> dict[str, str]:
    """Every goal's ok/MISSED at one scale, for the JSON file."""
    scale = f"{result['conversations']}x{result['turns']}"
    t1 = result["tier1"]
    out = {
        f"{scale} tier1 get_messages p99": _ok(t1["get_messages_us"], "p99", "tier1_p99_us"),
        f"{scale} tier1 history.messages p99": _ok(
            t1["history_messages_us"], "p99", "tier1_p99_us"
        ),
    }
    for mode, stats in result["append_ms"].items():
        out[f"{scale} append {mode} p95"] = _ok(stats, "p95", "append_p95_ms")
    for key, stats in result["search_ms"].items():
        out[f"{scale} search {key} p95"] = _ok(stats, "p95", "search_p95_ms")
    return out


def _ok(stats: dict[str, Any], key: str, goal: str) -> str:
    return verdict(stats[key], GOALS[goal], False) if stats.get("n") else "n/a"


def report(result: dict[str, Any]) -> str:
    """The figures of one scale, with the goals' verdicts."""
    lines = []
    conv, turns = result["conversations"], result["turns"]
    db = result["database"]
    lines.append(f"== {conv:,} conversations x {turns:,} turns ({USERS} users, {db['dialect']}) ==")
    pop = result["populate"]
    size = f", database {db['file_mb']:.1f} MB" if "file_mb" in db else ""
    lines.append(
        f"  populate: {pop['turns']:,} turns in {pop['calls']:,} append_turns calls of "
        f"{pop['turns_per_call']}: {pop['seconds']:.1f} s "
        f"({pop['turns_per_second']:,.0f} turns/s){size}"
    )
    rss = result["rss_mb"]
    lines.append(
        f"  RSS: start {rss['start']:.0f} MB, after populate {rss['after_populate']:.0f} MB, "
        f"after tier-1 reads {rss['after_reads']:.0f} MB, end {rss['end']:.0f} MB"
    )
    t1 = result["tier1"]
    ra = t1["random_access"]
    lines.append(
        f"  tier 1: TurnBuffer(max_turns={t1['buffer_max_turns']}, "
        f"max_conversations={t1['buffer_max_conversations']:,}) holds "
        f"{t1['buffered_conversations']:,}/{conv:,} conversations; hit rate of uniformly random "
        f"conversations {ra['hit_rate']:.1%} over {ra['accesses']:,} reads"
    )
    lines.append(stats_header("", width=46))
    goal_us = ("p99", GOALS["tier1_p99_us"])
    lines.append(_row("tier-1 TurnBuffer.get_messages (warm)", t1["get_messages_us"], goal_us))
    lines.append(_row("tier-1 history.messages (warm hit)", t1["history_messages_us"], goal_us))
    lines.append(_row("tier-1 new history + .messages (warm hit)", t1["new_history_messages_us"]))
    lines.append(_row("tier-1 history.messages, random conv: hit", ra["hit_us"]))
    lines.append(_row("tier-1 history.messages, random conv: miss", ra["miss_ms"]))
    for mode, stats in result["append_ms"].items():
        lines.append(
            _row(
                f"tier-2 append_turns, 1 turn, sync={mode}", stats, ("p95", GOALS["append_p95_ms"])
            )
        )
    for key, stats in result["search_ms"].items():
        query_kind, scope = key.split("/")
        label = f"tier-2 search {query_kind} q, one {scope}"
        lines.append(_row(label, stats, ("p95", GOALS["search_p95_ms"])))
    selectivity = result.get("query_selectivity")
    if selectivity:
        lines.append(
            "  query selectivity (median turns matched by the OR of a query's words): "
            + ", ".join(
                f"{kind} {selectivity[kind]['median_matching_turns']:,.0f} "
                f"({selectivity[kind]['median_matching_share']:.1%})"
                for kind in ("zipf", "content")
            )
        )
    examples = ", ".join(
        f"{key.split('/')[0]}: {stats['example_query']!r}"
        for key, stats in result["search_ms"].items()
        if key.endswith("/user")
    )
    lines.append(f"  example queries: {examples}")
    return "\n".join(lines)
