"""Benchmark of the memory cost of a chat turn, and of chat latency while consolidation runs.

Run from the repository root::

    python benchmarks/bench_chat.py                       # 200 conversations x 50 turns
    python benchmarks/bench_chat.py --quick               # ~1 minute smoke run
    python benchmarks/bench_chat.py --json /tmp/chat.json

The stack is the embedded default: ``open_services(MemorySettings(data_dir=<temp>,
llm_fallback="off"), background=True)`` (SQLite, EdgeIndex, the bundled all-MiniLM-L6-v2 at
one torch thread, the tier-3 backfill thread running), a ``ConsolidationService`` registered
as the manager's listener as the server does, and ``build_chat_chain(manager, fake_llm)``
with a ``GenericFakeChatModel`` that returns a fixed short reply at once, so the chat model
costs ~0 and what is left of a turn is memory. The data are ``--conversations`` x
``--turns`` template-generated chat turns over ``--users`` users, stored through
``MemoryManager.add_turns``, all embedded into tier 3 (``TurnIndexer.drain``) and summarized
up to their last 5 turns (``SQLStore.add_summary``), as consolidation would have left them.

1. Overhead of a chat turn: ``chain.invoke``, the same chain over a no-op memory and
   ``embed_query`` of the same question, alternating request by request (order rotated every
   request). Memory's cost (the goal: retrieval + storage, p95 <= 1.2x one query embedding)
   is the chat turn minus the no-op chain of the same request, since the LCEL plumbing and
   the (fake) model are paid by a chat app without memory too; the whole chain's ratio is
   printed as well. (a) each measurement
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

import argparse
import cProfile
import gc
import importlib.metadata
import io
import itertools
import json
import os
import platform
import pstats
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

# The bundled model loads from a local folder; never let a stray download start mid-run.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
from common import (
    CITIES,
    DAYS,
    FOODS,
    PEOPLE,
    THINGS,
    TOPICS,
    fmt,
    goal_line,
    progress,
    rss_mb,
    summarize_ms,
    verdict,
)
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field

from memory_chain.chain import DEFAULT_SYSTEM_MESSAGE, build_chat_chain, build_prompt_with_memory
from memory_chain.config import MemorySettings
from memory_chain.consolidation import ConsolidationService, ConsolidationSettings
from memory_chain.schemas import MemoryContext, NewTurn, Role, Summary
from memory_chain.services import Services, open_services
from memory_chain.summarize import build_summarization_chain
from memory_chain.tiers.vectors.index import VectorFilter
from memory_chain.tokens import TokenCounter

GOALS = {
    "chat_overhead_p95_over_embed_p95": 1.2,
    "consolidation_p95_over_idle_p95": 1.2,
}
#: Turns left unsummarized per conversation by the pre-populated summaries.
UNSUMMARIZED_TAIL = 5
#: Conversations scheduled explicitly when a phase-B block starts.
EXPLICIT_SCHEDULES = 3
NEVER = 10**9
REPLY = "Sure, I remember that. Your flight leaves at 9:40 on Friday, check in by 9."
SUMMARY_REPLY = (
    "The user is planning a trip to Osaka on Friday with their sister and asked about the "
    "flight time, the visa rules for a stay of 12 days and what to pack besides the "
    "passport. The assistant gave the departure time of 9:40, said most passports need no "
    "visa for short stays, and suggested layers because evenings get cold. The user also "
    "mentioned a budget of 1,200 dollars for the hotel and a peanut allergy."
)


@dataclass(frozen=True)
class Settings:
    conversations: int = 200
    turns: int = 50
    users: int = 20
    requests: int = 300
    summary_seconds: float = 2.0
    message_threshold: int = 4
    block_seconds: float = 10.0
    rounds: int = 6
    think_ms: float = 50.0
    breakdown_requests: int = 200
    gil_reps: int = 15
    profile_requests: int = 0
    seed: int = 1234
    quick: bool = False


QUICK: dict[str, Any] = {
    "conversations": 40,
    "turns": 20,
    "requests": 60,
    "breakdown_requests": 40,
    "block_seconds": 6.0,
    "rounds": 2,
    "gil_reps": 5,
}


# -- measurement helpers ------------------------------------------------------------------


# -- realistic chat text ------------------------------------------------------------------

USER_TEMPLATES = [
    "Can you remind me what time my flight to {city} leaves on {day}?",
    "I told {person} I'd call back about {topic}, what did we agree on?",
    "What was the recipe for {food} you suggested last time?",
    "Let's pick up where we left off on {topic}.",
    "Where did I say I put my {thing} before the trip to {city}?",
    "Summarize what we discussed about {topic} in two sentences.",
    "Is it a good idea to move the meeting with {person} to {day}?",
    "How many hours ahead is {city} compared to here?",
    "My budget for {topic} is {n} dollars, does that still work?",
    "Please write a short message to {person} saying I'll be late on {day}.",
    "I finished {n} pages of the report on {topic} today.",
    "Do I need a visa for {city} if I stay {n} days?",
    "What should I pack for {city} besides my {thing}?",
    "Could you explain {topic} like I'm five?",
    "I need to buy ingredients for {food} before {day}.",
]
ASSISTANT_TEMPLATES = [
    "Your flight to {city} leaves at {hour}:{minute:02d} on {day}; check-in closes 45 minutes "
    "earlier.",
    "You agreed with {person} to revisit {topic} on {day} and to share the draft beforehand.",
    "For {food} you need about {n} minutes; I suggested doubling the garlic last time.",
    "Last time we covered the first {n} points of {topic}; the open question was the deadline.",
    "You said the {thing} was in the blue backpack, front pocket, before the {city} trip.",
    "In short: {topic} is on track, and the remaining risk is the {day} deadline.",
    "Moving the meeting with {person} to {day} works if the report is ready by then.",
    "{city} is {n} hours ahead, so a call at 9 in the morning here is late afternoon there.",
    "With {n} dollars for {topic}, you stay within the limit we set last month.",
    "Here is a draft: 'Hi {person}, I'm running late on {day}, sorry, I'll be there soon.'",
    "Nice progress: {n} pages on {topic} puts you ahead of the plan we made.",
    "For a stay of {n} days in {city}, most passports need no visa, but check the embassy site.",
    "Besides your {thing}, pack layers: {city} evenings get cold on {day}.",
    "Think of {topic} as a to-do list that someone else can read and check off.",
    "I'll remind you on {day} to buy what you need for {food}.",
]
QUESTION_TEMPLATES = [
    "When does my flight to {city} leave?",
    "What did I agree with {person} about {topic}?",
    "Which recipe for {food} did you give me?",
    "Where did I leave my {thing}?",
    "What was my budget for {topic}?",
    "Do I need a visa for {city}?",
    "What did we decide for {day}?",
    "What do I need to remember about {topic}?",
    "Can you remind me what {person} said about {day}?",
    "How long does {food} take to cook?",
]


def fill(template: str, rng: random.Random, theme: dict[str, str]) -> str:
    """A template filled mostly from the conversation's theme, sometimes with other words."""

    def pick(key: str, choices: list[str]) -> str:
        return theme[key] if rng.random() < 0.7 else rng.choice(choices)

    return template.format(
        city=pick("city", CITIES),
        day=pick("day", DAYS),
        person=pick("person", PEOPLE),
        food=pick("food", FOODS),
        topic=pick("topic", TOPICS),
        thing=pick("thing", THINGS),
        n=rng.randint(2, 60),
        hour=rng.randint(5, 22),
        minute=rng.choice([0, 5, 15, 20, 30, 45, 55]),
    )


