"""Memory for LangChain 1.x agents: an ``AgentMiddleware`` for ``create_agent``.

LangChain's agents keep a thread's messages in LangGraph's checkpointer; memory_chain adds
what the thread does not hold: the user's remembered facts, the conversation's running
summary and what the user said in other conversations, within the model's window.

* **Before each model call** (``wrap_model_call``): memory is searched for the run's last
  user message (once per run: the model calls of a tool loop reuse the search, as memory
  does not change until the run's exchange is stored), and its sections are added to the
  system message, budgeted like the chat's prompt within the room the request leaves in
  the model's window (:mod:`memory_chain.integrations.middleware_window`: the thread's
  messages with their tool calls and tool results, images, and the tools' schemas are
  counted; a request with a part that cannot be counted, such as audio, gets no memory).
  Memory's recent turns of the conversation are left out when the thread already has
  earlier messages (the checkpointer keeps them); a thread that starts empty (no
  checkpointer, or a new process) gets them as messages before its own.
* **After the run** (``after_agent``): the exchange is stored, the user's last message and
  the agent's final answer. The tool calls and tool results in between are the agent's
  working steps, not conversation: they are not stored (the final answer says what came of
  them). A run that ends without an answer (interrupted, or a tool call pending) stores
  nothing; the exchange is stored by the run that answers.

The conversation is the run's ``configurable.conversation_id``, else LangGraph's
``configurable.thread_id``; the user is ``configurable.user_id``, else the runtime
context's ``user_id`` (a dict key or an attribute), else the settings' default user.
Blocking work (SQL, the embedding model) runs in a worker thread in the async hooks.

Example:
    >>> from langchain.agents import create_agent
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> agent = create_agent(model, middleware=[MemoryMiddleware(services)],
    ...                      checkpointer=InMemorySaver())  # doctest: +SKIP
    >>> agent.invoke({"messages": [("user", "Which seat do I have?")]},
    ...              {"configurable": {"thread_id": "trip", "user_id": "ana"}})  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langgraph.config import get_config
from langgraph.runtime import Runtime

from memory_chain.chat.sent import IMAGE_TOKENS
from memory_chain.errors import ContextOverflowError, InvalidInputError, MemoryChainError
from memory_chain.identity import user_named
from memory_chain.integrations.middleware_window import (
    FALLBACK_WINDOW,
    memory_prompt,
    output_tools,
    request_model,
)
from memory_chain.messages import message_text
from memory_chain.schemas import MemoryContext, validate_id
from memory_chain.services import Services
from memory_chain.tokens import TokenCount

logger = logging.getLogger(__name__)

#: Runs whose memory search is kept for their next model calls (the oldest is dropped
#: beyond this: a run that never ended, e.g. interrupted, does not keep its search forever).
MAX_RECALLED_RUNS = 256


@dataclass(frozen=True, slots=True)
class RunIds:
    """Whose run this is.

    Attributes:
        conversation_id: The conversation (the thread).
        user_id: Its owner.
    """

    conversation_id: str
    user_id: str


def run_ids(runtime: Runtime[Any] | None, default_user: str) -> RunIds:
    """The run's conversation and user (see the module docstring).

    The user is decided as at every in-process door (:func:`~memory_chain.identity.user_named`,
    the branch of :func:`~memory_chain.identity.identify` such doors take): the middleware
    runs in the process that holds the stores, so no key is asked.

    Raises:
        InvalidInputError: If the run names no conversation, or an id is malformed (a user
            id that is not a string included).
    """
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a runnable context
        configurable = {}
    conversation = configurable.get("conversation_id") or configurable.get("thread_id")
    info = getattr(runtime, "execution_info", None)
    if not conversation and info is not None:
        conversation = info.thread_id
    if not conversation:
        raise InvalidInputError(
            "MemoryMiddleware needs a conversation: invoke the agent with "
            "config={'configurable': {'thread_id': ...}} (or 'conversation_id')"
        )
    context = getattr(runtime, "context", None)
    user = configurable.get("user_id")
    if not user and isinstance(context, dict):
        user = context.get("user_id")
    if not user and context is not None:
        user = getattr(context, "user_id", None)
    conversation = str(conversation)
    validate_id(conversation)
    return RunIds(conversation, user_named(user or None, default_user))


class MemoryMiddleware(AgentMiddleware):
    """memory_chain's memory for ``create_agent`` (see the module docstring).

    Args:
        services: The opened services (:func:`~memory_chain.services.open_services`).
        window: The model's context window; by default the one the services' LLM server
            reports for the model's name, else
            :data:`~memory_chain.integrations.middleware_window.FALLBACK_WINDOW`.
        reply_tokens: Room kept for the reply when the model sets no ``max_tokens``/
            ``num_predict`` (at most a quarter of the window).
        store: Store each run's exchange (``False``: read memory only).
        counter: Counts tokens for a model the services cannot resolve (default: an
            estimate from the text's length).
        image_tokens: Tokens an image part of a message is counted as
            (:data:`~memory_chain.chat.sent.IMAGE_TOKENS` by default; more for a vision
            model that spends more on an image).
    """

    def __init__(
        self,
        services: Services,
        *,
        window: int | None = None,
        reply_tokens: int | None = None,
        store: bool = True,
        counter: TokenCount | None = None,
        image_tokens: int = IMAGE_TOKENS,
    ) -> None:
        super().__init__()
        self.services = services
        self.manager = services.manager
        self.window = window
        self.reply_tokens = reply_tokens or services.settings.llm_max_tokens
        self.store = store
        self.default_user = services.settings.default_user_id
        self.counter = counter
        self.image_tokens = image_tokens
        # What each running run found, by (conversation, user, query): its tool loop's
        # model calls reuse it. Runs of one middleware may run in several threads.
        self._recalled: OrderedDict[tuple[str, str, str], MemoryContext] = OrderedDict()
        self._lock = threading.Lock()

    # -- a run's memory search -------------------------------------------------------------

    def before_agent(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """A new run: memory is searched afresh (another run may have stored since)."""
        self._forget_run(run_ids(runtime, self.default_user))
        return None

    async def abefore_agent(
        self, state: AgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`before_agent` (no I/O)."""
        return self.before_agent(state, runtime)

    def _forget_run(self, ids: RunIds) -> None:
        with self._lock:
            for key in [k for k in self._recalled if k[:2] == (ids.conversation_id, ids.user_id)]:
                del self._recalled[key]

    def _retrieve(self, ids: RunIds, query: str) -> MemoryContext:
        """Memory for the run's message: searched at the run's first model call, then kept."""
        key = (ids.conversation_id, ids.user_id, query)
        with self._lock:
            found = self._recalled.get(key)
        if found is not None:
            return found
        found = self.manager.retrieve(ids.conversation_id, ids.user_id, query)
        with self._lock:
            self._recalled[key] = found
            while len(self._recalled) > MAX_RECALLED_RUNS:
                self._recalled.popitem(last=False)
        return found

    # -- before the model ----------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """Call the model with memory's context added to the request."""
        ids = run_ids(request.runtime, self.default_user)
        return handler(self.with_memory(request, ids))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """Async :meth:`wrap_model_call` (memory is read in a worker thread)."""
        ids = run_ids(request.runtime, self.default_user)
        request = await asyncio.to_thread(self.with_memory, request, ids)
        return await handler(request)

    def with_memory(self, request: ModelRequest, ids: RunIds) -> ModelRequest:
        """The request with memory's sections in its system message (blocking).

        Unchanged when the run has no user message, or when the thread alone leaves no room
        in the window. A memory tier that fails is skipped (as in the chat).
        """
        messages = list(request.messages)
        last = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
            None,
        )
        if last is None:
            return request
        query = message_text(messages[last])
        model = request_model(
            request, self.services.models, window=self.window, counter=self.counter
        )
        thread = [m for i, m in enumerate(messages) if i != last]
        earlier = any(isinstance(m, HumanMessage) for m in messages[:last])
        try:
            context = self._retrieve(ids, query)
            if earlier:  # the thread holds the conversation's recent turns itself
                context = replace(context, recent=())
            built = memory_prompt(
                request,
                model,
                thread,
                messages[last],
                context,
                reply_tokens=self.reply_tokens,
                image_tokens=self.image_tokens,
            )
        except ContextOverflowError:
            built = None
        except MemoryChainError as exc:
            logger.warning("conversation %s: memory not added: %s", ids.conversation_id, exc)
            return request
        if built is None:
            logger.warning(
                "conversation %s: the thread fills %s's window; no memory added",
                ids.conversation_id,
                model.name,
            )
            return request
        system, *recent = built.messages[:-1]
        thread_messages = cast("list[AnyMessage]", [*recent, *messages])
        return request.override(
            system_message=SystemMessage(message_text(system)), messages=thread_messages
        )

    # -- after the run -------------------------------------------------------------------

    def after_agent(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the run's exchange: the user's last message and the final answer."""
        ids = run_ids(runtime, self.default_user)
        self._forget_run(ids)
        if self.store:
            self.remember(state["messages"], ids)
        return None

    async def aafter_agent(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async :meth:`after_agent` (stored in a worker thread)."""
        ids = run_ids(runtime, self.default_user)
        self._forget_run(ids)
        if self.store:
            await asyncio.to_thread(self.remember, state["messages"], ids)
        return None

    def remember(self, messages: Sequence[BaseMessage], ids: RunIds) -> bool:
        """Store the last user message and the answer after it (blocking).

        Returns:
            Whether an exchange was stored (not when the run has no final answer, or when
            the conversation already ends with this exchange).
        """
        exchange = final_exchange(messages)
        if exchange is None:
            return False
        question, answer = exchange
        recent, _ = self.manager.working_memory(ids.conversation_id, ids.user_id)
        said = [(turn.role, turn.content) for turn in recent[-2:]]
        if said == [("user", question), ("assistant", answer)]:
            return False  # this run's exchange is stored already
        self.manager.add_turns(
            ids.conversation_id, ids.user_id, [HumanMessage(question), AIMessage(answer)]
        )
        return True


def final_exchange(messages: Sequence[BaseMessage]) -> tuple[str, str] | None:
    """The last user message and the final answer after it, if the run ended with one.

    The final answer is the last AI message, when it asks for no tool call and has text.
    """
    if not messages:
        return None
    answer = messages[-1]
    if not isinstance(answer, AIMessage) or answer.tool_calls or not message_text(answer).strip():
        return None
    for message in reversed(messages[:-1]):
        if isinstance(message, HumanMessage):
            question = message_text(message)
            return (question, message_text(answer)) if question.strip() else None
    return None


__all__ = [
    "FALLBACK_WINDOW",
    "MAX_RECALLED_RUNS",
    "MemoryMiddleware",
    "RunIds",
    "final_exchange",
    "output_tools",
    "run_ids",
]
