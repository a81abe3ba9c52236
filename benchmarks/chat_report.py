"""The report of ``bench_chat.py``: each part's tables, with the goals' verdicts."""

from __future__ import annotations

from typing import Any

from chat_stack import GOALS, UNSUMMARIZED_TAIL, Settings
from harness import fmt, goal_line, stats_header, stats_row, verdict


def background_lines(figures: dict[str, Any], indent: str = "    ") -> list[str]:
    lines = []
    for kind, entry in figures.items():
        parts = [
            f"embedded {entry['embedded_turns']:,} turns in {entry['embed_batches']:,} batches "
            f"({entry['embed_ms_total'] / 1e3:.1f} s)"
        ]
        if entry["drain_calls"]:
            parts.append(
                f"{entry['drain_calls']:,} drain calls ({entry['drain_ms_total'] / 1e3:.1f} s, "
                f"longest {fmt(entry['drain_ms_max'])} ms)"
            )
        if entry["flushes"]:
            parts.append(
                f"{entry['flushes']} index flushes (p50 {fmt(entry['flush_ms_p50'])} ms, max "
                f"{fmt(entry['flush_ms_max'])} ms)"
            )
        if entry["summaries_stored"]:
            parts.append(f"{entry['summaries_stored']} summaries stored")
        lines.append(f"{indent}{kind:<14} " + ", ".join(parts))
    return lines


def report(result: dict[str, Any], settings: Settings) -> list[str]:
    """Every part's figures, with the goals' verdicts."""
    return [
        *setup_lines(result["setup"], settings),
        *overhead_lines(result["overhead"], result["background_part1"], settings),
        *consolidation_lines(result["consolidation"], settings),
        *gil_lines(result, settings),
    ]


def setup_lines(setup: dict[str, Any], settings: Settings) -> list[str]:
    lines: list[str] = []
    lines.append(
        f"== setup: {settings.conversations} conversations x {settings.turns} turns over "
        f"{settings.users} users =="
    )
    lines.append(
        f"  model load {setup['model_load_seconds']:.1f} s; stored in "
        f"{setup['store_seconds']:.1f} s; embedded {setup['points']:,} points in "
        f"{setup['drain_seconds']:.1f} s ({setup['drain_turns_per_second']:,.0f} turns/s); "
        f"summaries up to turn {max(1, settings.turns - UNSUMMARIZED_TAIL)} in "
        f"{setup['summaries_seconds']:.1f} s; RSS {setup['rss_mb_after_setup']:,.0f} MB"
    )

    return lines


