"""Parts 2 and 3 of the chat benchmark: chat latency while background work runs.

Part 2 alternates blocks of chat requests (``--block-seconds``, a ``--think-ms`` pause after
each) without consolidation (A: the listener's thresholds are out of reach) and with it (B:
a ``ConsolidationService`` with ``message_threshold`` 4 whose summarizer waits
``--summary-seconds`` per call, as a process waiting on Ollama does; the service then does
its real work: store the summaries, drain the tier-3 queue and flush, prune tier 1). Three
``schedule`` calls start it at once and every chat write to a conversation with 4
unsummarized turns queues another, so it never idles. Requests are also split by whether
they overlapped an index flush or the consolidation's own work (:mod:`chat_recorder`).

Part 3 (information): how late a sleeping main thread wakes while an index flush, an
embedding or a search runs in another thread; a delay equal to the operation's time means
it held the GIL throughout.
"""

from __future__ import annotations

import gc
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from chat_stack import (
    EXPLICIT_SCHEDULES,
    REPLY,
    SUMMARY_REPLY,
    Conversation,
    CountingConsolidation,
    Settings,
    Stack,
    consolidation_service,
    settle,
)
from harness import progress, summarize

from memory_chain.consolidation import ConsolidationSettings
from memory_chain.schemas import NewTurn
from memory_chain.tiers.vectors.index import VectorFilter

#: (start, end) of one request or one piece of background work, in perf_counter seconds.
Window = tuple[float, float]

# -- part 2: chat latency while consolidation runs ----------------------------------------


def overlaps(window: Window, others: Sequence[Window]) -> bool:
    start, end = window
    return any(o_start < end and o_end > start for o_start, o_end in others)


def window_ms(selected: Sequence[Window]) -> dict[str, Any]:
    """Latency statistics of request windows."""
    return summarize([(end - start) * 1e9 for start, end in selected])


def chat_block(stack: Stack, settings: Settings, rng: random.Random) -> list[Window]:
    """Chat requests for ``block_seconds``, a ``think_ms`` pause after each."""
    think = settings.think_ms / 1e3
    windows: list[Window] = []
    deadline = time.perf_counter() + settings.block_seconds
    while time.perf_counter() < deadline:
        request = stack.requests(1, rng)[0]
        t0 = time.perf_counter()
        stack.chain.invoke({"input": request.question}, request.config)
        windows.append((t0, time.perf_counter()))
        if think:
            time.sleep(think)
    return windows


def start_consolidation(
    stack: Stack, settings: Settings, explicit: Iterator[Conversation]
) -> CountingConsolidation:
    """Phase B: a consolidation service that fires, in place of the idle one, already busy."""
    services, manager, model = stack.services, stack.services.manager, stack.summarizer_model
    model.interrupt.clear()
    keep_last = services.settings.memory_tier1_keep_after_consolidation
    service = consolidation_service(
        services,
        model,
        ConsolidationSettings(message_threshold=settings.message_threshold, keep_last=keep_last),
    )
    manager.listeners[manager.listeners.index(stack.idle_consolidation)] = service
    for _ in range(EXPLICIT_SCHEDULES):
        conversation = next(explicit)
        # A threshold reason: "end", "idle" or "manual" would also summarize the turns the
        # chat adds meanwhile, lap after lap, until it stops.
        service.schedule(conversation.conversation_id, conversation.user_id, "messages")
    return service


def stop_consolidation(
    stack: Stack, service: CountingConsolidation, began: float, ended: float
) -> tuple[dict[str, Any], float]:
    """End phase B: no new consolidations, the summarizer's wait cut short, the one in
    progress left to finish its side effects. What it did in the block, and the wait."""
    manager = stack.services.manager
    manager.listeners[manager.listeners.index(service)] = stack.idle_consolidation
    stack.summarizer_model.interrupt.set()
    t0 = time.perf_counter()
    service.stop(timeout=0)
    quiet = 0
    while quiet < 5:  # a job taken from the queue just before stop() may start
        quiet = 0 if service.running else quiet + 1
        time.sleep(0.01)
    waited = time.perf_counter() - t0
    finished = [c for c in service.completed if c[1] <= ended]
    busy = sum(
        min(end, ended) - max(start, began)
        for start, end, _ in service.completed
        if end > began and start < ended
    )
    figures = {
        "consolidations_finished": len(finished),
        "consolidation_busy_share": busy / (ended - began),
        "failures": service.failures,
    }
    return figures, waited


