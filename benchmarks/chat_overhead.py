"""Part 1 of the chat benchmark: what memory adds to a chat turn, and where that time goes.

The chat turn (``chain.invoke``), the same chain over a no-op memory, an agent with
``MemoryMiddleware``, the same agent without it (:mod:`chat_agents`) and ``embed_query`` of
the same question alternate request by request (the order rotated every request), (a) with
the tier-3 backfill caught up before each measurement ("settled") and (b) back to back.
Memory's cost is the chat turn minus the no-op chain of the same request: the LCEL plumbing
and the (fake) model are paid by a chat app without memory too; through the middleware, the
agent minus the bare agent. Then the breakdown (:class:`Breakdown`): the steps of a request
timed one by one, settled, in rotating order.
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import random
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np
from chat_agents import Agents, Measure, middleware_figures
from chat_stack import (
    REPLY,
    NullMemory,
    Request,
    Settings,
    Stack,
    chat_models,
    fake_chat_model,
    settle,
)
from harness import alternate, progress, rotated, summarize, timed

from memory_chain.chain import build_chat_chain
from memory_chain.chat.budget import Budget, build_prompt
from memory_chain.chat.core import ChatCore
from memory_chain.schemas import NewTurn
from memory_chain.tiers.vectors.index import VectorFilter

clock = time.perf_counter_ns


def bench_overhead(stack: Stack, settings: Settings, started: float) -> dict[str, Any]:
    """Memory's cost of a chat turn (settled and back to back), its breakdown, a profile."""
    rng = random.Random(settings.seed + 1)
    null_core = ChatCore(NullMemory(), chat_models(fake_chat_model()))  # type: ignore[arg-type]
    null_chain = build_chat_chain(null_core)
    agents = Agents.build(stack, chat_models(fake_chat_model()).info)
    agents.warm_up(stack.requests(20, rng))
    result: dict[str, Any] = {}
    for mode, wait in (("settled", True), ("back_to_back", False)):
        progress(
            f"part 1 ({mode}): chat turn and agent vs embed_query, {settings.requests} requests",
            started,
        )
        requests = stack.requests(settings.requests, rng)
        result[mode] = paired_overhead(stack, null_chain, agents, requests, settle_each=wait)

    progress(f"part 1: breakdown, {settings.breakdown_requests} requests", started)
    requests = stack.requests(settings.breakdown_requests, rng)
    breakdown = Breakdown(stack, null_chain).run(requests)
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


def paired_overhead(
    stack: Stack, null_chain: Any, agents: Agents, requests: list[Request], *, settle_each: bool
) -> dict[str, Any]:
    """The chat turn, the no-op chain, both agents and ``embed_query`` in turn on every
    request."""
    assert stack.services.vectors is not None
    embeddings = stack.services.vectors.embeddings

    def chat(request: Request) -> object:
        return stack.chain.invoke({"input": request.question}, request.config)

    def bare(request: Request) -> object:
        return null_chain.invoke({"input": request.question}, request.config)

    def embed(request: Request) -> object:
        return embeddings.embed_query(request.question)

    measures: dict[str, Measure] = {
        "chat": chat,
        "bare": bare,
        **dict(agents.measures()),
        "embed": embed,
    }
    settle(stack.services)

    def settled(_name: str, _request: Request) -> None:
        settle(stack.services)

    timings = alternate(measures, requests, before=settled if settle_each else None)
    memory_ns = timings.differences("chat", "bare")
    chat_stats, embed_stats = timings.summary("chat"), timings.summary("embed")
    memory_stats = summarize(memory_ns)
    by_profile = {
        str(size): summarize(
            [v for v, r in zip(memory_ns, requests, strict=True) if r.facts == size]
        )
        for size in sorted({r.facts for r in requests})
    }
    return {
        "memory_overhead_by_profile_ms": by_profile,
        "chat_ms": chat_stats,
        "chain_no_memory_ms": timings.summary("bare"),
        "memory_overhead_ms": memory_stats,
        "embed_query_ms": embed_stats,
        "memory_p95_over_embed_p95": memory_stats["p95"] / embed_stats["p95"],
        "chat_p95_over_embed_p95": chat_stats["p95"] / embed_stats["p95"],
        "chat_p50_over_embed_p50": chat_stats["p50"] / embed_stats["p50"],
        "median_paired_difference_ms": float(np.median(timings.differences("chat", "embed")) / 1e6),
        **middleware_figures(timings, memory_stats),
    }


