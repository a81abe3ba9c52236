"""The chat chain: memory in, the model's reply out, both turns stored (LCEL).

Two steps over :class:`~memory_chain.chat.core.ChatCore`: ``prepare`` (the request checked,
memory retrieved, the prompt built within the model's window) ``| respond`` (the user turn
stored, the model's reply streamed, then stored with the token counts the model reported;
storing triggers consolidation, which runs in the background). The same message sent again
after a failed call answers the stored turn instead of storing it twice.
It supports ``invoke``, ``stream``, ``batch`` and their async twins, and ``astream_events``
shows the chat model's tokens.

The input is the user's message and, optionally, instructions of the client's own (a system
prompt); the conversation, the user, the model and the reply's options come from the config::

    chain.invoke(
        {"input": "Where do we fly?", "system": "Answer in one sentence."},
        {"configurable": {"conversation_id": "trip", "user_id": "ana",
                          "model": "llama3.2", "temperature": 0.3, "max_tokens": 128}},
    )
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.messages import AIMessageChunk
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import RunnableBinding
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from pydantic import BaseModel, Field

from memory_chain.chat.core import ChatCore, PreparedTurn
from memory_chain.chat.lines import DEFAULT_PERSONA, MEMORY_NOTE
from memory_chain.chat.request import ChatRequest, ReplyOptions
from memory_chain.config import DEFAULT_USER_ID
from memory_chain.errors import InvalidInputError, LLMUnavailableError
from memory_chain.storable import check_text

#: What the assistant is told when the client gives no instructions (persona and memory's note).
DEFAULT_SYSTEM_MESSAGE = f"{DEFAULT_PERSONA} {MEMORY_NOTE}"

__all__ = [
    "DEFAULT_SYSTEM_MESSAGE",
    "MEMORY_CONFIG_SPECS",
    "ChatInput",
    "LLMUnavailableError",
    "MemoryChat",
    "build_chat_chain",
    "chat_request",
    "reply_options",
    "user_text",
]


class ChatInput(BaseModel):
    """Input of the chat chain."""

    input: str = Field(description="The user's message.")
    system: str = Field(
        default="",
        description="Instructions for the assistant (a system prompt), put before memory's.",
    )


def user_text(inputs: Any) -> str:
    """The user's message from the chain's input (empty or invalid text is refused)."""
    return _fields(inputs)[0]


def _fields(inputs: Any) -> tuple[str, str]:
    """The message and the system prompt of the chain's input."""
    system: Any = ""
    if isinstance(inputs, str):
        text = inputs
    elif isinstance(inputs, ChatInput):
        text, system = inputs.input, inputs.system or ""
    elif isinstance(inputs, dict) and isinstance(inputs.get("input"), str):
        text, system = inputs["input"], inputs.get("system") or ""
    else:
        raise InvalidInputError(
            'the chat chain takes {"input": "<the user message>", "system": "<optional>"}'
        )
    if not isinstance(system, str):
        raise InvalidInputError("system must be a string (the assistant's instructions)")
    if not text.strip():
        raise InvalidInputError("the message is empty: send some text")
    return check_text(text, "the message"), check_text(system, "the system prompt")


#: The values that leave an option to the server (the specs' defaults; see below).
_UNSET: dict[str, float] = {"temperature": -1.0, "top_p": 0.0, "max_tokens": 0, "seed": -1}


def _number(configurable: dict[str, Any], key: str, kind: type) -> Any:
    value = configurable.get(key)
    if value is None or value == "" or value == _UNSET[key]:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"configurable.{key} must be a number, got {value!r}")
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise InvalidInputError(f"configurable.{key} must be a whole number, got {value!r}")
    return kind(value)


def reply_options(configurable: dict[str, Any]) -> ReplyOptions:
    """The reply's options from a config's ``configurable`` (the specs' defaults: unset).

    Raises:
        InvalidInputError: An option of the wrong type or out of its range (a ``seed`` past
            :data:`~memory_chain.chat.request.MAX_SEED`).
    """
    stop = configurable.get("stop")
    if stop is not None and not isinstance(stop, str | list | tuple):
        raise InvalidInputError("configurable.stop must be a string or a list of strings")
    return ReplyOptions.of(
        temperature=_number(configurable, "temperature", float),
        top_p=_number(configurable, "top_p", float),
        max_tokens=_number(configurable, "max_tokens", int),
        stop=stop or None,
        seed=_number(configurable, "seed", int),
    )


