"""The chat chain: memory in, the model's reply out, both turns stored.

An LCEL runnable: ``prepare`` (resolve the conversation, retrieve memory, build the prompt)
``| respond`` (store the user turn, stream the chat model, then store the reply with the token
counts the model reported; storing triggers consolidation, which runs in the background).
The user turn is stored before the model runs, so a model that fails or a client that leaves
mid-stream loses nothing that was said; the same message sent again answers that stored turn
instead of storing it twice.
It supports ``invoke``, ``stream``, ``batch`` and their async twins, and
``astream_events`` shows the chat model's tokens.

The conversation and user come from the config::

    chain.invoke({"input": "Where do we fly?"},
                 {"configurable": {"conversation_id": "trip", "user_id": "ana"}})
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import RunnableBinding
from langchain_core.runnables.config import (
    ensure_config,
    get_async_callback_manager_for_config,
    run_in_executor,
)
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from pydantic import BaseModel, Field, PrivateAttr

from memory_chain.config import DEFAULT_USER_ID
from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.manager import MemoryManager
from memory_chain.messages import message_text, to_message
from memory_chain.schemas import MemoryContext, MemoryItem, NewTurn, TokenUsage, validate_id
from memory_chain.tokens import TokenCounter

DEFAULT_SYSTEM_MESSAGE = (
    "You are a helpful assistant with a long-term memory of your conversations with this "
    "user. Use what you remember when it helps; say so when you do not know."
)


class LLMUnavailableError(MemoryChainError):
    """The chat model could not be reached or failed."""


class ChatInput(BaseModel):
    """Input of the chat chain."""

    input: str = Field(description="The user's message.")


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def _describe(item: MemoryItem) -> str:
    if item.kind == "summary" and item.turn_range:
        where = f"summary of turns {item.turn_range[0]}-{item.turn_range[1]}"
    elif item.kind == "fact":
        where = "something the user asked you to remember"
    else:
        where = f"{item.role or 'turn'} #{item.turn_number}"
    return (
        f"- ({_when(item.timestamp)}, conversation {item.conversation_id}, {where}) {item.content}"
    )


def build_prompt_with_memory(
    system_message: str, memory_context: MemoryContext, user_message: str
) -> list[BaseMessage]:
    """The prompt: system message with what memory knows, recent turns, the message.

    Args:
        system_message: The assistant's instructions.
        memory_context: From :meth:`MemoryManager.retrieve`.
        user_message: The new message.

    Returns:
        Messages for the chat model.
    """
    parts = [system_message]
    if memory_context.summary:
        parts.append(f"Summary of this conversation so far:\n{memory_context.summary}")
    if memory_context.items:
        lines = "\n".join(_describe(item) for item in memory_context.items)
        parts.append(f"Relevant memories (most relevant first):\n{lines}")
    messages: list[BaseMessage] = [SystemMessage("\n\n".join(parts))]
    messages.extend(to_message(turn) for turn in memory_context.recent)
    messages.append(HumanMessage(user_message))
    return messages


def _identity(config: RunnableConfig | None, default_user: str) -> tuple[str, str]:
    configurable = (config or {}).get("configurable", {})
    conversation_id = configurable.get("conversation_id") or configurable.get("session_id")
    if not conversation_id:
        raise InvalidInputError(
            "no conversation id: pass config={'configurable': {'conversation_id': '...'}}"
        )
    user_id = configurable.get("user_id") or default_user
    return validate_id(conversation_id), validate_id(user_id, "user id")


def user_text(inputs: Any) -> str:
    """The user's message from the chain's input, checked (empty or invalid text is refused)."""
    if isinstance(inputs, str):
        text = inputs
    elif isinstance(inputs, ChatInput):
        text = inputs.input
    elif isinstance(inputs, dict) and isinstance(inputs.get("input"), str):
        text = inputs["input"]
    else:
        raise InvalidInputError('the chat chain takes {"input": "<the user message>"}')
    if not text.strip():
        raise InvalidInputError("the message is empty: send some text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError("the message is not valid Unicode text: send UTF-8") from exc
    return text


def _user_turn(text: str, counter: TokenCounter) -> NewTurn:
    """The user's message as a turn, its text counted."""
    return NewTurn("user", text, tokens=TokenUsage(total=counter.count(text)))