def overhead_lines(
    over: dict[str, Any], background: dict[str, Any], settings: Settings
) -> list[str]:
    lines: list[str] = []
    goal = GOALS["chat_overhead_p95_over_embed_p95"]
    lines.append("")
    lines.append(
        "== 1. overhead of a chat turn (fake LLM): chain.invoke and create_agent vs "
        "embed_query of the same question, alternating =="
    )
    lines.append(stats_header("latency, ms"))
    for mode, title in (
        ("settled", "settled (tier-3 backfill caught up before each measurement)"),
        ("back_to_back", "back to back (the previous turn's backfill may still run)"),
    ):
        entry = over[mode]
        lines.append(f"  -- {title}")
        lines.append(stats_row("chat turn: chain.invoke", entry["chat_ms"]))
        lines.append(stats_row("same chain over a no-op memory", entry["chain_no_memory_ms"]))
        lines.append(
            stats_row("memory's cost: chat - no-op chain, paired", entry["memory_overhead_ms"])
        )
        lines.append(stats_row("embed_query alone", entry["embed_query_ms"]))
        lines.append(
            goal_line(
                f"memory's cost p95 / embed_query p95 ({mode.replace('_', ' ')})",
                f"{entry['memory_p95_over_embed_p95']:.3f}",
                f"<= {goal:g}",
                verdict(entry["memory_p95_over_embed_p95"], goal, higher_is_better=False),
            )
        )
        lines.append(
            f"  {'chat p95 / embed_query p95 (whole chain, LCEL and fake LLM included)':<70}"
            f"{entry['chat_p95_over_embed_p95']:>6.3f}"
        )
        lines.extend(middleware_lines(entry, mode))
        lines.extend(profile_lines(entry, mode))
    breakdown = over["breakdown"]
    lines.append(
        f"  -- breakdown ({settings.breakdown_requests} requests, settled, operations in "
        "rotating order)"
    )
    lines.append(stats_header("latency, ms"))
    for label, key in (
        ("chain.stream: first chunk (what a streaming client waits)", "stream_first_chunk"),
        ("chain.stream: complete", "stream_complete"),
        ("MemoryManager.retrieve", "retrieve"),
        ("the budgeted prompt (build_prompt, 4,096-token window)", "budget"),
        ("  same, no token count cached (the tokenizer's cold case)", "budget_cold"),
        ("MemoryManager.add_turns (user + assistant turn)", "add_turns"),
        ("  SQLStore.append_turns alone (nobody woken)", "part_append_turns"),
        ("  consolidation trigger check (listener)", "part_trigger_check"),
        ("  same, conversation not in tier 1 (reads SQL)", "part_trigger_check_miss"),
        ("fake LLM alone: llm.stream(prompt)", "llm_stream"),
        ("chain over a no-op memory (LCEL + fake LLM)", "chain_no_memory"),
        ("embed_query alone", "embed_query"),
        (
            "embed_query while a keyword search runs (as retrieve)",
            "embed_query_during_keyword_search",
        ),
        ("retrieve, step by step: keyword search (FTS5, user)", "part_keyword_search"),
        ("  recent_turns (tier 1)", "part_recent_turns"),
        ("  summary (tier 1, SQL on a miss)", "part_summary"),
        ("  embed_query", "part_embed_query"),
        ("  EdgeIndex.search (user, top semantic_k = 20)", "part_vector_search"),
        ("  the user's facts, ranked (tier 2)", "part_facts_search"),
        ("  retired facts of the recalled conversations (outdated)", "part_facts_retired"),
    ):
        if key in breakdown:  # "budget_cold" needs a counter with a cache
            lines.append(stats_row(label, breakdown[key]))
    for size in sorted(int(k.split("_")[1]) for k in breakdown if k.startswith("retrieve_")):
        lines.append(
            stats_row(f"retrieve, users of {size:,} facts", breakdown[f"retrieve_{size}_facts"])
        )
        lines.append(
            stats_row(
                f"  the user's facts, ranked, {size:,} facts",
                breakdown[f"part_facts_search_{size}_facts"],
            )
        )
    lines.append(
        f"  {'chat p50 - (retrieve + add_turns + chain no-memory) p50, ms':<58} "
        f"{fmt(over['settled_chat_minus_parts_p50_ms']):>18}"
    )
    lines.append("  background work during part 1:")
    lines.extend(background_lines(background))
    return lines


def profile_lines(entry: dict[str, Any], mode: str) -> list[str]:
    """Memory's cost by the user's profile size (``--facts-per-user``), when there are several."""
    by_profile = entry["memory_overhead_by_profile_ms"]
    if len(by_profile) < 2:
        return []
    lines = [
        stats_row(f"memory's cost, users of {int(size):,} facts", stats)
        for size, stats in sorted(by_profile.items(), key=lambda item: int(item[0]))
    ]
    sizes = sorted(by_profile, key=int)
    small, large = sizes[0], sizes[-1]
    ratio = profile_ratio(entry)
    goal = GOALS["profile_largest_over_smallest_p50"]
    lines.append(
        goal_line(
            f"memory's cost p50, {int(large):,} / {int(small):,} facts ({mode.replace('_', ' ')})",
            f"{ratio:.3f}",
            f"<= {goal:g}",
            verdict(ratio, goal, higher_is_better=False),
        )
    )
    return lines


def profile_ratio(entry: dict[str, Any]) -> float:
    """Memory's cost p50 of the users with the largest profile over the smallest's."""
    by_profile = entry["memory_overhead_by_profile_ms"]
    sizes = sorted(by_profile, key=int)
    return float(by_profile[sizes[-1]]["p50"] / by_profile[sizes[0]]["p50"])


def middleware_lines(entry: dict[str, Any], mode: str) -> list[str]:
    """The agents' rows of a part-1 mode: memory's cost through MemoryMiddleware vs the chain."""
    goal = GOALS["middleware_cost_p95_over_chain_cost_p95"]
    p50, p95 = entry["middleware_over_chain_p50"], entry["middleware_over_chain_p95"]
    label_p50 = "memory's cost p50, middleware / chain"
    return [
        stats_row("agent: create_agent + MemoryMiddleware, invoke", entry["agent_ms"]),
        stats_row("same agent without the middleware", entry["agent_no_middleware_ms"]),
        stats_row(
            "memory's cost: agent - bare agent, paired", entry["middleware_memory_overhead_ms"]
        ),
        goal_line(
            f"memory's cost p95, middleware / chain ({mode.replace('_', ' ')})",
            f"{p95:.3f}",
            f"<= {goal:g}",
            verdict(p95, goal, higher_is_better=False),
        ),
        f"  {label_p50:<70}{p50:>6.3f}",
    ]