def bench_consolidation(stack: Stack, settings: Settings, started: float) -> dict[str, Any]:
    """Rounds of A/B blocks; chat latency by phase and by what overlapped each request."""
    model = stack.summarizer_model
    rng = random.Random(settings.seed + 2)
    windows: dict[str, list[Window]] = {"A": [], "B": []}
    blocks: list[dict[str, Any]] = []
    services_b: list[CountingConsolidation] = []
    explicit = itertools.cycle(stack.conversations)
    phase_seconds = {"A": 0.0, "B": 0.0}
    calls_in_b = 0
    stop_wait_seconds: list[float] = []
    for round_ in range(settings.rounds):
        for phase in ("A", "B"):
            service = start_consolidation(stack, settings, explicit) if phase == "B" else None
            if service is not None:
                services_b.append(service)
            stack.recorder.phase = phase
            calls_before = len(model.calls)
            gc.collect()
            began = time.perf_counter()
            block_windows = chat_block(stack, settings, rng)
            ended = time.perf_counter()
            phase_seconds[phase] += ended - began
            stack.recorder.phase = "transition"
            block: dict[str, Any] = {
                "round": round_,
                "phase": phase,
                "requests": len(block_windows),
                "seconds": ended - began,
                "chat_ms": window_ms(block_windows),
            }
            if service is not None:
                calls_in_b += len(model.calls) - calls_before
                figures, waited = stop_consolidation(stack, service, began, ended)
                block |= figures
                stop_wait_seconds.append(waited)
            blocks.append(block)
            windows[phase].extend(block_windows)
            settle(stack.services)
            time.sleep(0.2)
        progress(f"part 2: round {round_ + 1}/{settings.rounds} done", started)
    result = phase_figures(stack, windows, blocks)
    return {
        "think_ms": settings.think_ms,
        **result,
        "phase_seconds": phase_seconds,
        "blocks": blocks,
        "summarizer_calls_in_b": calls_in_b,
        "failures": sum(s.failures for s in services_b),
        "stop_wait_seconds_max": max(stop_wait_seconds) if stop_wait_seconds else 0.0,
    }


def phase_figures(
    stack: Stack, windows: dict[str, list[Window]], blocks: list[dict[str, Any]]
) -> dict[str, Any]:
    """Latency by phase, the B/A ratios, requests by what overlapped them, background work."""
    recorder = stack.recorder
    stats = {phase: window_ms(values) for phase, values in windows.items()}
    flushes = {phase: recorder.flush_windows(phase) for phase in ("A", "B")}
    side_effects = recorder.side_effect_windows("B")
    tagged: dict[str, Any] = {}
    for phase in ("A", "B"):
        tagged[f"{phase}_overlapping_flush"] = window_ms(
            [w for w in windows[phase] if overlaps(w, flushes[phase])]
        )
    tagged["B_overlapping_side_effects"] = window_ms(
        [w for w in windows["B"] if overlaps(w, side_effects)]
    )
    tagged["B_clear"] = window_ms(
        [w for w in windows["B"] if not overlaps(w, side_effects) and not overlaps(w, flushes["B"])]
    )
    tagged["A_clear"] = window_ms([w for w in windows["A"] if not overlaps(w, flushes["A"])])
    b_blocks = [b for b in blocks if b["phase"] == "B"]
    background = {phase: recorder.phase_figures(phase) for phase in ("A", "B")}
    return {
        "phase_ms": stats,
        "p95_ratio": stats["B"]["p95"] / stats["A"]["p95"],
        "p50_ratio": stats["B"]["p50"] / stats["A"]["p50"],
        "p99_ratio": stats["B"]["p99"] / stats["A"]["p99"],
        "tagged_ms": tagged,
        "consolidations_finished_in_b": sum(b["consolidations_finished"] for b in b_blocks),
        "summaries_stored_in_b": sum(
            entry["summaries_stored"] for entry in background["B"].values()
        ),
        "embedded_turns_in_b": sum(entry["embedded_turns"] for entry in background["B"].values()),
        "side_effect_windows_in_b": len(side_effects),
        "side_effect_ms": window_ms(side_effects),
        "consolidation_busy_share_in_b": float(
            np.mean([b["consolidation_busy_share"] for b in b_blocks])
        ),
        "background": background,
    }


