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

1. Overhead of a chat turn: ``chain.invoke`` against ``embed_query`` of the same question,
   alternating request by request (order swapped every request), (a) each measurement
   starting with the tier-3 backfill caught up ("settled"), and (b) back to back, as a busy
   server, where the backfill of the previous turn runs during the next measurement. Then
   the breakdown: ``MemoryManager.retrieve``, ``MemoryManager.add_turns``, the fake model
   alone, the chain over a no-op memory, and the parts of ``retrieve`` timed one by one.
2. Chat latency while consolidation runs: the same back-to-back chat requests in blocks of
   ``--block-seconds``, alternating phase A (no consolidation: the listener's thresholds are
   out of reach) and phase B (a ``ConsolidationService`` with ``message_threshold`` 4 whose
   summarizer is ``build_summarization_chain`` over a fake model that waits
   ``--summary-seconds`` per call, as a process waiting on Ollama does, and then does the
   real work: store the summaries, drain the tier-3 queue with real embeddings, prune
   tier 1; ``schedule`` calls start it at once and chat writes keep it queued).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.metadata
import io
import itertools
import json
import math
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
import psutil
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from memory_chain.chain import DEFAULT_SYSTEM_MESSAGE, build_chat_chain, build_prompt_with_memory
from memory_chain.config import MemorySettings
from memory_chain.consolidation import ConsolidationService, ConsolidationSettings
from memory_chain.schemas import MemoryContext, NewTurn, Summary
from memory_chain.services import Services, open_services
from memory_chain.summarize import build_summarization_chain
from memory_chain.tiers.vectors.index import VectorFilter
from memory_chain.tokens import TokenCounter

GOALS = {
    "chat_overhead_p95_over_embed_p95": 1.5,
    "consolidation_p95_over_idle_p95": 1.2,
}
MB = 1024 * 1024
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
    block_seconds: float = 15.0
    rounds: int = 4
    profile_requests: int = 0
    seed: int = 1234
    quick: bool = False


QUICK = {
    "conversations": 40,
    "turns": 20,
    "requests": 60,
    "block_seconds": 6.0,
    "rounds": 2,
}


# -- measurement helpers ------------------------------------------------------------------


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / MB


def progress(message: str, started: float) -> None:
    print(f"  .. [{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)


def summarize_ms(samples_ns: Sequence[int]) -> dict[str, Any]:
    if not samples_ns:
        return {"n": 0}
    values = np.asarray(samples_ns, dtype=np.float64) / 1e6
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "n": len(values),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": float(values.mean()),
        "max": float(values.max()),
    }


def verdict(value: float | None, goal: float, higher_is_better: bool) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    ok = value >= goal if higher_is_better else value <= goal
    return "ok" if ok else "MISSED"


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


# -- realistic chat text ------------------------------------------------------------------