def make_theme(rng: random.Random) -> dict[str, str]:
    return {
        "city": rng.choice(CITIES),
        "day": rng.choice(DAYS),
        "person": rng.choice(PEOPLE),
        "food": rng.choice(FOODS),
        "topic": rng.choice(TOPICS),
        "thing": rng.choice(THINGS),
    }


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    user_id: str
    theme: dict[str, str]


@dataclass(frozen=True)
class Request:
    conversation: Conversation
    question: str

    @property
    def config(self) -> RunnableConfig:
        return {
            "configurable": {
                "conversation_id": self.conversation.conversation_id,
                "user_id": self.conversation.user_id,
            }
        }


def make_conversations(settings: Settings, rng: random.Random) -> list[Conversation]:
    return [
        Conversation(f"conv-{i:04d}", f"user-{i % settings.users:03d}", make_theme(rng))
        for i in range(settings.conversations)
    ]


def conversation_turns(conversation: Conversation, count: int, rng: random.Random) -> list[NewTurn]:
    turns = []
    for i in range(count):
        role: Role = "user" if i % 2 == 0 else "assistant"
        templates = USER_TEMPLATES if role == "user" else ASSISTANT_TEMPLATES
        turns.append(NewTurn(role, fill(rng.choice(templates), rng, conversation.theme)))
    return turns


def make_requests(
    conversations: list[Conversation], count: int, rng: random.Random
) -> list[Request]:
    requests = []
    for _ in range(count):
        conversation = rng.choice(conversations)
        question = fill(rng.choice(QUESTION_TEMPLATES), rng, conversation.theme)
        requests.append(Request(conversation, question))
    return requests


# -- fakes --------------------------------------------------------------------------------


class WaitingChatModel(BaseChatModel):
    """A summarization model that waits like a call to Ollama (I/O, no CPU) and replies.

    ``interrupt`` ends the wait early (used to end a phase-B block without waiting).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    seconds: float = 2.0
    reply: str = SUMMARY_REPLY
    interrupt: threading.Event = Field(default_factory=threading.Event)
    calls: list[float] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "waiting-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.interrupt.wait(self.seconds)
        self.calls.append(time.perf_counter())
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])


class CountingConsolidation(ConsolidationService):
    """The real service, counting what it does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count_lock = threading.Lock()
        self.running = 0
        self.completed: list[tuple[float, float, bool]] = []  # (start, end, stored a summary)

    def consolidate(
        self, conversation_id: str, user_id: str, *, reason: str = "manual"
    ) -> Summary | None:
        with self.count_lock:
            self.running += 1
        began = time.perf_counter()
        stored: Summary | None = None
        try:
            stored = super().consolidate(conversation_id, user_id, reason=reason)
            return stored
        finally:
            with self.count_lock:
                self.running -= 1
                self.completed.append((began, time.perf_counter(), stored is not None))