def consolidation_lines(cons: dict[str, Any], settings: Settings) -> list[str]:
    lines: list[str] = []
    goal = GOALS["consolidation_p95_over_idle_p95"]
    lines.append("")
    pause = f"{settings.think_ms:g} ms pause after each" if settings.think_ms else "back to back"
    lines.append(
        f"== 2. chat while consolidation runs: {settings.rounds} rounds of A/B blocks of "
        f"{settings.block_seconds:g} s, requests {pause}; B: message_threshold "
        f"{settings.message_threshold}, summarizer waits {settings.summary_seconds:g} s per call =="
    )
    lines.append(stats_header("chat latency, ms"))
    lines.append(stats_row("A: no consolidation", cons["phase_ms"]["A"]))
    lines.append(stats_row("B: consolidation running", cons["phase_ms"]["B"]))
    tagged = cons["tagged_ms"]
    for label, key in (
        ("  A: requests overlapping an index flush", "A_overlapping_flush"),
        ("  A: the others", "A_clear"),
        ("  B: overlapping a consolidation's summary write or drain", "B_overlapping_side_effects"),
        ("  B: overlapping an index flush", "B_overlapping_flush"),
        ("  B: neither", "B_clear"),
    ):
        if tagged[key]["n"]:
            lines.append(stats_row(label, tagged[key]))
        else:
            lines.append(f"  {label:<58} {0:>6}")
    lines.append(
        "  per block p95, ms: "
        + ", ".join(
            f"{b['phase']}{b['round'] + 1} {fmt(b['chat_ms']['p95'])}" for b in cons["blocks"]
        )
    )
    lines.append(f"  {'B / A: p50, p99':<58} {cons['p50_ratio']:>8.3f} {cons['p99_ratio']:>9.3f}")
    lines.append(
        goal_line(
            "chat p95 with consolidation / without",
            f"{cons['p95_ratio']:.3f}",
            f"<= {goal:g}",
            verdict(cons["p95_ratio"], goal, higher_is_better=False),
        )
    )
    side = cons["side_effect_ms"]
    lines.append(
        f"  during B ({cons['phase_seconds']['B']:.0f} s): {cons['consolidations_finished_in_b']} "
        f"consolidations finished, {cons['summaries_stored_in_b']} summaries stored, "
        f"{cons['summarizer_calls_in_b']} summarizer calls, {cons['embedded_turns_in_b']:,} "
        f"turns embedded; consolidation thread busy {cons['consolidation_busy_share_in_b']:.0%} "
        f"of the time; {cons['failures']} failures"
    )
    if side["n"]:
        lines.append(
            f"  consolidation work besides waiting (add_summary, drain): "
            f"{side['n']} windows, p50 {fmt(side['p50'])} ms, max {fmt(side['max'])} ms; "
            f"longest wait for a running consolidation at a block's end "
            f"{cons['stop_wait_seconds_max']:.2f} s"
        )
    for phase in ("A", "B"):
        lines.append(f"  background work during {phase} ({cons['phase_seconds'][phase]:.0f} s):")
        lines.extend(background_lines(cons["background"][phase]))
    return lines


def gil_lines(result: dict[str, Any], settings: Settings) -> list[str]:
    lines: list[str] = []
    lines.append("")
    lines.append(
        "== 3. GIL holds: main-thread wake-up delay while one operation runs in another thread "
        f"({settings.gil_reps} runs each; > 5 ms means the GIL was held) =="
    )
    lines.append(
        f"  {'operation':<58} {'op p50':>8} {'op max':>8} {'delay p50':>10} {'delay max':>10}"
    )
    for name, entry in result["gil"].items():
        op_p50, op_max = entry["operation_ms_p50"], entry["operation_ms_max"]
        delay_p50, delay_max = entry["worst_wake_delay_ms_p50"], entry["worst_wake_delay_ms_max"]
        lines.append(
            f"  {name:<58} {fmt(op_p50):>8} {fmt(op_max):>8} {fmt(delay_p50):>10} "
            f"{fmt(delay_max):>10}"
        )
    lines.append(f"  RSS start {result['rss_mb_start']:.0f} MB, end {result['rss_mb_end']:.0f} MB")
    profile = result["overhead"].get("profile")
    if profile:
        lines.append("")
        lines.append(f"== cProfile of {profile['requests']} settled chat requests (main thread) ==")
        lines.extend(profile["text"].rstrip().splitlines())
    return lines