def _reply_turn(reply: AIMessageChunk | AIMessage, counter: TokenCounter) -> NewTurn:
    """The reply as a turn, with the model's token counts where it reported them."""
    text = message_text(reply) or "(no reply)"
    usage = reply.usage_metadata
    if usage:
        tokens = TokenUsage(
            total=int(usage.get("total_tokens", 0)),
            prompt=int(usage.get("input_tokens", 0)),
            completion=int(usage.get("output_tokens", 0)),
        )
    else:
        tokens = TokenUsage(total=counter.count(text))
    return NewTurn("assistant", text, tokens=tokens)


def _same_text(a: str, b: str) -> bool:
    return a.split() == b.split()


def _unanswered(context: MemoryContext, text: str) -> bool:
    """Whether ``text`` is already stored as the conversation's last, unanswered turn.

    The user turn is stored before the model is called, so a request whose model call failed
    (a timeout, a 503, a client gone mid-stream) leaves it stored without a reply. The same
    message sent again is that turn retried: it is answered, not stored a second time.
    """
    last = context.recent[-1] if context.recent else None
    return last is not None and last.role == "user" and _same_text(last.content, text)


def _prepared(
    ids: tuple[str, str], system_message: str, context: MemoryContext, text: str
) -> dict[str, Any]:
    stored = _unanswered(context, text)
    if stored:  # the message is the prompt's last line, not one of the recent turns too
        context = replace(context, recent=context.recent[:-1])
    messages = build_prompt_with_memory(system_message, context, text)
    return {"ids": ids, "text": text, "messages": messages, "stored": stored}


def build_chat_chain(
    manager: MemoryManager,
    llm: BaseChatModel,
    *,
    system_message: str = DEFAULT_SYSTEM_MESSAGE,
    default_user_id: str = DEFAULT_USER_ID,
) -> Runnable[Any, AIMessageChunk]:
    """The chat runnable.

    Args:
        manager: The memory manager (storage, retrieval, consolidation triggers).
        llm: The chat model (``ChatOllama``, or a fake one in tests).
        system_message: The assistant's instructions.
        default_user_id: User when the config names none.

    Returns:
        A runnable taking ``{"input": str}`` (or a string) and the conversation in
        ``configurable``, returning the reply as an ``AIMessageChunk``.
    """

    # Retrieval is blocking work (SQL, embedding, the vector engine): async callers run this
    # step in a worker thread, as RunnableLambda does for a function without an async twin.
    def prepare(inputs: Any, config: RunnableConfig) -> dict[str, Any]:
        ids = _identity(config, default_user_id)
        text = user_text(inputs)
        context = manager.retrieve(*ids, text)
        return _prepared(ids, system_message, context, text)

    # The exchange's turns are embedded together once the reply is stored (or the call
    # failed): a tier-3 worker woken by the user's message would embed it while the reply is
    # produced and stored, competing with them for the CPU and the GIL (measured: about 30 % of
    # memory's cost of a chat turn at p50, benchmarks/README.md).
    def remember(prepared: dict[str, Any], turn: NewTurn) -> None:
        conversation_id, user_id = prepared["ids"]
        manager.add_turns(conversation_id, user_id, [turn], index_now=False)

    def respond(prepared: dict[str, Any], config: RunnableConfig) -> Iterator[AIMessageChunk]:
        if not prepared["stored"]:
            # Durably, before the model runs: a failed or abandoned call keeps the message.
            remember(prepared, _user_turn(prepared["text"], manager.counter))
        try:
            reply: AIMessageChunk | None = None
            with _model_errors():
                for chunk in llm.stream(prepared["messages"], config):
                    reply = chunk if reply is None else reply + chunk
                    yield chunk
            if reply is not None:
                remember(prepared, _reply_turn(reply, manager.counter))
        finally:
            manager.index_queued()

    # The one async twin, for real async I/O: the reply streams over the chat model's async
    # HTTP client on the event loop; storing (blocking SQL) runs in a worker thread.
    async def arespond(
        prepared: dict[str, Any], config: RunnableConfig
    ) -> AsyncIterator[AIMessageChunk]:
        if not prepared["stored"]:
            turn = _user_turn(prepared["text"], manager.counter)
            await run_in_executor(None, remember, prepared, turn)
        try:
            reply: AIMessageChunk | None = None
            with _model_errors():
                async for chunk in llm.astream(prepared["messages"], config):
                    reply = chunk if reply is None else reply + chunk
                    yield chunk
            if reply is not None:
                reply_turn = _reply_turn(reply, manager.counter)
                await run_in_executor(None, remember, prepared, reply_turn)
        finally:
            manager.index_queued()

    # RunnableLambda streams generator functions and aggregates their chunks on invoke; its
    # type hints do not describe that, hence the casts.
    respond_step = RunnableLambda(respond, afunc=arespond, name="respond_and_remember")  # type: ignore[arg-type]
    chain = RunnableLambda(prepare, name="retrieve_memory") | respond_step
    typed = chain.with_types(input_type=ChatInput, output_type=AIMessageChunk)  # type: ignore[arg-type]
    chat = MemoryChat(bound=typed.with_config(run_name="memory_chat"), kwargs={}, config={})
    chat.set_steps(prepare, arespond)
    return chat