class NullMemory:
    """A memory that knows nothing and stores nothing: the chain and the model alone."""

    def __init__(self) -> None:
        self.counter = TokenCounter()

    def retrieve(self, conversation_id: str, user_id: str, query: str) -> MemoryContext:
        return MemoryContext(conversation_id, user_id, None, (), ())

    def add_turns(self, conversation_id: str, user_id: str, turns: Any) -> list[Any]:
        return []


def fake_chat_model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(REPLY)))


# -- instrumentation of the background work -----------------------------------------------


class Recorder:
    """What the background threads do, per phase and per thread kind.

    ``TurnIndexer.embed_batch`` and ``TurnIndexer.drain``, ``EdgeIndex.flush`` and
    ``SQLStore.add_summary`` are wrapped on the instances (nothing in the library changes):
    embedded turns, drain calls (a long drain that embeds little waited for the indexer's
    lock), flush windows and stored summaries.
    """

    def __init__(self, services: Services) -> None:
        tier3 = services.vectors
        assert tier3 is not None
        self.phase = "setup"
        self.embedded: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.embed_ms: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        # (start, end, turns embedded) per phase and thread kind
        self.drains: dict[str, dict[str, list[tuple[float, float, int]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.flushes: list[tuple[float, float, str, str]] = []  # (start, end, phase, kind)
        self.summaries: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        indexer = tier3.indexer
        embed_batch, drain = indexer.embed_batch, indexer.drain
        flush = indexer.index.flush
        add_summary = services.store.add_summary

        def counted_embed(batch: Any) -> None:
            t0 = time.perf_counter()
            embed_batch(batch)
            kind = thread_kind()
            self.embedded[self.phase][kind] += len(batch)
            self.embed_ms[self.phase][kind].append((time.perf_counter() - t0) * 1e3)

        def timed_drain(*args: Any, **kwargs: Any) -> int:
            t0 = time.perf_counter()
            done: int = drain(*args, **kwargs)
            self.drains[self.phase][thread_kind()].append((t0, time.perf_counter(), done))
            return done

        def timed_flush() -> None:
            t0 = time.perf_counter()
            flush()
            self.flushes.append((t0, time.perf_counter(), self.phase, thread_kind()))

        def counted_summary(*args: Any, **kwargs: Any) -> Summary | None:
            t0 = time.perf_counter()
            stored: Summary | None = add_summary(*args, **kwargs)
            if stored is not None:
                self.summaries[self.phase][thread_kind()].append((t0, time.perf_counter()))
            return stored

        indexer.embed_batch = counted_embed  # type: ignore[method-assign]
        indexer.drain = timed_drain  # type: ignore[method-assign]
        indexer.index.flush = timed_flush  # type: ignore[method-assign]
        services.store.add_summary = counted_summary  # type: ignore[method-assign]

    def flush_windows(self, phase: str) -> list[tuple[float, float]]:
        return [(start, end) for start, end, p, _ in self.flushes if p == phase]

    def side_effect_windows(self, phase: str) -> list[tuple[float, float]]:
        """What the consolidation thread did besides waiting: stored summaries, drains."""
        windows = list(self.summaries[phase]["consolidation"])
        windows += [(start, end) for start, end, _ in self.drains[phase]["consolidation"]]
        return sorted(windows)

    def phase_figures(self, phase: str) -> dict[str, Any]:
        flushes: dict[str, list[float]] = defaultdict(list)
        for start, end, p, kind in self.flushes:
            if p == phase:
                flushes[kind].append((end - start) * 1e3)
        kinds = {
            kind
            for kinds in (self.embedded[phase], flushes, self.drains[phase], self.summaries[phase])
            for kind, values in kinds.items()
            if values
        }
        figures = {}
        for kind in sorted(kinds):
            drains = self.drains[phase][kind]
            flush_ms = flushes[kind]
            figures[kind] = {
                "embedded_turns": self.embedded[phase][kind],
                "embed_batches": len(self.embed_ms[phase][kind]),
                "embed_ms_total": float(sum(self.embed_ms[phase][kind])),
                "drain_calls": len(drains),
                "drain_ms_max": max(
                    ((end - start) * 1e3 for start, end, _ in drains), default=None
                ),
                "drain_ms_total": float(sum((end - start) * 1e3 for start, end, _ in drains)),
                "flushes": len(flush_ms),
                "flush_ms_p50": float(np.median(flush_ms)) if flush_ms else None,
                "flush_ms_max": max(flush_ms) if flush_ms else None,
                "summaries_stored": len(self.summaries[phase][kind]),
            }
        return figures


def thread_kind() -> str:
    name = threading.current_thread().name
    if name.startswith("memory-chain-backfill"):
        return "backfill"
    if name.startswith("consolidation"):
        return "consolidation"
    if name == "MainThread":
        return "main"
    return name


# -- setup --------------------------------------------------------------------------------


@dataclass
class Stack:
    services: Services
    chain: Any
    llm: GenericFakeChatModel
    idle_consolidation: CountingConsolidation
    summarizer_model: WaitingChatModel
    recorder: Recorder
    conversations: list[Conversation]


def consolidation_service(
    services: Services, model: WaitingChatModel, settings: ConsolidationSettings
) -> CountingConsolidation:
    return CountingConsolidation(
        services.store,
        services.buffer,
        build_summarization_chain(model),
        tier3=services.vectors,
        counter=services.manager.counter,
        settings=settings,
    )


def idle_settings(keep_last: int) -> ConsolidationSettings:
    """Triggers out of reach: the listener checks them on every write, nothing fires."""
    return ConsolidationSettings(message_threshold=NEVER, token_limit=NEVER, keep_last=keep_last)


def build_stack(settings: Settings, folder: Path, started: float) -> tuple[Stack, dict[str, Any]]:
    figures: dict[str, Any] = {}
    memory_settings = MemorySettings(
        data_dir=folder, llm_fallback="off", ollama_base_url="http://127.0.0.1:9"
    )
    services = open_services(memory_settings, background=True)
    assert services.vectors is not None
    manager = services.manager
    recorder = Recorder(services)
    rng = random.Random(settings.seed)
    conversations = make_conversations(settings, rng)

    progress("loading the embedding model", started)
    t0 = time.perf_counter()
    services.vectors.embeddings.embed_query("warm up")
    figures["model_load_seconds"] = time.perf_counter() - t0

    total = settings.conversations * settings.turns
    progress(f"storing {total:,} turns through MemoryManager.add_turns", started)
    t0 = time.perf_counter()
    for conversation in conversations:
        turns = conversation_turns(conversation, settings.turns, rng)
        for start in range(0, len(turns), 10):  # ten turns per write, as a chat would
            manager.add_turns(
                conversation.conversation_id, conversation.user_id, turns[start : start + 10]
            )
    figures["store_seconds"] = time.perf_counter() - t0

    progress(f"embedding {total:,} turns into tier 3 (TurnIndexer.drain)", started)
    t0 = time.perf_counter()
    last = [t0]

    def report_drain(done: int, queued: int) -> None:
        if time.perf_counter() - last[0] > 20:
            last[0] = time.perf_counter()
            rate = done / (last[0] - t0)
            progress(f"embedded {done:,}/{queued:,} turns ({rate:,.0f}/s)", started)

    services.vectors.indexer.drain(progress=report_drain)
    figures["drain_seconds"] = time.perf_counter() - t0
    figures["points"] = services.vectors.index.count()
    figures["drain_turns_per_second"] = figures["points"] / figures["drain_seconds"]

    # Summaries up to the last few turns, as threshold consolidation would have left them.
    t0 = time.perf_counter()
    through = max(1, settings.turns - UNSUMMARIZED_TAIL)
    for conversation in conversations:
        services.store.add_summary(
            conversation.conversation_id,
            SUMMARY_REPLY,
            (1, through),
            running_summary=SUMMARY_REPLY,
            user_id=conversation.user_id,
        )
        services.buffer.prune(
            conversation.conversation_id, UNSUMMARIZED_TAIL, user_id=conversation.user_id
        )
    figures["summaries_seconds"] = time.perf_counter() - t0

    model = WaitingChatModel(seconds=settings.summary_seconds)
    keep_last = memory_settings.memory_tier1_keep_after_consolidation
    idle = consolidation_service(services, model, idle_settings(keep_last))
    manager.listeners.append(idle)
    llm = fake_chat_model()
    chain = build_chat_chain(manager, llm)
    # Warm every conversation into tier 1 and every code path once.
    for conversation in conversations:
        manager.recent_turns(conversation.conversation_id, conversation.user_id)
    for request in make_requests(conversations, 20, rng):
        chain.invoke({"input": request.question}, request.config)
    settle(services)
    figures["rss_mb_after_setup"] = rss_mb()
    stack = Stack(services, chain, llm, idle, model, recorder, conversations)
    return stack, figures


def settle(services: Services) -> None:
    """Catch the tier-3 backfill up in this thread, then let the worker see the empty queue."""
    assert services.vectors is not None
    services.vectors.indexer.drain(settle=False)
    time.sleep(0.005)


# -- part 1: overhead of a chat turn ------------------------------------------------------


def bench_overhead(stack: Stack, settings: Settings, started: float) -> dict[str, Any]:
    services = stack.services
    manager = services.manager
    tier3 = services.vectors
    assert tier3 is not None
    embeddings = tier3.embeddings
    chain = stack.chain
    clock = time.perf_counter_ns
    rng = random.Random(settings.seed + 1)
    result: dict[str, Any] = {}

    def chat(request: Request) -> int:
        t0 = clock()
        chain.invoke({"input": request.question}, request.config)
        return clock() - t0

    def embed(request: Request) -> int:
        t0 = clock()
        embeddings.embed_query(request.question)
        return clock() - t0

    null_chain = build_chat_chain(NullMemory(), fake_chat_model())  # type: ignore[arg-type]

    def bare(request: Request) -> int:
        t0 = clock()
        null_chain.invoke({"input": request.question}, request.config)
        return clock() - t0

    # (a) settled and (b) back to back: the chat turn, the same chain over a no-op memory and
    # the embedding alternate, in an order rotated per request. Memory's own cost is the chat
    # turn minus the no-op chain of the same request (the LCEL plumbing and the fake model,
    # which a chat app without memory pays too).
    for mode, wait in (("settled", True), ("back_to_back", False)):
        progress(
            f"part 1 ({mode}): chat turn vs embed_query, {settings.requests} requests", started
        )
        requests = make_requests(stack.conversations, settings.requests, rng)
        samples_ns: dict[str, list[int]] = {"chat": [], "bare": [], "embed": []}
        measures = (("chat", chat), ("bare", bare), ("embed", embed))
        settle(services)
        gc.collect()
        for i, request in enumerate(requests):
            shift = i % len(measures)
            for name, measure in measures[shift:] + measures[:shift]:
                if wait:
                    settle(services)
                samples_ns[name].append(measure(request))
        chat_ns, embed_ns = samples_ns["chat"], samples_ns["embed"]
        memory_ns = np.asarray(chat_ns) - np.asarray(samples_ns["bare"])
        chat_stats, embed_stats = summarize_ms(chat_ns), summarize_ms(embed_ns)
        memory_stats = summarize_ms([int(v) for v in memory_ns])
        result[mode] = {
            "chat_ms": chat_stats,
            "chain_no_memory_ms": summarize_ms(samples_ns["bare"]),
            "memory_overhead_ms": memory_stats,
            "embed_query_ms": embed_stats,
            "memory_p95_over_embed_p95": memory_stats["p95"] / embed_stats["p95"],
            "chat_p95_over_embed_p95": chat_stats["p95"] / embed_stats["p95"],
            "chat_p50_over_embed_p50": chat_stats["p50"] / embed_stats["p50"],
            "median_paired_difference_ms": float(
                np.median(np.asarray(chat_ns) - np.asarray(embed_ns)) / 1e6
            ),
        }

    # (c) breakdown, settled, the operations in rotating order.
    progress(f"part 1: breakdown, {settings.breakdown_requests} requests", started)
    samples: dict[str, list[int]] = defaultdict(list)
    requests = make_requests(stack.conversations, settings.breakdown_requests, rng)
    pool = ThreadPoolExecutor(max_workers=1)
    store = services.store
    retrieval = manager.retrieval

    def op_retrieve(request: Request) -> None:
        c = request.conversation
        t0 = clock()
        context = manager.retrieve(c.conversation_id, c.user_id, request.question)
        samples["retrieve"].append(clock() - t0)
        messages = build_prompt_with_memory(DEFAULT_SYSTEM_MESSAGE, context, request.question)
        t0 = clock()
        for _ in stack.llm.stream(messages):
            pass
        samples["llm_stream"].append(clock() - t0)

    def op_add(request: Request) -> None:
        c = request.conversation
        turns = [NewTurn("user", request.question), NewTurn("assistant", REPLY)]
        t0 = clock()
        manager.add_turns(c.conversation_id, c.user_id, turns)
        samples["add_turns"].append(clock() - t0)

    def op_add_parts(request: Request) -> None:
        """The SQL write alone (nobody woken), then the consolidation trigger check alone.

        On a scratch conversation of the same user: writing past tier 1 would make the
        chat's conversation miss in tier 1 afterwards.
        """
        c = request.conversation
        scratch = f"scratch-{c.conversation_id}"
        turns = [NewTurn("user", request.question), NewTurn("assistant", REPLY)]
        t0 = clock()
        stored = store.append_turns(scratch, turns, user_id=c.user_id)
        t1 = clock()
        consolidation = stack.idle_consolidation
        consolidation.trigger_reason(scratch, c.user_id, turn_count=stored[-1].turn_number)
        t2 = clock()
        # As after a chat write: the conversation is in tier 1 (the scratch one is not).
        meta = manager.buffer.metadata(c.conversation_id, c.user_id)
        count = meta.turn_count if meta is not None else None
        t3 = clock()
        consolidation.trigger_reason(c.conversation_id, c.user_id, turn_count=count)
        t4 = clock()
        samples["part_append_turns"].append(t1 - t0)
        samples["part_trigger_check_miss"].append(t2 - t1)
        samples["part_trigger_check"].append(t4 - t3)

    def op_null_chain(request: Request) -> None:
        t0 = clock()
        null_chain.invoke({"input": request.question}, request.config)
        samples["chain_no_memory"].append(clock() - t0)

    def op_stream(request: Request) -> None:
        t0 = clock()
        chunks = chain.stream({"input": request.question}, request.config)
        next(chunks)
        samples["stream_first_chunk"].append(clock() - t0)
        for _ in chunks:
            pass
        samples["stream_complete"].append(clock() - t0)

    def op_embed(request: Request) -> None:
        samples["embed_query"].append(embed(request))

    def op_retrieve_parts(request: Request) -> None:
        """The steps of MemoryManager.retrieve, one at a time (no threads)."""
        c = request.conversation
        cid, uid, q = c.conversation_id, c.user_id, request.question
        t0 = clock()
        store.search(q, user_id=uid, conversation_id=None, limit=retrieval.keyword_k)
        t1 = clock()
        manager.recent_turns(cid, uid)
        t2 = clock()
        manager.summary(cid, uid)
        t3 = clock()
        vector = embeddings.embed_query(q)
        t4 = clock()
        tier3.index.search(vector, VectorFilter(user_id=uid), retrieval.semantic_k)
        t5 = clock()
        if tier3.facts is not None:
            tier3.facts.search(uid, vector, retrieval.facts_k)
        t6 = clock()
        samples["part_keyword_search"].append(t1 - t0)
        samples["part_recent_turns"].append(t2 - t1)
        samples["part_summary"].append(t3 - t2)
        samples["part_embed_query"].append(t4 - t3)
        samples["part_vector_search"].append(t5 - t4)
        samples["part_facts_search"].append(t6 - t5)

    def op_embed_with_keyword(request: Request) -> None:
        """embed_query while the keyword search runs in another thread, as retrieve does."""
        c = request.conversation
        future = pool.submit(
            store.search,
            request.question,
            user_id=c.user_id,
            conversation_id=None,
            limit=retrieval.keyword_k,
        )
        t0 = clock()
        embeddings.embed_query(request.question)
        samples["embed_query_during_keyword_search"].append(clock() - t0)
        future.result()

    operations: list[Callable[[Request], None]] = [
        op_retrieve,
        op_add,
        op_add_parts,
        op_null_chain,
        op_stream,
        op_embed,
        op_retrieve_parts,
        op_embed_with_keyword,
    ]
    gc.collect()
    for i, request in enumerate(requests):
        shift = i % len(operations)
        for operation in operations[shift:] + operations[:shift]:
            settle(services)
            operation(request)
    pool.shutdown()
    breakdown = {name: summarize_ms(values) for name, values in sorted(samples.items())}
    result["breakdown"] = breakdown
    p50 = {name: stats["p50"] for name, stats in breakdown.items()}
    result["settled_chat_minus_parts_p50_ms"] = (
        result["settled"]["chat_ms"]["p50"]
        - p50["retrieve"]
        - p50["add_turns"]
        - p50["chain_no_memory"]
    )

    if settings.profile_requests:
        result["profile"] = profile_chat(stack, settings, rng, started)
    return result


def profile_chat(
    stack: Stack, settings: Settings, rng: random.Random, started: float
) -> dict[str, Any]:
    """cProfile of settled chat requests (main thread only): the top functions."""
    progress(f"part 1: cProfile of {settings.profile_requests} chat requests", started)
    profiler = cProfile.Profile()
    for request in make_requests(stack.conversations, settings.profile_requests, rng):
        settle(stack.services)
        profiler.enable()
        stack.chain.invoke({"input": request.question}, request.config)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)
    return {"requests": settings.profile_requests, "text": out.getvalue()}


# -- part 2: chat latency while consolidation runs ----------------------------------------


def overlaps(window: tuple[float, float], others: Sequence[tuple[float, float]]) -> bool:
    start, end = window
    return any(o_start < end and o_end > start for o_start, o_end in others)


def bench_consolidation(stack: Stack, settings: Settings, started: float) -> dict[str, Any]:
    services = stack.services
    manager = services.manager
    model = stack.summarizer_model
    recorder = stack.recorder
    rng = random.Random(settings.seed + 2)
    keep_last = services.settings.memory_tier1_keep_after_consolidation
    think = settings.think_ms / 1e3
    # Per phase: (start, end) of every request, in perf_counter seconds.
    windows: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    blocks: list[dict[str, Any]] = []
    services_b: list[CountingConsolidation] = []
    explicit = itertools.cycle(stack.conversations)
    phase_seconds = {"A": 0.0, "B": 0.0}
    calls_in_b = 0
    stop_wait_seconds: list[float] = []

    for round_ in range(settings.rounds):
        for phase in ("A", "B"):
            service: CountingConsolidation | None = None
            if phase == "B":
                model.interrupt.clear()
                service = consolidation_service(
                    services,
                    model,
                    ConsolidationSettings(
                        message_threshold=settings.message_threshold, keep_last=keep_last
                    ),
                )
                services_b.append(service)
                manager.listeners[manager.listeners.index(stack.idle_consolidation)] = service
                for _ in range(EXPLICIT_SCHEDULES):
                    conversation = next(explicit)
                    # A threshold reason: "end", "idle" or "manual" would also summarize the
                    # turns the chat adds meanwhile, lap after lap, until it stops.
                    service.schedule(conversation.conversation_id, conversation.user_id, "messages")
            recorder.phase = phase
            calls_before = len(model.calls)
            block_windows: list[tuple[float, float]] = []
            gc.collect()
            began = time.perf_counter()
            deadline = began + settings.block_seconds
            while time.perf_counter() < deadline:
                request = make_requests(stack.conversations, 1, rng)[0]
                t0 = time.perf_counter()
                stack.chain.invoke({"input": request.question}, request.config)
                block_windows.append((t0, time.perf_counter()))
                if think:
                    time.sleep(think)
            ended = time.perf_counter()
            phase_seconds[phase] += ended - began
            recorder.phase = "transition"
            latencies = [(end - start) * 1e9 for start, end in block_windows]
            block: dict[str, Any] = {
                "round": round_,
                "phase": phase,
                "requests": len(block_windows),
                "seconds": ended - began,
                "chat_ms": summarize_ms(latencies),
            }
            if service is not None:
                calls_in_b += len(model.calls) - calls_before
                # End the block: no new consolidations, cut the summarizer's wait short, and
                # wait for the one in progress to finish its side effects.
                manager.listeners[manager.listeners.index(service)] = stack.idle_consolidation
                model.interrupt.set()
                t0 = time.perf_counter()
                service.stop(wait=False)
                quiet = 0
                while quiet < 5:  # a job taken from the queue just before stop() may start
                    quiet = 0 if service.running else quiet + 1
                    time.sleep(0.01)
                stop_wait_seconds.append(time.perf_counter() - t0)
                finished = [c for c in service.completed if c[1] <= ended]
                busy = sum(
                    min(end, ended) - max(start, began)
                    for start, end, _ in service.completed
                    if end > began and start < ended
                )
                block["consolidations_finished"] = len(finished)
                block["consolidation_busy_share"] = busy / (ended - began)
                block["failures"] = service.failures
            blocks.append(block)
            windows[phase].extend(block_windows)
            settle(services)
            time.sleep(0.2)
        progress(f"part 2: round {round_ + 1}/{settings.rounds} done", started)

    def ms(selected: Sequence[tuple[float, float]]) -> dict[str, Any]:
        return summarize_ms([(end - start) * 1e9 for start, end in selected])

    stats = {phase: ms(values) for phase, values in windows.items()}
    flush_windows = {phase: recorder.flush_windows(phase) for phase in ("A", "B")}
    tagged: dict[str, Any] = {}
    for phase in ("A", "B"):
        hit_flush = [w for w in windows[phase] if overlaps(w, flush_windows[phase])]
        tagged[f"{phase}_overlapping_flush"] = ms(hit_flush)
    side_effects = recorder.side_effect_windows("B")
    hit_side = [w for w in windows["B"] if overlaps(w, side_effects)]
    tagged["B_overlapping_side_effects"] = ms(hit_side)
    tagged["B_clear"] = ms(
        [
            w
            for w in windows["B"]
            if not overlaps(w, side_effects) and not overlaps(w, flush_windows["B"])
        ]
    )
    tagged["A_clear"] = ms([w for w in windows["A"] if not overlaps(w, flush_windows["A"])])
    b_blocks = [b for b in blocks if b["phase"] == "B"]
    background = {phase: recorder.phase_figures(phase) for phase in ("A", "B")}
    return {
        "think_ms": settings.think_ms,
        "phase_ms": stats,
        "p95_ratio": stats["B"]["p95"] / stats["A"]["p95"],
        "p50_ratio": stats["B"]["p50"] / stats["A"]["p50"],
        "p99_ratio": stats["B"]["p99"] / stats["A"]["p99"],
        "tagged_ms": tagged,
        "phase_seconds": phase_seconds,
        "blocks": blocks,
        "consolidations_finished_in_b": sum(b["consolidations_finished"] for b in b_blocks),
        "summaries_stored_in_b": sum(
            entry["summaries_stored"] for entry in background["B"].values()
        ),
        "embedded_turns_in_b": sum(entry["embedded_turns"] for entry in background["B"].values()),
        "summarizer_calls_in_b": calls_in_b,
        "side_effect_windows_in_b": len(side_effects),
        "side_effect_ms": summarize_ms([(end - start) * 1e9 for start, end in side_effects]),
        "consolidation_busy_share_in_b": float(
            np.mean([b["consolidation_busy_share"] for b in b_blocks])
        ),
        "failures": sum(s.failures for s in services_b),
        "stop_wait_seconds_max": max(stop_wait_seconds) if stop_wait_seconds else 0.0,
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


# -- run ----------------------------------------------------------------------------------


def run(settings: Settings, started: float) -> dict[str, Any]:
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


# -- report -------------------------------------------------------------------------------


def stats_line(label: str, stats: dict[str, Any]) -> str:
    return (
        f"  {label:<58} {stats['n']:>6,} {fmt(stats['p50']):>8} {fmt(stats['p95']):>8} "
        f"{fmt(stats['p99']):>8} {fmt(stats['max']):>8}"
    )


def stats_header(label: str) -> str:
    return f"  {label:<58} {'n':>6} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}"


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
    lines: list[str] = []
    setup = result["setup"]
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

    over = result["overhead"]
    goal = GOALS["chat_overhead_p95_over_embed_p95"]
    lines.append("")
    lines.append(
        "== 1. overhead of a chat turn (fake LLM): chain.invoke vs embed_query of the same "
        "question, alternating =="
    )
    lines.append(stats_header("latency, ms"))
    for mode, title in (
        ("settled", "settled (tier-3 backfill caught up before each measurement)"),
        ("back_to_back", "back to back (the previous turn's backfill may still run)"),
    ):
        entry = over[mode]
        lines.append(f"  -- {title}")
        lines.append(stats_line("chat turn: chain.invoke", entry["chat_ms"]))
        lines.append(stats_line("same chain over a no-op memory", entry["chain_no_memory_ms"]))
        lines.append(
            stats_line("memory's cost: chat - no-op chain, paired", entry["memory_overhead_ms"])
        )
        lines.append(stats_line("embed_query alone", entry["embed_query_ms"]))
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
        ("  facts search", "part_facts_search"),
    ):
        lines.append(stats_line(label, breakdown[key]))
    lines.append(
        f"  {'chat p50 - (retrieve + add_turns + chain no-memory) p50, ms':<58} "
        f"{fmt(over['settled_chat_minus_parts_p50_ms']):>18}"
    )
    lines.append("  background work during part 1:")
    lines.extend(background_lines(result["background_part1"]))

    cons = result["consolidation"]
    goal = GOALS["consolidation_p95_over_idle_p95"]
    lines.append("")
    pause = f"{settings.think_ms:g} ms pause after each" if settings.think_ms else "back to back"
    lines.append(
        f"== 2. chat while consolidation runs: {settings.rounds} rounds of A/B blocks of "
        f"{settings.block_seconds:g} s, requests {pause}; B: message_threshold "
        f"{settings.message_threshold}, summarizer waits {settings.summary_seconds:g} s per call =="
    )
    lines.append(stats_header("chat latency, ms"))
    lines.append(stats_line("A: no consolidation", cons["phase_ms"]["A"]))
    lines.append(stats_line("B: consolidation running", cons["phase_ms"]["B"]))
    tagged = cons["tagged_ms"]
    for label, key in (
        ("  A: requests overlapping an index flush", "A_overlapping_flush"),
        ("  A: the others", "A_clear"),
        ("  B: overlapping a consolidation's summary write or drain", "B_overlapping_side_effects"),
        ("  B: overlapping an index flush", "B_overlapping_flush"),
        ("  B: neither", "B_clear"),
    ):
        if tagged[key]["n"]:
            lines.append(stats_line(label, tagged[key]))
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
    profile = over.get("profile")
    if profile:
        lines.append("")
        lines.append(f"== cProfile of {profile['requests']} settled chat requests (main thread) ==")
        lines.extend(profile["text"].rstrip().splitlines())
    return lines


def verdicts(result: dict[str, Any]) -> dict[str, str]:
    """Every goal's ok/MISSED, for the JSON file."""
    goal = GOALS["chat_overhead_p95_over_embed_p95"]
    out = {
        f"chat_overhead_{mode}": verdict(
            result["overhead"][mode]["memory_p95_over_embed_p95"], goal, False
        )
        for mode in ("settled", "back_to_back")
    }
    out["consolidation_p95_ratio"] = verdict(
        result["consolidation"]["p95_ratio"], GOALS["consolidation_p95_over_idle_p95"], False
    )
    return out


def versions() -> dict[str, str]:
    found = {}
    for name in (
        "langchain-core",
        "qdrant-edge-py",
        "sentence-transformers",
        "torch",
        "SQLAlchemy",
    ):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument("--quick", action="store_true", help="smoke run of about a minute")
    parser.add_argument("--conversations", type=int, help="pre-populated conversations (200)")
    parser.add_argument("--turns", type=int, help="turns per pre-populated conversation (50)")
    parser.add_argument("--users", type=int, help="users owning the conversations (20)")
    parser.add_argument("--requests", type=int, help="chat requests per part-1 measurement (300)")
    parser.add_argument(
        "--breakdown-requests", type=int, help="requests of the part-1 breakdown (200)"
    )
    parser.add_argument(
        "--summary-seconds", type=float, help="wait of the fake summarizer per call (2)"
    )
    parser.add_argument("--block-seconds", type=float, help="length of a part-2 block (10)")
    parser.add_argument("--rounds", type=int, help="A/B rounds in part 2 (6)")
    parser.add_argument(
        "--think-ms",
        type=float,
        help="pause after each part-2 request (50; 0: back to back, which saturates the backfill)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        metavar="N",
        help="also cProfile N settled chat requests and print the top functions",
    )
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args(argv)

    settings = Settings(seed=args.seed, quick=args.quick)
    if args.quick:
        settings = replace(settings, **QUICK)
    overrides = {
        "conversations": args.conversations,
        "turns": args.turns,
        "users": args.users,
        "requests": args.requests,
        "breakdown_requests": args.breakdown_requests,
        "summary_seconds": args.summary_seconds,
        "block_seconds": args.block_seconds,
        "rounds": args.rounds,
        "think_ms": args.think_ms,
        "profile_requests": args.profile,
    }
    settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    if settings.turns < UNSUMMARIZED_TAIL + 2:
        parser.error(f"--turns must be at least {UNSUMMARIZED_TAIL + 2}")

    started = time.perf_counter()
    environment: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
        "versions": versions(),
    }
    print(
        f"memory_chain chat benchmark: Python {environment['python']}, "
        f"{environment['cpus']} CPUs, load average {environment['load_average_start'][0]:.2f}; "
        + ", ".join(f"{k} {v}" for k, v in environment["versions"].items())
    )
    print(
        f"settings: {settings.conversations} conversations x {settings.turns} turns, "
        f"{settings.users} users, {settings.requests} requests per part-1 measurement, part 2 "
        f"{settings.rounds} x (A + B) blocks of {settings.block_seconds:g} s, "
        f"{settings.think_ms:g} ms pause after each request, summarizer "
        f"{settings.summary_seconds:g} s per call\n",
        flush=True,
    )
    result = run(settings, started)
    environment["load_average_end"] = os.getloadavg()
    for line in report(result, settings):
        print(line)
    total = time.perf_counter() - started
    print(
        f"\ntotal run time {total:.0f} s; load average at the end "
        f"{environment['load_average_end'][0]:.2f}"
    )
    if args.json:
        payload = {
            "environment": environment,
            "settings": vars(settings),
            "goals": GOALS,
            "verdicts": verdicts(result),
            "results": result,
            "seconds": total,
        }
        args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
