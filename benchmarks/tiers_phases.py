"""The measurements of ``bench_tiers.py`` at one scale: populate, tier-1 reads, appends, search.

Each phase times calls one by one (``time.perf_counter_ns`` around each) and stops early
after ``Options.phase_seconds`` of wall time, so that a slow backend keeps the run bounded;
the sample count says how many calls were timed.
"""

from __future__ import annotations

import gc
import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from corpus import ZipfCorpus
from harness import progress, summarize, time_calls

from memory_chain.schemas import NewTurn
from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
from memory_chain.tiers.sql import SQLStore

USERS = 100
BUFFER_TURNS = 10
BUFFER_CONVERSATIONS = 1_000


@dataclass(frozen=True)
class Options:
    """One scale's sizes and the run's options."""

    conversations: int
    turns: int
    database_url: str | None
    seed: int
    batch: int
    tier1_reads: int
    hit_rate_reads: int
    appends: int
    searches: int
    phase_seconds: float


def populate(
    store: SQLStore,
    corpus: ZipfCorpus,
    conversations: Sequence[tuple[str, str]],
    turns: int,
    batch: int,
    rng: random.Random,
) -> dict[str, Any]:
    """Append ``turns`` turns spread evenly over the conversations, ``batch`` per call.

    Calls go round-robin over the conversations (shuffled each round), so a conversation's
    rows are interleaved with other conversations' rows as in a live database.
    """
    per_conversation = [turns // len(conversations)] * len(conversations)
    for index in range(turns % len(conversations)):
        per_conversation[index] += 1
    written = [0] * len(conversations)
    calls = 0
    started = time.perf_counter()
    order = list(range(len(conversations)))
    remaining = turns
    while remaining:
        rng.shuffle(order)
        for index in order:
            todo = min(batch, per_conversation[index] - written[index])
            if todo <= 0:
                continue
            conversation_id, user_id = conversations[index]
            new_turns = [
                NewTurn(
                    "user" if (written[index] + offset) % 2 == 0 else "assistant",
                    corpus.sentence(rng),
                )
                for offset in range(todo)
            ]
            store.append_turns(conversation_id, new_turns, user_id=user_id)
            written[index] += todo
            remaining -= todo
            calls += 1
            if calls % 2_000 == 0:
                progress(f"populated {turns - remaining:,}/{turns:,} turns")
    seconds = time.perf_counter() - started
    return {
        "turns": turns,
        "calls": calls,
        "turns_per_call": batch,
        "seconds": seconds,
        "turns_per_second": turns / seconds if seconds else None,
    }


def bench_tier1(
    store: SQLStore,
    conversations: Sequence[tuple[str, str]],
    options: Options,
    rng: random.Random,
) -> dict[str, Any]:
    buffer = TurnBuffer(max_turns=BUFFER_TURNS, max_conversations=BUFFER_CONVERSATIONS)
    histories = {
        conversation_id: BufferChatMessageHistory(
            buffer, conversation_id, source=store, user_id=user_id
        )
        for conversation_id, user_id in conversations
    }
    ids = [conversation_id for conversation_id, _ in conversations]
    users = dict(conversations)

    # Warm-up: touch every conversation once (misses load from SQL); the buffer keeps the
    # last 1,000 touched.
    order = ids[:]
    rng.shuffle(order)
    started = time.perf_counter()
    for conversation_id in order:
        histories[conversation_id].messages  # noqa: B018 - the read fills the buffer
    warmup_seconds = time.perf_counter() - started

    # Hit rate and hit/miss latency of uniformly random conversations, through the history.
    clock = time.perf_counter_ns
    hits: list[int] = []
    misses: list[int] = []
    deadline = clock() + int(options.phase_seconds * 1e9)
    for _ in range(options.hit_rate_reads):
        conversation_id = rng.choice(ids)
        present = (users[conversation_id], conversation_id) in buffer
        history = histories[conversation_id]
        start = clock()
        messages = history.messages
        end = clock()
        if not messages:
            raise RuntimeError(f"{conversation_id}: no messages read")
        (hits if present else misses).append(end - start)
        if end > deadline:
            break
    accesses = len(hits) + len(misses)

    # Warm reads: only conversations present in the buffer (no miss can evict one now).
    resident = [c for c in ids if (users[c], c) in buffer]
    picks = [rng.choice(resident) for _ in range(options.tier1_reads)]
    expected = min(BUFFER_TURNS, options.turns // options.conversations)

    def check(messages: Any) -> None:
        if messages is None or len(messages) != expected:
            raise RuntimeError(f"warm read returned {messages!r:.80}")

    gc.collect()
    get_messages = buffer.get_messages
    buffer_samples, _ = time_calls(
        [lambda c=c: get_messages(c, users[c]) for c in picks], options.phase_seconds, check
    )
    history_samples, _ = time_calls(
        [lambda h=histories[c]: h.messages for c in picks], options.phase_seconds, check
    )
    # What RunnableWithMessageHistory does per request: build the history, then read it.
    fresh_samples, _ = time_calls(
        [
            lambda c=c: BufferChatMessageHistory(buffer, c, source=store, user_id=users[c]).messages
            for c in picks
        ],
        options.phase_seconds,
        check,
    )
    return {
        "buffer_max_turns": BUFFER_TURNS,
        "buffer_max_conversations": BUFFER_CONVERSATIONS,
        "buffered_conversations": len(buffer),
        "warmup_seconds": warmup_seconds,
        "random_access": {
            "accesses": accesses,
            "hit_rate": len(hits) / accesses if accesses else None,
            "hit_us": summarize(hits, "us"),
            "miss_ms": summarize(misses, "ms"),
        },
        "get_messages_us": summarize(buffer_samples, "us"),
        "history_messages_us": summarize(history_samples, "us"),
        "new_history_messages_us": summarize(fresh_samples, "us"),
    }


def bench_appends(
    store: SQLStore,
    corpus: ZipfCorpus,
    conversations: Sequence[tuple[str, str]],
    options: Options,
    rng: random.Random,
) -> dict[str, Any]:
    targets = [rng.choice(conversations) for _ in range(options.appends + 50)]
    texts = [corpus.sentence(rng) for _ in targets]
    calls = [
        lambda c=c, u=u, t=t: store.append_turns(c, [NewTurn("user", t)], user_id=u)
        for (c, u), t in zip(targets, texts, strict=True)
    ]
    for call in calls[:50]:  # warm the pool and the page cache
        call()
    samples, seconds = time_calls(calls[50:], options.phase_seconds, None)
    result = summarize(samples, "ms")
    result["seconds"] = seconds
    return result


def bench_search(
    store: SQLStore,
    corpus: ZipfCorpus,
    conversations: Sequence[tuple[str, str]],
    options: Options,
    rng: random.Random,
    query_kind: str,
    scope: str,
) -> dict[str, Any]:
    plans = []
    for _ in range(options.searches + 20):
        query = corpus.query(rng, query_kind)
        conversation_id, user_id = rng.choice(conversations)
        plans.append((query, user_id, conversation_id if scope == "conversation" else None))
    found: list[int] = []

    def make(query: str, user_id: str, conversation_id: str | None) -> Callable[[], Any]:
        return lambda: store.search(
            query, user_id=user_id, conversation_id=conversation_id, kinds=("turn",), limit=5
        )

    calls = [make(*plan) for plan in plans]
    for call in calls[:20]:
        call()
    samples, seconds = time_calls(calls[20:], options.phase_seconds, lambda r: found.append(len(r)))
    result = summarize(samples, "ms")
    result["seconds"] = seconds
    result["mean_hits_returned"] = float(np.mean(found)) if found else 0.0
    result["example_query"] = plans[20][0]
    return result


def query_selectivity(database: Path, corpus: ZipfCorpus, rng: random.Random) -> dict[str, Any]:
    """How many turns a query's OR-ed words match in the FTS5 index (median over 50)."""
    result: dict[str, Any] = {}
    with sqlite3.connect(database) as conn:
        (total_turns,) = conn.execute("SELECT count(*) FROM conversation_turns").fetchone()
        for kind in ("zipf", "content"):
            counts = []
            for _ in range(50):
                words = corpus.query(rng, kind).split()
                match = " OR ".join(f'"{word}"' for word in words)
                (count,) = conn.execute(
                    "SELECT count(*) FROM conversation_turns_fts "
                    "WHERE conversation_turns_fts MATCH ?",
                    (match,),
                ).fetchone()
                counts.append(count)
            median = float(np.median(counts))
            result[kind] = {
                "median_matching_turns": median,
                "median_matching_share": median / total_turns,
            }
    top = corpus.words[0]
    result["top_word"] = {"word": top, "expected_share_of_words": corpus.expected_share(1)}
    return result
