"""Latency and memory benchmark of tier 1 (TurnBuffer) and tier 2 (SQLStore).

Run from the repository root::

    python benchmarks/bench_tiers.py
    python benchmarks/bench_tiers.py --scales 100x1000 --json /tmp/bench.json
    python benchmarks/bench_tiers.py --database-url postgresql://user:pw@127.0.0.1/db

A scale ``CxT`` is C conversations holding T turns in total (T // C each, conversation i owned
by ``user-{i % 100}``). Each scale runs in its own child process so that its RSS figures are
not inflated by the previous scale (``--in-process`` turns that off).

For each scale it measures:

* tier 1: ``TurnBuffer.get_messages`` and ``BufferChatMessageHistory(...).messages`` on
  conversations present in a warm ``TurnBuffer(max_turns=10, max_conversations=1000)``,
  plus the hit rate (and miss latency) of uniformly random conversations;
* tier 2: ``SQLStore.append_turns`` (one turn per call) on the populated database, with
  SQLite ``synchronous=NORMAL`` and ``FULL``;
* tier 2: ``SQLStore.search`` scoped to one conversation and to one user, with 2-3 word
  queries drawn from the corpus vocabulary, both by corpus frequency ("zipf": common words
  included, as in natural questions) and uniformly from the less common words ("content");
* the process RSS after populating and after the tier-1 read phase.

Text is deterministic: sentences of 8-30 words drawn from a Zipf-distributed vocabulary of
5,000 synthetic words (seeded), so the FTS5 index sees realistic term selectivity.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gc
import itertools
import json
import multiprocessing
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from memory_chain.schemas import NewTurn
from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade

DEFAULT_SCALES = "100x1000,10000x100000"
USERS = 100
VOCABULARY_SIZE = 5_000
ZIPF_EXPONENT = 1.0
#: Words of rank below this are "common" (stop-word-like); "content" queries avoid them.
COMMON_WORDS = 100
BUFFER_TURNS = 10
BUFFER_CONVERSATIONS = 1_000

GOALS = {
    "tier1_p99_us": 50.0,
    "append_p95_ms": 2.0,
    "search_p95_ms": 5.0,
}

MB = 1024 * 1024


# -- synthetic corpus ---------------------------------------------------------------------


def make_vocabulary(size: int, seed: int) -> list[str]:
    """Distinct pronounceable words; shorter words get the more frequent (lower) ranks."""
    rng = random.Random(seed)
    onsets = [*"bcdfghjklmnprstvwz", "br", "ch", "cl", "dr", "fl", "gr", "pl", "sh", "st", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
    codas = ["", "", "", "n", "r", "l", "m", "x", "k"]
    words: list[str] = []
    seen: set[str] = set()
    syllables = 1
    attempts = 0
    while len(words) < size:
        word = "".join(
            rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syllables)
        )
        attempts += 1
        if word not in seen:
            seen.add(word)
            words.append(word)
        # Move to longer words once short ones are mostly used up.
        if attempts > 40 * (len(words) + 1) or (syllables == 1 and len(words) >= 150):
            syllables += 1
            attempts = 0
    return words


@dataclass
class Corpus:
    """Seeded sentence and query generator over a Zipf-distributed vocabulary."""

    words: list[str]
    cum_weights: list[float]

    @classmethod
    def build(cls, seed: int) -> Corpus:
        words = make_vocabulary(VOCABULARY_SIZE, seed)
        weights = [1.0 / (rank**ZIPF_EXPONENT) for rank in range(1, len(words) + 1)]
        return cls(words, list(itertools.accumulate(weights)))

    def sentence(self, rng: random.Random) -> str:
        count = rng.randint(8, 30)
        chosen = rng.choices(self.words, cum_weights=self.cum_weights, k=count)
        chosen[0] = chosen[0].capitalize()
        return " ".join(chosen) + "."

    def query(self, rng: random.Random, kind: str) -> str:
        count = rng.randint(2, 3)
        chosen: list[str] = []
        while len(chosen) < count:
            if kind == "zipf":
                word = rng.choices(self.words, cum_weights=self.cum_weights)[0]
            else:
                word = self.words[rng.randrange(COMMON_WORDS, len(self.words))]
            if word not in chosen:
                chosen.append(word)
        return " ".join(chosen)

    def rank(self, word: str) -> int:
        return self.words.index(word) + 1

    def expected_share(self, rank: int) -> float:
        """Probability that one drawn word has this rank."""
        previous = self.cum_weights[rank - 2] if rank > 1 else 0.0
        return (self.cum_weights[rank - 1] - previous) / self.cum_weights[-1]


# -- measurement helpers ------------------------------------------------------------------


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / MB


def timer_overhead_ns() -> float:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(10_000):
        start = clock()
        samples.append(clock() - start)
    return float(np.median(samples))


def summarize(samples_ns: Sequence[int], unit: str) -> dict[str, Any]:
    """Percentiles of latency samples (nanoseconds) in ``unit`` ("us" or "ms")."""
    scale = 1e3 if unit == "us" else 1e6
    if not samples_ns:
        return {"n": 0, "unit": unit}
    values = np.asarray(samples_ns, dtype=np.float64) / scale
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "n": len(values),
        "unit": unit,
        "mean": float(values.mean()),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "max": float(values.max()),
    }


def time_calls(
    calls: Sequence[Callable[[], Any]], max_seconds: float, check: Callable[[Any], None] | None
) -> tuple[list[int], float]:
    """Time each call separately; stop early after ``max_seconds`` of wall time."""
    clock = time.perf_counter_ns
    samples: list[int] = []
    deadline = clock() + int(max_seconds * 1e9)
    began = clock()
    for call in calls:
        start = clock()
        result = call()
        end = clock()
        samples.append(end - start)
        if check is not None:
            check(result)
        if end > deadline:
            break
    return samples, (clock() - began) / 1e9


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


# -- one scale ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
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
    corpus: Corpus,
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
    corpus: Corpus,
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
    corpus: Corpus,
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


def query_selectivity(database: Path, corpus: Corpus, rng: random.Random) -> dict[str, Any]:
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


def run_scale(options: Options) -> dict[str, Any]:
    """Populate a database to one scale and measure it; returns every figure."""
    rng = random.Random(options.seed)
    corpus = Corpus.build(options.seed)
    result: dict[str, Any] = {
        "conversations": options.conversations,
        "turns": options.turns,
        "rss_mb": {"start": rss_mb()},
    }
    tmpdir: str | None = None
    prefix = ""
    if options.database_url:
        url = options.database_url
        prefix = f"bench-{uuid.uuid4().hex[:8]}-"
    else:
        tmpdir = tempfile.mkdtemp(prefix="mc-bench-")
        url = f"sqlite:///{Path(tmpdir) / 'tier2.db'}"
    engines = []
    try:
        engine = create_sql_engine(url, sqlite_synchronous="NORMAL")
        engines.append(engine)
        dialect = engine.dialect.name
        upgrade(engine)
        store = SQLStore(engine)
        result["database"] = {
            "dialect": dialect,
            "url": engine.url.render_as_string(hide_password=True),
        }
        conversations = [
            (f"{prefix}conv-{index:06d}", f"{prefix}user-{index % USERS}")
            for index in range(options.conversations)
        ]

        progress(f"populating {options.conversations:,} x {options.turns:,}")
        result["populate"] = populate(
            store, corpus, conversations, options.turns, options.batch, rng
        )
        if dialect == "sqlite" and engine.url.database:
            database = Path(engine.url.database)
            result["database"]["file_mb"] = sum(
                path.stat().st_size / MB
                for path in database.parent.glob(database.name + "*")
                if path.is_file()
            )
        gc.collect()
        result["rss_mb"]["after_populate"] = rss_mb()

        progress("tier-1 reads")
        result["tier1"] = bench_tier1(store, conversations, options, rng)
        result["rss_mb"]["after_reads"] = rss_mb()

        result["search_ms"] = {}
        for query_kind in ("zipf", "content"):
            for scope in ("conversation", "user"):
                progress(f"search, {query_kind} queries, scoped to one {scope}")
                result["search_ms"][f"{query_kind}/{scope}"] = bench_search(
                    store, corpus, conversations, options, rng, query_kind, scope
                )
        if dialect == "sqlite" and engine.url.database:
            result["query_selectivity"] = query_selectivity(Path(engine.url.database), corpus, rng)
        modes = ["NORMAL", "FULL"] if dialect == "sqlite" else ["server default"]
        result["append_ms"] = {}
        for mode in modes:
            progress(f"appends, synchronous={mode}")
            if mode == "FULL":
                full = create_sql_engine(url, sqlite_synchronous="FULL")
                engines.append(full)
                target = SQLStore(full)
            else:
                target = store
            result["append_ms"][mode] = bench_appends(target, corpus, conversations, options, rng)

        result["rss_mb"]["end"] = rss_mb()

        if options.database_url:
            progress("removing the benchmark's conversations")
            for conversation_id, user_id in conversations:
                store.delete_conversation(conversation_id, user_id=user_id)
    finally:
        for engine in engines:
            engine.dispose()
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return result


# -- report -------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _row(label: str, stats: dict[str, Any], goal: tuple[str, float] | None = None) -> str:
    unit = "µs" if stats.get("unit") == "us" else "ms"
    if not stats.get("n"):
        return f"  {label:<46} {'no samples':>8}"
    verdict = ""
    if goal is not None:
        key, limit = goal
        verdict = f"{key} <= {_fmt(limit, 0)} {unit}: " + (
            "ok" if stats[key] <= limit else "MISSED"
        )
    return (
        f"  {label:<46} {stats['n']:>6,} {_fmt(stats['p50']):>8} {_fmt(stats['p95']):>8} "
        f"{_fmt(stats['p99']):>8} {_fmt(stats['max']):>8}  {unit:<3} {verdict}"
    )


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
    if not stats.get("n"):
        return "n/a"
    return "ok" if stats[key] <= GOALS[goal] else "MISSED"


def report(result: dict[str, Any]) -> str:
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
    header = f"  {'':<46} {'n':>6} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}"
    lines.append(header)
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


# -- main ---------------------------------------------------------------------------------


def parse_scales(text: str) -> list[tuple[int, int]]:
    scales = []
    for item in text.split(","):
        conv, _, turns = item.strip().lower().partition("x")
        try:
            pair = (int(conv.replace("_", "")), int(turns.replace("_", "")))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bad scale {item!r}: use CONVERSATIONSxTURNS, e.g. 100x1000"
            ) from None
        if pair[0] < 1 or pair[1] < pair[0]:
            raise argparse.ArgumentTypeError(f"bad scale {item!r}: need 1 <= C <= T")
        scales.append(pair)
    return scales


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scales",
        type=parse_scales,
        default=parse_scales(DEFAULT_SCALES),
        help=f"comma-separated CONVERSATIONSxTURNS (default {DEFAULT_SCALES})",
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument(
        "--database-url",
        help="benchmark this database instead of a temporary SQLite file; the benchmark's "
        "conversations (ids prefixed bench-<random>-) are deleted at the end",
    )
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--batch", type=int, default=10, help="turns per populate call")
    parser.add_argument("--tier1-reads", type=int, default=20_000)
    parser.add_argument("--hit-rate-reads", type=int, default=5_000)
    parser.add_argument("--appends", type=int, default=2_000, help="per synchronous mode")
    parser.add_argument("--searches", type=int, default=1_000, help="per query kind and scope")
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=30.0,
        help="stop a measurement phase early after this long (keeps slow backends bounded)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run every scale in this process (RSS then accumulates across scales)",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    overhead = timer_overhead_ns()
    environment = {
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "timer_overhead_ns": overhead,
    }
    print(
        f"memory_chain tier benchmark: Python {environment['python']}, SQLite "
        f"{environment['sqlite']}, {environment['cpus']} CPUs, {environment['platform']}; "
        f"perf_counter_ns overhead ~{overhead:.0f} ns (included in samples)"
    )
    print(
        "latencies per call: n samples, percentiles and max; goals: tier-1 p99 <= 50 µs, "
        "append p95 <= 2 ms, search p95 <= 5 ms\n",
        flush=True,
    )
    results = []
    for conversations, turns in args.scales:
        options = Options(
            conversations=conversations,
            turns=turns,
            database_url=args.database_url,
            seed=args.seed,
            batch=args.batch,
            tier1_reads=args.tier1_reads,
            hit_rate_reads=args.hit_rate_reads,
            appends=args.appends,
            searches=args.searches,
            phase_seconds=args.phase_seconds,
        )
        scale_started = time.perf_counter()
        if args.in_process:
            result = run_scale(options)
        else:
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
                result = pool.submit(run_scale, options).result()
        result["seconds"] = time.perf_counter() - scale_started
        results.append(result)
        print(report(result))
        print(f"  scale run time {result['seconds']:.0f} s\n", flush=True)

    total = time.perf_counter() - started
    print(f"total run time {total:.0f} s")
    if args.json:
        payload = {
            "environment": environment,
            "goals": GOALS,
            "settings": {
                key: value for key, value in vars(args).items() if key not in {"json", "scales"}
            }
            | {"scales": [f"{c}x{t}" for c, t in args.scales]},
            "scales": results,
            "verdicts": {k: v for result in results for k, v in verdicts(result).items()},
            "seconds": total,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