def chat_request(
    inputs: Any, config: RunnableConfig | None, default_user: str = DEFAULT_USER_ID
) -> ChatRequest:
    """The :class:`ChatRequest` of the chain's input and config.

    Raises:
        InvalidInputError: No conversation, a malformed id, message or option.
    """
    configurable = (config or {}).get("configurable", {})
    conversation_id = configurable.get("conversation_id") or configurable.get("session_id")
    if not conversation_id:
        raise InvalidInputError(
            "no conversation id: pass config={'configurable': {'conversation_id': '...'}}"
        )
    text, system = _fields(inputs)
    options = reply_options(configurable)
    model = configurable.get("model") or None
    return ChatRequest.checked(
        conversation_id=conversation_id,
        user_id=configurable.get("user_id") or default_user,
        message=text,
        system=system,
        model=model if isinstance(model, str) or model is None else str(model),
        options=options,
    )


def build_chat_chain(
    core: ChatCore, *, default_user_id: str = DEFAULT_USER_ID
) -> Runnable[Any, AIMessageChunk]:
    """The chat runnable.

    Args:
        core: Answers chat requests with memory.
        default_user_id: User when the config names none.

    Returns:
        A runnable taking ``{"input": str, "system": str}`` (or a string), the conversation,
        user, model and reply options in ``configurable``, returning the reply as an
        ``AIMessageChunk``.
    """

    # Retrieval is blocking work (SQL, embedding, the vector engine): async callers run this
    # step in a worker thread, as RunnableLambda does for a function without an async twin.
    def prepare(inputs: Any, config: RunnableConfig) -> PreparedTurn:
        return core.prepare(chat_request(inputs, config, default_user_id))

    def respond(turn: PreparedTurn, config: RunnableConfig) -> Iterator[AIMessageChunk]:
        yield from core.stream(turn, config)

    # The one async twin, for real async I/O: the reply streams over the chat model's async
    # HTTP client on the event loop; storing (blocking SQL) runs in a worker thread.
    async def arespond(turn: PreparedTurn, config: RunnableConfig) -> AsyncIterator[AIMessageChunk]:
        async for chunk in core.astream(turn, config):
            yield chunk

    # RunnableLambda streams generator functions and aggregates their chunks on invoke; its
    # type hints do not describe that, hence the ignores.
    respond_step = RunnableLambda(respond, afunc=arespond, name="respond_and_remember")  # type: ignore[arg-type]
    chain = RunnableLambda(prepare, name="retrieve_memory") | respond_step
    typed = chain.with_types(input_type=ChatInput, output_type=AIMessageChunk)  # type: ignore[arg-type]
    return MemoryChat(bound=typed.with_config(run_name="memory_chat"), kwargs={}, config={})


def _spec(
    id: str, annotation: Any, default: Any, name: str, description: str
) -> ConfigurableFieldSpec:
    # Plain types (not ``X | None``): LangServe's playground cannot draw a "null" branch.
    return ConfigurableFieldSpec(
        id=id, annotation=annotation, name=name, description=description, default=default,
        is_shared=True,
    )  # fmt: skip


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
    _spec("model", str, "", "Model", "The model to answer with (empty: the configured one)."),
    _spec("temperature", float, -1.0, "Temperature", "0 to 2 (-1: the server's setting)."),
    _spec("top_p", float, 0.0, "Top p", "Nucleus sampling, (0, 1] (0: the model's default)."),
    _spec("max_tokens", int, 0, "Max tokens", "Longest reply (0: the server's setting)."),
    _spec("stop", list[str], [], "Stop", "Up to four strings that end the reply."),
    _spec("seed", int, -1, "Seed", "Sampler seed, for replies that repeat (-1: a new one)."),
)


class MemoryChat(RunnableBinding[Any, AIMessageChunk]):  # type: ignore[no-redef]
    """The chat chain, declaring the configurable fields it reads.

    The conversation, the user, the model and the reply's options.
    """

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The bound chain's specs plus the conversation, user, model and options."""
        return get_unique_config_specs([*super().config_specs, *MEMORY_CONFIG_SPECS])
