"""Memory within an agent's model call: the room its request leaves in the model's window.

:class:`~memory_chain.integrations.middleware.MemoryMiddleware` adds memory's sections to
the system message of each model call, budgeted like the chat's prompt
(:mod:`memory_chain.chat.budget`): the window is the model's (the one the services' LLM
server reports for its name, the ``window=`` given, else :data:`FALLBACK_WINDOW`), less the
reply's room and what else the model is sent, counted as it receives it
(:mod:`memory_chain.chat.sent`): the thread's messages with their tool calls and tool results,
images, and the tools' schemas with those a structured output adds (:func:`output_tools`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain.agents.structured_output import (
    AutoStrategy,
    OutputToolBinding,
    ProviderStrategy,
    ToolStrategy,
)
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool

from memory_chain.chat.budget import Budget, BuiltPrompt, build_prompt
from memory_chain.chat.lines import DEFAULT_PERSONA
from memory_chain.chat.models import ModelInfo, ModelSource
from memory_chain.chat.sent import extra_tokens, message_tokens, tool_tokens
from memory_chain.errors import MemoryChainError
from memory_chain.messages import message_text
from memory_chain.schemas import MemoryContext
from memory_chain.tokens import EstimatingCounter, TokenCount

#: The window assumed for a model the services cannot resolve (not served by the LLM
#: server memory_chain talks to); pass ``window=`` to say what it is.
FALLBACK_WINDOW = 8192


def request_model(
    request: ModelRequest,
    models: ModelSource | None,
    *,
    window: int | None,
    counter: TokenCount | None,
) -> ModelInfo:
    """The model a request calls: its name, window and token counter.

    Args:
        request: The agent's model call.
        models: The services' LLM server, which knows the windows of the models it serves.
        window: The window to use whatever the model (``None``: the server's, else
            :data:`FALLBACK_WINDOW`).
        counter: Counts tokens for a model the server does not serve (``None``: an
            estimate from the text's length).
    """
    name = getattr(request.model, "model", None) or getattr(request.model, "model_name", None)
    if models is not None and isinstance(name, str):
        try:
            info = models.resolve(name)
            return replace(info, window=window) if window else info
        except MemoryChainError:
            pass  # not the LLM server's model: the fallback below
    return ModelInfo(
        name=str(name or "the model"),
        window=window or FALLBACK_WINDOW,
        counter=counter or EstimatingCounter(),
        window_source="setting" if window else "default",
    )


def sent_besides_memory(
    request: ModelRequest,
    thread: Sequence[BaseMessage],
    question: BaseMessage,
    model: ModelInfo,
    *,
    image_tokens: int,
) -> int:
    """Tokens the model is sent besides what :func:`build_prompt` counts.

    That is the system message and the question's text; the rest is the thread's
    messages, the question's other parts (images), and the tools' schemas with the
    structured output's (counted by :mod:`memory_chain.chat.sent`).

    Raises:
        InvalidInputError: A content part that cannot be counted (audio, a file).
    """
    counter = model.counter
    used = sum(message_tokens(thread, counter, image_tokens=image_tokens))
    used += extra_tokens(question, counter, image_tokens=image_tokens)
    return used + tool_tokens([*request.tools, *output_tools(request.response_format)], counter)


def memory_prompt(
    request: ModelRequest,
    model: ModelInfo,
    thread: Sequence[BaseMessage],
    question: BaseMessage,
    context: MemoryContext,
    *,
    reply_tokens: int,
    image_tokens: int,
) -> BuiltPrompt | None:
    """The request's system message with memory's sections, within the room the call leaves.

    Args:
        request: The agent's model call.
        model: The model it calls (:func:`request_model`).
        thread: The thread's messages but the question.
        question: The run's last user message (what memory was searched for).
        context: What memory found.
        reply_tokens: Room kept for the reply when the request sets no ``max_tokens``/
            ``num_predict`` (at most a quarter of the window).
        image_tokens: Tokens an image part of a message is counted as.

    Returns:
        The prompt, or ``None`` when the thread alone leaves no room in the window.

    Raises:
        ContextOverflowError: If the system message and the question cannot fit.
        InvalidInputError: A content part that cannot be counted (audio, a file).
    """
    settings = request.model_settings or {}
    asked = settings.get("max_tokens") or getattr(request.model, "num_predict", None)
    budget = Budget.of(
        window=model.window,
        max_tokens=asked if isinstance(asked, int) and asked > 0 else None,
        default_reply=reply_tokens,
    )
    sent = sent_besides_memory(request, thread, question, model, image_tokens=image_tokens)
    room = Budget(window=budget.window - sent, reserve=budget.reserve)
    if room.prompt <= 0:
        return None
    system = message_text(request.system_message) if request.system_message else ""
    return build_prompt(
        system=system or DEFAULT_PERSONA,
        context=context,
        message=message_text(question),
        budget=room,
        counter=model.counter,
        model=model.name,
    )


def output_tools(response_format: Any) -> list[BaseTool]:
    """The tools a structured output adds to the model's.

    ``create_agent`` binds them beside the agent's tools; a provider's JSON-schema output
    is counted as one too (a provider may write it into the prompt).
    """
    if response_format is None:
        return []
    if isinstance(response_format, ProviderStrategy):
        specs = [response_format.schema_spec]
    elif isinstance(response_format, ToolStrategy):
        specs = response_format.schema_specs
    elif isinstance(response_format, AutoStrategy):
        specs = ToolStrategy(response_format.schema).schema_specs
    else:  # a bare schema
        specs = ToolStrategy(response_format).schema_specs
    return [OutputToolBinding.from_schema_spec(spec).tool for spec in specs]