#: The configurable fields the chat chain reads (declared so that LangServe accepts them and
#: its playground shows them).
MEMORY_CONFIG_SPECS = (
    ConfigurableFieldSpec(
        id="conversation_id",
        annotation=str,
        name="Conversation ID",
        description="Which conversation this message belongs to.",
        default="",
        is_shared=True,
    ),
    ConfigurableFieldSpec(
        id="user_id",
        annotation=str,
        name="User ID",
        description="Who is talking (the server sets it from the API key when auth is on).",
        default="",
        is_shared=True,
    ),
)


#: Config keys of the outer run only, which LCEL does not pass on to the steps.
_RUN_KEYS = ("run_name", "run_id")
_Prepare = Callable[[Any, RunnableConfig], dict[str, Any]]
_Respond = Callable[[dict[str, Any], RunnableConfig], AsyncIterator[AIMessageChunk]]


class MemoryChat(RunnableBinding[Any, AIMessageChunk]):  # type: ignore[no-redef]
    """The chat chain, declaring the ``conversation_id`` and ``user_id`` it reads.

    ``astream`` (what the OpenAI-compatible route and LangServe's ``/stream`` call) runs the
    chain's two steps directly when no callback handler would see the run (no callbacks in
    the config, no tracing, no debug): the LCEL sequence's run managers, tasks and signature
    checks cost the event loop about a millisecond per request that nobody observes. With a
    handler (``astream_events``, LangSmith tracing, ...) it runs the LCEL chain as usual.
    """

    _steps: tuple[_Prepare, _Respond] | None = PrivateAttr(default=None)

    def set_steps(self, prepare: _Prepare, respond: _Respond) -> None:
        """The functions of the chain's two steps (retrieval, the async reply), for ``astream``."""
        self._steps = (prepare, respond)

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The bound chain's specs plus the conversation and user."""
        return get_unique_config_specs([*super().config_specs, *MEMORY_CONFIG_SPECS])

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> AsyncIterator[AIMessageChunk]:
        """Stream the reply (see the class docstring)."""
        merged = ensure_config(self._merge_configs(config))
        # RunnableBinding's __getattr__ hides pydantic's lookup of private attributes.
        steps = (self.__pydantic_private__ or {}).get("_steps")
        if steps is None or kwargs or get_async_callback_manager_for_config(merged).handlers:
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk
            return
        # What LCEL passes to a step: the config without the outer run's name and id.
        inner = cast(RunnableConfig, {k: v for k, v in merged.items() if k not in _RUN_KEYS})
        prepare, respond = steps
        # One worker-thread hop for retrieval, as the LCEL step takes.
        prepared = await run_in_executor(inner, prepare, input, inner)
        async for chunk in respond(prepared, inner):
            yield chunk


@contextmanager
def _model_errors() -> Iterator[None]:
    """Turn the chat model's failures into :class:`LLMUnavailableError` (ours pass through)."""
    try:
        yield
    except MemoryChainError:
        raise
    except Exception as exc:
        raise LLMUnavailableError(_llm_failure(exc)) from exc


def _llm_failure(exc: Exception) -> str:
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return (
            f"the chat model did not answer within llm_timeout_seconds ({type(exc).__name__}: "
            f"{exc}): the model is overloaded or too slow for this machine; raise "
            "MEMORY_CHAIN_LLM_TIMEOUT_SECONDS, use a smaller model, or check that Ollama at the "
            "configured ollama_base_url is not stuck"
        )
    return (
        f"the chat model failed ({type(exc).__name__}: {exc}): check that Ollama runs at the "
        "configured ollama_base_url and has the model pulled (`ollama pull <model>`)"
    )
