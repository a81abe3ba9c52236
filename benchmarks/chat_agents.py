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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chat_stack import REPLY, Request, Stack
from harness import Timings, summarize
from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from memory_chain.chat.models import ModelInfo
from memory_chain.integrations.middleware import MemoryMiddleware

#: An operation of part 1, timed by :func:`harness.alternate`: runs one request.
Measure = Callable[[Request], object]


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

        def agent(request: Request) -> object:
            return self.with_memory.invoke(agent_input(request), agent_config(request))

        def agent_bare(request: Request) -> object:
            return self.bare.invoke(agent_input(request), agent_config(request))

        return (("agent", agent), ("agent_bare", agent_bare))


def agent_input(request: Request) -> dict[str, Any]:
    return {"messages": [("user", request.question)]}


def agent_config(request: Request) -> RunnableConfig:
    """LangGraph's convention: the conversation is the thread."""
    c = request.conversation
    return {"configurable": {"thread_id": c.conversation_id, "user_id": c.user_id}}


def middleware_figures(timings: Timings, chain_memory: dict[str, Any]) -> dict[str, Any]:
    """The agents' latencies, memory's cost through the middleware (paired) and its ratio
    to memory's cost through the chain (``chain_memory``, from the same requests)."""
    middleware = summarize(timings.differences("agent", "agent_bare"))
    return {
        "agent_ms": timings.summary("agent"),
        "agent_no_middleware_ms": timings.summary("agent_bare"),
        "middleware_memory_overhead_ms": middleware,
        "middleware_over_chain_p50": middleware["p50"] / chain_memory["p50"],
        "middleware_over_chain_p95": middleware["p95"] / chain_memory["p95"],
    }