CITIES = ["Lisbon", "Osaka", "Denver", "Nairobi", "Oslo", "Bogotá", "Krakow", "Hanoi", "Perth"]
DAYS = ["Monday", "Tuesday", "Friday", "the weekend", "3 May", "next week", "the 14th"]
PEOPLE = ["Ana", "my sister", "Dr. Patel", "the landlord", "Tom", "my manager", "Yuki"]
FOODS = ["lentil soup", "pad thai", "sourdough", "a vegan lasagna", "shakshuka", "ramen"]
TOPICS = [
    "the quarterly budget",
    "my knee injury",
    "the Python migration",
    "our wedding playlist",
    "the tax return",
    "learning Spanish",
    "the garden irrigation",
    "the job interview",
    "my sleep schedule",
    "the SQL index",
]
THINGS = ["passport", "laptop charger", "insurance card", "spare keys", "receipt", "tent"]

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
    def config(self) -> dict[str, Any]:
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
        role = "user" if i % 2 == 0 else "assistant"
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
    """Counts embedded turns and index flushes per phase and per thread kind.

    The indexer's ``embed_batch`` and the index's ``flush`` are wrapped on the instances
    (nothing in the library changes).
    """

    def __init__(self, services: Services) -> None:
        tier3 = services.vectors
        assert tier3 is not None
        self.phase = "setup"
        self.embedded: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.embed_ms: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.flush_ms: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        indexer = tier3.indexer
        embed_batch = indexer.embed_batch
        flush = indexer.index.flush

        def counted_embed(batch: Any) -> None:
            t0 = time.perf_counter()
            embed_batch(batch)
            kind = thread_kind()
            self.embedded[self.phase][kind] += len(batch)
            self.embed_ms[self.phase][kind].append((time.perf_counter() - t0) * 1e3)

        def timed_flush() -> None:
            t0 = time.perf_counter()
            flush()
            self.flush_ms[self.phase][thread_kind()].append((time.perf_counter() - t0) * 1e3)

        indexer.embed_batch = counted_embed  # type: ignore[method-assign]
        indexer.index.flush = timed_flush  # type: ignore[method-assign]

    def phase_figures(self, phase: str) -> dict[str, Any]:
        kinds = set(self.embedded[phase]) | set(self.flush_ms[phase])
        return {
            kind: {
                "embedded_turns": self.embedded[phase][kind],
                "embed_batches": len(self.embed_ms[phase][kind]),
                "embed_ms_total": float(sum(self.embed_ms[phase][kind])),
                "flushes": len(self.flush_ms[phase][kind]),
                "flush_ms_p50": float(np.median(self.flush_ms[phase][kind]))
                if self.flush_ms[phase][kind]
                else None,
                "flush_ms_max": float(max(self.flush_ms[phase][kind]))
                if self.flush_ms[phase][kind]
                else None,
            }
            for kind in sorted(kinds)
        }


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
        )
        services.buffer.prune(conversation.conversation_id, keep_last=UNSUMMARIZED_TAIL)
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

    # (a) settled and (b) back to back: chat and embedding alternate, order swapped per request.
    for mode, wait in (("settled", True), ("back_to_back", False)):
        progress(
            f"part 1 ({mode}): chat turn vs embed_query, {settings.requests} requests", started
        )
        requests = make_requests(stack.conversations, settings.requests, rng)
        chat_ns: list[int] = []
        embed_ns: list[int] = []
        settle(services)
        gc.collect()
        for i, request in enumerate(requests):
            order = (chat, embed) if i % 2 == 0 else (embed, chat)
            for measure in order:
                if wait:
                    settle(services)
                elapsed = measure(request)
                (chat_ns if measure is chat else embed_ns).append(elapsed)
        chat_stats, embed_stats = summarize_ms(chat_ns), summarize_ms(embed_ns)
        result[mode] = {
            "chat_ms": chat_stats,
            "embed_query_ms": embed_stats,
            "chat_p95_over_embed_p95": chat_stats["p95"] / embed_stats["p95"],
            "chat_p50_over_embed_p50": chat_stats["p50"] / embed_stats["p50"],
            "median_paired_difference_ms": float(
                np.median(np.asarray(chat_ns) - np.asarray(embed_ns)) / 1e6
            ),
        }

    # (c) breakdown, settled, the operations in rotating order.
    progress(f"part 1: breakdown, {settings.requests} requests", started)
    null_chain = build_chat_chain(NullMemory(), fake_chat_model())  # type: ignore[arg-type]
    samples: dict[str, list[int]] = defaultdict(list)
    requests = make_requests(stack.conversations, settings.requests, rng)
    pool = ThreadPoolExecutor(max_workers=1)

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

    def op_null_chain(request: Request) -> None:
        t0 = clock()
        null_chain.invoke({"input": request.question}, request.config)
        samples["chain_no_memory"].append(clock() - t0)

    def op_embed(request: Request) -> None:
        samples["embed_query"].append(embed(request))

    def op_parts(request: Request) -> None:
        """The steps of MemoryManager.retrieve, one at a time (no threads)."""
        c = request.conversation
        cid, uid, q = c.conversation_id, c.user_id, request.question
        store = services.store
        t0 = clock()
        store.search(q, user_id=uid, conversation_id=None, limit=manager.retrieval.keyword_k)
        t1 = clock()
        manager.recent_turns(cid, uid)
        t2 = clock()
        store.get_conversation(cid, user_id=uid)
        t3 = clock()
        vector = embeddings.embed_query(q)
        t4 = clock()
        tier3.index.search(vector, VectorFilter(user_id=uid), manager.retrieval.semantic_k)
        t5 = clock()
        if tier3.facts is not None:
            tier3.facts.search(uid, vector, manager.retrieval.facts_k)
        t6 = clock()
        samples["part_keyword_search"].append(t1 - t0)
        samples["part_recent_turns"].append(t2 - t1)
        samples["part_get_conversation"].append(t3 - t2)
        samples["part_embed_query"].append(t4 - t3)
        samples["part_vector_search"].append(t5 - t4)
        samples["part_facts_search"].append(t6 - t5)

    def op_embed_with_keyword(request: Request) -> None:
        """embed_query while the keyword search runs in another thread, as retrieve does."""
        c = request.conversation
        future = pool.submit(
            services.store.search,
            request.question,
            user_id=c.user_id,
            conversation_id=None,
            limit=manager.retrieval.keyword_k,
        )
        t0 = clock()
        embeddings.embed_query(request.question)
        samples["embed_query_during_keyword_search"].append(clock() - t0)
        future.result()

    operations: list[Callable[[Request], None]] = [
        op_retrieve,
        op_add,
        op_null_chain,
        op_embed,
        op_parts,
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
    settled = result["settled"]
    p50 = {name: stats["p50"] for name, stats in breakdown.items()}
    result["settled_chat_minus_parts_p50_ms"] = (
        settled["chat_ms"]["p50"] - p50["retrieve"] - p50["add_turns"] - p50["chain_no_memory"]
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


def bench_consolidation(stack: Stack, settings: Settings, started: float) -> dict[str, Any]:
    services = stack.services
    manager = services.manager
    model = stack.summarizer_model
    recorder = stack.recorder
    clock = time.perf_counter_ns
    rng = random.Random(settings.seed + 2)
    keep_last = services.settings.memory_tier1_keep_after_consolidation
    phase_ns: dict[str, list[int]] = {"A": [], "B": []}
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
                    service.schedule(
                        conversation.conversation_id, conversation.user_id, "benchmark"
                    )
            recorder.phase = phase
            calls_before = len(model.calls)
            samples: list[int] = []
            gc.collect()
            began = time.perf_counter()
            deadline = began + settings.block_seconds
            while time.perf_counter() < deadline:
                request = make_requests(stack.conversations, 1, rng)[0]
                t0 = clock()
                stack.chain.invoke({"input": request.question}, request.config)
                samples.append(clock() - t0)
            ended = time.perf_counter()
            phase_seconds[phase] += ended - began
            recorder.phase = "transition"
            block: dict[str, Any] = {
                "round": round_,
                "phase": phase,
                "requests": len(samples),
                "seconds": ended - began,
                "chat_ms": summarize_ms(samples),
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
                in_block = [c for c in service.completed if c[1] <= ended]
                busy = sum(
                    min(end, ended) - max(start, began)
                    for start, end, _ in service.completed
                    if end > began and start < ended
                )
                block["consolidations_finished"] = len(in_block)
                block["summaries_stored"] = sum(1 for c in in_block if c[2])
                block["consolidation_busy_share"] = busy / (ended - began)
                block["failures"] = service.failures
            blocks.append(block)
            phase_ns[phase].extend(samples)
            settle(services)
            time.sleep(0.2)
        progress(f"part 2: round {round_ + 1}/{settings.rounds} done", started)

    stats = {phase: summarize_ms(values) for phase, values in phase_ns.items()}
    b_blocks = [b for b in blocks if b["phase"] == "B"]
    return {
        "phase_ms": stats,
        "p95_ratio": stats["B"]["p95"] / stats["A"]["p95"],
        "p50_ratio": stats["B"]["p50"] / stats["A"]["p50"],
        "p99_ratio": stats["B"]["p99"] / stats["A"]["p99"],
        "phase_seconds": phase_seconds,
        "blocks": blocks,
        "consolidations_finished_in_b": sum(b["consolidations_finished"] for b in b_blocks),
        "summaries_stored_in_b": sum(b["summaries_stored"] for b in b_blocks),
        "summarizer_calls_in_b": calls_in_b,
        "consolidation_busy_share_in_b": float(
            np.mean([b["consolidation_busy_share"] for b in b_blocks])
        ),
        "failures": sum(s.failures for s in services_b),
        "stop_wait_seconds_max": max(stop_wait_seconds) if stop_wait_seconds else 0.0,
        "background": {phase: recorder.phase_figures(phase) for phase in ("A", "B")},
    }


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


def goal_line(label: str, value: str, goal: str, ok: str) -> str:
    return f"  {label:<58} {value:>18}   goal {goal:<12} {ok}"


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
        flush = (
            f", {entry['flushes']} index flushes (p50 {fmt(entry['flush_ms_p50'])} ms, max "
            f"{fmt(entry['flush_ms_max'])} ms)"
            if entry["flushes"]
            else ""
        )
        lines.append(
            f"{indent}{kind:<14} embedded {entry['embedded_turns']:,} turns in "
            f"{entry['embed_batches']:,} batches ({entry['embed_ms_total'] / 1e3:.1f} s){flush}"
        )
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
        ("settled", "settled (tier-3 backfill caught up before each)"),
        ("back_to_back", "back to back (previous turn's backfill may run)"),
    ):
        entry = over[mode]
        lines.append(f"  -- {title}")
        lines.append(stats_line("chat turn: chain.invoke", entry["chat_ms"]))
        lines.append(stats_line("embed_query alone", entry["embed_query_ms"]))
        lines.append(
            f"  {'median paired difference chat - embed, ms':<58} "
            f"{fmt(entry['median_paired_difference_ms']):>18}"
        )
        lines.append(
            goal_line(
                f"chat p95 / embed_query p95 ({mode.replace('_', ' ')})",
                f"{entry['chat_p95_over_embed_p95']:.3f}",
                f"<= {goal:g}",
                verdict(entry["chat_p95_over_embed_p95"], goal, higher_is_better=False),
            )
        )
    breakdown = over["breakdown"]
    lines.append("  -- breakdown (settled, operations in rotating order)")
    lines.append(stats_header("latency, ms"))
    for label, key in (
        ("MemoryManager.retrieve", "retrieve"),
        ("MemoryManager.add_turns (user + assistant turn)", "add_turns"),
        ("fake LLM alone: llm.stream(prompt)", "llm_stream"),
        ("chain over a no-op memory (LCEL + fake LLM)", "chain_no_memory"),
        ("embed_query alone", "embed_query"),
        (
            "embed_query while a keyword search runs (as retrieve)",
            "embed_query_during_keyword_search",
        ),
        ("retrieve, step by step: keyword search (FTS5, user)", "part_keyword_search"),
        ("  recent_turns (tier 1)", "part_recent_turns"),
        ("  get_conversation (SQL)", "part_get_conversation"),
        ("  embed_query", "part_embed_query"),
        ("  EdgeIndex.search (user, top 5)", "part_vector_search"),
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
    lines.append(
        f"== 2. chat while consolidation runs: {settings.rounds} rounds of A/B blocks of "
        f"{settings.block_seconds:g} s, back-to-back requests; B: message_threshold "
        f"{settings.message_threshold}, summarizer waits {settings.summary_seconds:g} s per call =="
    )
    lines.append(stats_header("chat latency, ms"))
    lines.append(stats_line("A: no consolidation", cons["phase_ms"]["A"]))
    lines.append(stats_line("B: consolidation running", cons["phase_ms"]["B"]))
    lines.append(
        f"  per block p95, ms: "
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
    lines.append(
        f"  during B ({cons['phase_seconds']['B']:.0f} s): {cons['consolidations_finished_in_b']} "
        f"consolidations finished ({cons['summaries_stored_in_b']} stored summaries), "
        f"{cons['summarizer_calls_in_b']} summarizer calls, consolidation thread busy "
        f"{cons['consolidation_busy_share_in_b']:.0%} of the time, {cons['failures']} failures; "
        f"longest wait for the running consolidation at a block's end "
        f"{cons['stop_wait_seconds_max']:.2f} s"
    )
    for phase in ("A", "B"):
        lines.append(f"  background work during {phase} ({cons['phase_seconds'][phase]:.0f} s):")
        lines.extend(background_lines(cons["background"][phase]))
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
            result["overhead"][mode]["chat_p95_over_embed_p95"], goal, False
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
        "--summary-seconds", type=float, help="wait of the fake summarizer per call (2)"
    )
    parser.add_argument("--block-seconds", type=float, help="length of a part-2 block (15)")
    parser.add_argument("--rounds", type=int, help="A/B rounds in part 2 (4)")
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
        "summary_seconds": args.summary_seconds,
        "block_seconds": args.block_seconds,
        "rounds": args.rounds,
        "profile_requests": args.profile,
    }
    settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    if settings.turns < UNSUMMARIZED_TAIL + 2:
        parser.error(f"--turns must be at least {UNSUMMARIZED_TAIL + 2}")

    started = time.perf_counter()
    environment = {
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
        f"{settings.rounds} x (A + B) blocks of {settings.block_seconds:g} s, summarizer "
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