class Breakdown:
    """The steps of a chat request, each timed alone; samples in ns by step name."""

    def __init__(self, stack: Stack, null_chain: Any) -> None:
        assert stack.services.vectors is not None
        self.stack = stack
        self.null_chain = null_chain
        self.manager = stack.services.manager
        self.store = stack.services.store
        self.tier3 = stack.services.vectors
        self.retrieval = self.manager.retrieval
        self.samples: dict[str, list[int]] = defaultdict(list)
        self.pool = ThreadPoolExecutor(max_workers=1)
        # The prompt as the chain builds it for a 4,096-token window (the embedded model's).
        self.counter = chat_models(stack.llm).info.counter
        self.budget = Budget.of(window=4096, max_tokens=None, default_reply=512)

    def run(self, requests: list[Request]) -> dict[str, Any]:
        """Every operation on every request (settled, rotating order); stats by step."""
        operations: list[Callable[[Request], None]] = [
            self.retrieve,
            self.add,
            self.add_parts,
            self.chain_no_memory,
            self.stream,
            self.embed,
            self.retrieve_parts,
            self.embed_with_keyword,
        ]
        gc.collect()
        for i, request in enumerate(requests):
            for operation in rotated(operations, i):
                settle(self.stack.services)
                operation(request)
        self.pool.shutdown()
        return {name: summarize(values) for name, values in sorted(self.samples.items())}

    def retrieve(self, request: Request) -> None:
        """``MemoryManager.retrieve``, then the fake model alone on the prompt it gives."""
        c = request.conversation
        t0 = clock()
        context = self.manager.retrieve(c.conversation_id, c.user_id, request.question)
        self.samples["retrieve"].append(clock() - t0)
        self.samples[f"retrieve_{request.facts}_facts"].append(self.samples["retrieve"][-1])
        build = partial(
            build_prompt, system="", context=context, message=request.question,
            budget=self.budget, counter=self.counter,
        )  # fmt: skip
        nanoseconds, built = timed(build)
        self.samples["budget"].append(nanoseconds)
        clear = getattr(self.counter, "clear_cache", None)
        if clear is not None:  # the same prompt with no count cached
            clear()
            self.samples["budget_cold"].append(timed(build)[0])
        t0 = clock()
        for _ in self.stack.llm.stream(built.messages):
            pass
        self.samples["llm_stream"].append(clock() - t0)

    def add(self, request: Request) -> None:
        """``MemoryManager.add_turns`` of the question and a reply."""
        c = request.conversation
        turns = [NewTurn("user", request.question), NewTurn("assistant", REPLY)]
        t0 = clock()
        self.manager.add_turns(c.conversation_id, c.user_id, turns)
        self.samples["add_turns"].append(clock() - t0)

    def add_parts(self, request: Request) -> None:
        """The SQL write alone (nobody woken), then the consolidation trigger check alone.

        On a scratch conversation of the same user: writing past tier 1 would make the
        chat's conversation miss in tier 1 afterwards.
        """
        c = request.conversation
        scratch = f"scratch-{c.conversation_id}"
        turns = [NewTurn("user", request.question), NewTurn("assistant", REPLY)]
        t0 = clock()
        stored = self.store.append_turns(scratch, turns, user_id=c.user_id)
        t1 = clock()
        consolidation = self.stack.idle_consolidation
        consolidation.trigger_reason(scratch, c.user_id, turn_count=stored[-1].turn_number)
        t2 = clock()
        # As after a chat write: the conversation is in tier 1 (the scratch one is not).
        meta = self.manager.buffer.metadata(c.conversation_id, c.user_id)
        count = meta.turn_count if meta is not None else None
        t3 = clock()
        consolidation.trigger_reason(c.conversation_id, c.user_id, turn_count=count)
        t4 = clock()
        self.samples["part_append_turns"].append(t1 - t0)
        self.samples["part_trigger_check_miss"].append(t2 - t1)
        self.samples["part_trigger_check"].append(t4 - t3)

    def chain_no_memory(self, request: Request) -> None:
        """The chain over a no-op memory (LCEL and the fake model)."""
        t0 = clock()
        self.null_chain.invoke({"input": request.question}, request.config)
        self.samples["chain_no_memory"].append(clock() - t0)

    def stream(self, request: Request) -> None:
        """``chain.stream``: to its first chunk, and complete."""
        t0 = clock()
        chunks = self.stack.chain.stream({"input": request.question}, request.config)
        next(chunks)
        self.samples["stream_first_chunk"].append(clock() - t0)
        for _ in chunks:
            pass
        self.samples["stream_complete"].append(clock() - t0)

    def embed(self, request: Request) -> None:
        """``embed_query`` alone."""
        t0 = clock()
        self.tier3.embeddings.embed_query(request.question)
        self.samples["embed_query"].append(clock() - t0)

    def retrieve_parts(self, request: Request) -> None:
        """The steps of MemoryManager.retrieve, one at a time (no threads)."""
        c = request.conversation
        cid, uid, q = c.conversation_id, c.user_id, request.question
        tier3, retrieval = self.tier3, self.retrieval
        t0 = clock()
        hits = self.store.search(q, user_id=uid, conversation_id=None, limit=retrieval.keyword_k)
        t1 = clock()
        self.manager.recent_turns(cid, uid)
        t2 = clock()
        self.manager.summary(cid, uid)
        t3 = clock()
        vector = tier3.embeddings.embed_query(q)
        t4 = clock()
        points = tier3.index.search(vector, VectorFilter(user_id=uid), retrieval.semantic_k)
        t5 = clock()
        self.manager.profile(uid, vector)
        t6 = clock()
        self.samples[f"part_facts_search_{request.facts}_facts"].append(t6 - t5)
        recalled = {h.conversation_id for h in hits} | {p.payload.conversation_id for p in points}
        self.manager.fact_store.retired(uid, recalled)
        t7 = clock()
        self.samples["part_keyword_search"].append(t1 - t0)
        self.samples["part_recent_turns"].append(t2 - t1)
        self.samples["part_summary"].append(t3 - t2)
        self.samples["part_embed_query"].append(t4 - t3)
        self.samples["part_vector_search"].append(t5 - t4)
        self.samples["part_facts_search"].append(t6 - t5)
        self.samples["part_facts_retired"].append(t7 - t6)

    def embed_with_keyword(self, request: Request) -> None:
        """embed_query while the keyword search runs in another thread, as retrieve does."""
        c = request.conversation
        future = self.pool.submit(
            self.store.search,
            request.question,
            user_id=c.user_id,
            conversation_id=None,
            limit=self.retrieval.keyword_k,
        )
        t0 = clock()
        self.tier3.embeddings.embed_query(request.question)
        self.samples["embed_query_during_keyword_search"].append(clock() - t0)
        future.result()


def profile_chat(
    stack: Stack, settings: Settings, rng: random.Random, started: float
) -> dict[str, Any]:
    """cProfile of settled chat requests (main thread only): the top functions."""
    progress(f"part 1: cProfile of {settings.profile_requests} chat requests", started)
    profiler = cProfile.Profile()
    for request in stack.requests(settings.profile_requests, rng):
        settle(stack.services)
        profiler.enable()
        stack.chain.invoke({"input": request.question}, request.config)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)
    return {"requests": settings.profile_requests, "text": out.getvalue()}
