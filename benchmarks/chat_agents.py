"""Part 1's agents: memory's cost of a turn through ``MemoryMiddleware`` in ``create_agent``.

Two agents over the chain's kind of fake model (a fixed reply at once), no tools and no
checkpointer: ``create_agent(model, middleware=[MemoryMiddleware(services)])`` and the same
agent without the middleware. With no checkpointer memory is the thread's only history, as
it is for the chain: each run starts from the user's message, and the middleware adds the
conversation's recent turns, its summary and what memory recalls, then stores the exchange,
the same work the chain does. (A checkpointer would be paid by the bare agent too, and its
threads would grow over the run, so the middleware would count ever longer threads.)

Memory's cost through the middleware is the agent with it minus the bare agent on the same
request, as the chain's is the chain minus the chain over a no-op memory: LangGraph's
plumbing and the fake model are paid by an agent without memory too.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from chat_stack import REPLY, Request, Stack
from harness import summarize
from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from memory_chain.chat.models import ModelInfo
from memory_chain.integrations.middleware import MemoryMiddleware

clock = time.perf_counter_ns

#: A timed operation of part 1: runs one request, returns its latency in ns.
Measure = Callable[[Request], int]


class FakeAgentModel(GenericFakeChatModel):
    """The chain's fake model for ``create_agent``, which binds the agent's tools to it.

    The agents have no tools (``create_agent`` then binds none); ``bind_tools`` returns the
    model itself, so a tool list would not change what is measured.
    """

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FakeAgentModel:
        return self


def agent_model() -> FakeAgentModel:
    return FakeAgentModel(messages=itertools.repeat(AIMessage(REPLY)))


@dataclass(frozen=True)
class Agents:
    """The agent with memory and its baseline, the same agent without the middleware."""

    with_memory: Any
    bare: Any

    @classmethod
    def build(cls, stack: Stack, model: ModelInfo) -> Agents:
        """Both agents; the middleware budgets for ``model``'s window with its counter.

        The fake model is no model the LLM server knows, so the middleware is told the
        chain's window and token counter: both paths then build the same budgeted prompt.
        """
        middleware = MemoryMiddleware(stack.services, window=model.window, counter=model.counter)
        return cls(
            with_memory=create_agent(agent_model(), middleware=[middleware]),
            bare=create_agent(agent_model()),
        )

    def warm_up(self, requests: Sequence[Request]) -> None:
        """Run both agents once per request (graph compilation, first-call imports)."""
        for request in requests:
            self.with_memory.invoke(agent_input(request), agent_config(request))
            self.bare.invoke(agent_input(request), agent_config(request))

    def measures(self) -> tuple[tuple[str, Measure], ...]:
        """Part 1's measurements of the agents, by sample name."""

        def agent(request: Request) -> int:
            t0 = clock()
            self.with_memory.invoke(agent_input(request), agent_config(request))
            return clock() - t0

        def agent_bare(request: Request) -> int:
            t0 = clock()
            self.bare.invoke(agent_input(request), agent_config(request))
            return clock() - t0

        return (("agent", agent), ("agent_bare", agent_bare))


def agent_input(request: Request) -> dict[str, Any]:
    return {"messages": [("user", request.question)]}


def agent_config(request: Request) -> RunnableConfig:
    """LangGraph's convention: the conversation is the thread."""
    c = request.conversation
    return {"configurable": {"thread_id": c.conversation_id, "user_id": c.user_id}}


def middleware_figures(
    samples_ns: dict[str, list[int]], chain_memory: dict[str, Any]
) -> dict[str, Any]:
    """The agents' latencies, memory's cost through the middleware (paired) and its ratio
    to memory's cost through the chain (``chain_memory``, from the same requests)."""
    agent_ns = np.asarray(samples_ns["agent"]) - np.asarray(samples_ns["agent_bare"])
    middleware = summarize([int(v) for v in agent_ns])
    return {
        "agent_ms": summarize(samples_ns["agent"]),
        "agent_no_middleware_ms": summarize(samples_ns["agent_bare"]),
        "middleware_memory_overhead_ms": middleware,
        "middleware_over_chain_p50": middleware["p50"] / chain_memory["p50"],
        "middleware_over_chain_p95": middleware["p95"] / chain_memory["p95"],
    }