# -- part 3: how long background work holds the GIL ---------------------------------------


def bench_gil(stack: Stack, settings: Settings, started: float) -> dict[str, Any]:
    """Main-thread wake-up delay while one background operation runs in another thread.

    The main thread sleeps 0.5 ms in a loop; a wake-up late by more than the switch interval
    (5 ms) means the other thread held the GIL. Information only, no goal.
    """
    progress("part 3: GIL holds of the background operations", started)
    services = stack.services
    tier3 = services.vectors
    assert tier3 is not None
    conversation = stack.conversations[0]
    texts = [f"user: {REPLY}", f"assistant: {SUMMARY_REPLY}"]
    vector = tier3.embeddings.embed_query("Where did I leave my passport?")

    def upserted() -> None:
        """Fresh turns embedded (not flushed), so that a flush has work to do."""
        services.store.append_turns(
            f"scratch-{conversation.conversation_id}",
            [NewTurn("user", "Where did I leave my passport?"), NewTurn("assistant", REPLY)],
            user_id=conversation.user_id,
        )
        tier3.indexer.drain(settle=False)

    operations: dict[str, tuple[Callable[[], Any], Callable[[], None] | None]] = {
        "sleep 20 ms (reference)": (lambda: time.sleep(0.02), None),
        "EdgeIndex.flush after a 2-turn upsert": (tier3.index.flush, upserted),
        "embed_documents, 2 turns (a backfill batch)": (
            lambda: tier3.embeddings.embed_documents(texts),
            None,
        ),
        "embed_query": (lambda: tier3.embeddings.embed_query(REPLY), None),
        "EdgeIndex.search, user filter": (
            lambda: tier3.index.search(vector, VectorFilter(user_id=conversation.user_id), 5),
            None,
        ),
        "SQLStore.search (FTS5, user)": (
            lambda: services.store.search(
                "flight Osaka passport", user_id=conversation.user_id, limit=5
            ),
            None,
        ),
    }
    result: dict[str, Any] = {}
    for name, (operation, prepare) in operations.items():
        durations: list[float] = []
        delays: list[float] = []
        for _ in range(settings.gil_reps):
            if prepare is not None:
                prepare()
            time.sleep(0.02)
            duration, delay = wake_delay(operation)
            durations.append(duration)
            delays.append(delay)
        result[name] = {
            "operation_ms_p50": float(np.median(durations)),
            "operation_ms_max": float(max(durations)),
            "worst_wake_delay_ms_p50": float(np.median(delays)),
            "worst_wake_delay_ms_max": float(max(delays)),
        }
    return result


def wake_delay(operation: Callable[[], Any]) -> tuple[float, float]:
    """(operation ms, worst main-thread wake-up delay ms while it ran in another thread)."""
    go, done = threading.Event(), threading.Event()
    took = [0.0]

    def run() -> None:
        go.wait()
        time.sleep(0.003)
        t0 = time.perf_counter()
        operation()
        took[0] = time.perf_counter() - t0
        time.sleep(0.003)
        done.set()

    thread = threading.Thread(target=run, name="gil-probe")
    thread.start()
    time.sleep(0.005)
    go.set()
    worst = 0.0
    while not done.is_set():
        t0 = time.perf_counter()
        time.sleep(0.0005)
        worst = max(worst, time.perf_counter() - t0 - 0.0005)
    thread.join()
    return took[0] * 1e3, worst * 1e3
