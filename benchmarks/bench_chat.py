"""Benchmark of the memory cost of a chat turn, and of chat latency while consolidation runs.

Run from the repository root::

    python benchmarks/bench_chat.py                       # 200 conversations x 50 turns
    python benchmarks/bench_chat.py --quick               # ~1 minute smoke run
    python benchmarks/bench_chat.py --json /tmp/chat.json
    python benchmarks/bench_chat.py --facts-per-user 20,1000   # a chat turn, 20 vs 1,000 facts

The stack is the embedded default: ``open_services(MemorySettings(data_dir=<temp>,
llm_fallback="off"), background=True)`` (SQLite, EdgeIndex, the bundled all-MiniLM-L6-v2 at
one torch thread, the tier-3 backfill thread running), a ``ConsolidationService`` registered
as the manager's listener as the server does, and ``build_chat_chain(manager, fake_llm)``
with a ``GenericFakeChatModel`` that returns a fixed short reply at once, so the chat model
costs ~0 and what is left of a turn is memory. The data are ``--conversations`` x
``--turns`` template-generated chat turns over ``--users`` users, stored through
``MemoryManager.add_turns``, all embedded into tier 3 (``TurnIndexer.drain``) and summarized
up to their last 5 turns (``SQLStore.add_summary``), as consolidation would have left them.
Each user has ``--facts-per-user`` facts (20; with ``20,1000`` users get each size in turn,
and part 1's requests alternate between the sizes: memory's cost is reported per size).

1. Overhead of a chat turn: ``chain.invoke``, the same chain over a no-op memory, an agent
   ``create_agent(fake_model, middleware=[MemoryMiddleware(services)])`` (no tools, no
   checkpointer: memory is the thread's only history, as for the chain), the same agent
   without the middleware, and ``embed_query`` of the same question, alternating request by
   request (order rotated every request). Memory's cost (the goal: retrieval + storage,
   p95 <= 1.2x one query embedding) is the chat turn minus the no-op chain of the same
   request, since the LCEL plumbing and the (fake) model are paid by a chat app without
   memory too; the whole chain's ratio is printed as well. Through the middleware it is the
   agent minus the bare agent (the goal: p95 <= 1.2x memory's cost through the chain; the
   middleware is given the chain's window and token counter, so both build the same
   prompt). (a) each measurement
   starting with the tier-3 backfill caught up ("settled"), and (b) back to back, as a busy
   server, where the backfill of the previous turn may run during the next measurement.
   Then the breakdown (settled, ``--breakdown-requests``): ``chain.stream`` to its first
   chunk, ``MemoryManager.retrieve`` and its steps one by one, ``MemoryManager.add_turns``
   and its SQL write and trigger check alone, the fake model alone, the chain over a no-op
   memory. ``--profile N`` adds a cProfile of N chat requests.
2. Chat latency while consolidation runs: chat requests with a ``--think-ms`` pause after
   each (0: back to back, which saturates the tier-3 backfill on 2 cores) in blocks of
   ``--block-seconds``, alternating phase A (no consolidation: the listener's thresholds are
   out of reach) and phase B (a ``ConsolidationService`` with ``message_threshold`` 4 whose
   summarizer is ``build_summarization_chain`` over a fake model that waits
   ``--summary-seconds`` per call, as a process waiting on Ollama does; the service then
   does its real work: store the summaries, drain the tier-3 queue with real embeddings and
   flush, prune tier 1). Three ``schedule`` calls start it at once and every chat write to
   a conversation with 4 unsummarized turns queues another, so it never idles. Requests
   are also split by whether they overlapped an index flush or the consolidation's work.
3. GIL holds (information): how late a sleeping main thread wakes up while an index flush,
   an embedding or a search runs in another thread.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The bundled model loads from a local folder; never let a stray download start mid-run.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from chat_background import bench_consolidation, bench_gil
from chat_overhead import bench_overhead
from chat_report import profile_ratio, report
from chat_stack import GOALS, QUICK, UNSUMMARIZED_TAIL, Settings, build_stack
from harness import Run, configure, parser, rss_mb, run_and_report, verdict

from memory_chain.services import Services

PACKAGES = (
    "langchain-core",
    "langchain",
    "langgraph",
    "qdrant-edge-py",
    "sentence-transformers",
    "torch",
    "SQLAlchemy",
)


def run(settings: Settings, bench: Run) -> dict[str, Any]:
    started = bench.started
    result: dict[str, Any] = {"rss_mb_start": rss_mb()}
    folder = Path(tempfile.mkdtemp(prefix="mc-bench-chat-"))
    services: Services | None = None
    try:
        stack, result["setup"] = build_stack(settings, folder, started)
        services = stack.services
        stack.recorder.phase = "part1"
        result["overhead"] = bench_overhead(stack, settings, started)
        result["background_part1"] = stack.recorder.phase_figures("part1")
        result["consolidation"] = bench_consolidation(stack, settings, started)
        result["gil"] = bench_gil(stack, settings, started)
        result["rss_mb_end"] = rss_mb()
    finally:
        if services is not None:
            try:
                services.close()
            except Exception as exc:  # report, keep cleaning up
                print(f"closing the services failed: {exc!r}", file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)
    return result


def verdicts(result: dict[str, Any]) -> dict[str, str]:
    """Every goal's ok/MISSED, for the JSON file."""
    goal = GOALS["chat_overhead_p95_over_embed_p95"]
    out = {
        f"chat_overhead_{mode}": verdict(
            result["overhead"][mode]["memory_p95_over_embed_p95"], goal, False
        )
        for mode in ("settled", "back_to_back")
    }
    middleware = GOALS["middleware_cost_p95_over_chain_cost_p95"]
    for mode in ("settled", "back_to_back"):
        ratio = result["overhead"][mode]["middleware_over_chain_p95"]
        out[f"middleware_{mode}"] = verdict(ratio, middleware, False)
    for mode in ("settled", "back_to_back"):
        if len(result["overhead"][mode]["memory_overhead_by_profile_ms"]) > 1:
            out[f"profile_size_{mode}"] = verdict(
                profile_ratio(result["overhead"][mode]),
                GOALS["profile_largest_over_smallest_p50"],
                False,
            )
    out["consolidation_p95_ratio"] = verdict(
        result["consolidation"]["p95_ratio"], GOALS["consolidation_p95_over_idle_p95"], False
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, quick="smoke run of about a minute")
    args.add_argument("--conversations", type=int, help="pre-populated conversations (200)")
    args.add_argument("--turns", type=int, help="turns per pre-populated conversation (50)")
    args.add_argument("--users", type=int, help="users owning the conversations (20)")
    args.add_argument("--requests", type=int, help="chat requests per part-1 measurement (300)")
    args.add_argument(
        "--breakdown-requests", type=int, help="requests of the part-1 breakdown (200)"
    )
    args.add_argument(
        "--summary-seconds", type=float, help="wait of the fake summarizer per call (2)"
    )
    args.add_argument("--block-seconds", type=float, help="length of a part-2 block (10)")
    args.add_argument("--rounds", type=int, help="A/B rounds in part 2 (6)")
    args.add_argument(
        "--think-ms",
        type=float,
        help="pause after each part-2 request (50; 0: back to back, which saturates the backfill)",
    )
    args.add_argument(
        "--profile",
        type=int,
        metavar="N",
        dest="profile_requests",
        help="also cProfile N settled chat requests and print the top functions",
    )
    args.add_argument(
        "--facts-per-user",
        help="profile sizes, comma-separated (20): users get each in turn, and part-1 "
        "requests alternate between them (20,1000: memory's cost with 1,000 facts vs 20)",
    )
    args.add_argument("--seed", type=int, default=1234)
    options = args.parse_args(argv)
    settings = configure(Settings(), options, QUICK)
    if settings.turns < UNSUMMARIZED_TAIL + 2:
        args.error(f"--turns must be at least {UNSUMMARIZED_TAIL + 2}")
    try:
        sizes = settings.profile_sizes
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 0 or len(sizes) > settings.users:
        args.error("--facts-per-user takes sizes like 20,1000, no more of them than --users")

    run_and_report(
        "chat",
        options.json,
        settings,
        run,
        report,
        packages=PACKAGES,
        intro=f"settings: {settings.conversations} conversations x {settings.turns} turns, "
        f"{settings.users} users with {settings.facts_per_user} facts, {settings.requests} "
        "requests per part-1 measurement, part 2 "
        f"{settings.rounds} x (A + B) blocks of {settings.block_seconds:g} s, "
        f"{settings.think_ms:g} ms pause after each request, summarizer "
        f"{settings.summary_seconds:g} s per call",
        verdicts=verdicts,
        goals=GOALS,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
