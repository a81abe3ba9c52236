"""Tokens of what a chat model is sent: messages with their tool calls and parts, and tools.

A chat model reads more than the text of its messages. With tools bound, the provider is
sent each tool's JSON schema and the chat template writes it into the prompt (with a
paragraph on how to call tools); an AI message that called tools carries the calls and
their arguments as JSON; a tool's result is wrapped in markers; an image part becomes
hundreds of tokens. Ollama cuts a prompt longer than its window from the front, silently,
so what is not counted here pushes the conversation's beginning (the system message, with
memory in it) out of the model's sight.

What is counted, as the model receives it:

* **A tool**: the JSON of its schema as the provider is sent it
  (:func:`~langchain_core.utils.function_calling.convert_to_openai_tool`, as ``ChatOllama``
  binds tools), plus :data:`TOOL_OVERHEAD`; :data:`TOOLS_OVERHEAD` once for the template's
  paragraph on tools.
* **A message**: its text (text parts by their text) and :data:`MESSAGE_OVERHEAD` for the
  role markers; an AI message's tool calls (``tool_calls`` and ``invalid_tool_calls``) as
  ``{"name": ..., "arguments": ...}`` JSON with :data:`TOOL_CALL_OVERHEAD` each, and its
  reasoning text when it is sent back (``reasoning_content``); a tool message's
  :data:`TOOL_RESULT_OVERHEAD` for the result markers.
* **An image part** (``image_url``, or an ``image`` block): :data:`IMAGE_TOKENS`, a fixed
  estimate (the pixels are not decoded to size them). Tool-use parts are the message's
  tool calls again (``ChatOllama`` skips them) and count nothing more. Any other part
  (audio, video, a file) cannot be counted: :class:`~memory_chain.errors.InvalidInputError`.

JSON is counted as :func:`sent_json` writes it: spaces after ``,`` and ``:`` (as Python's
and Jinja's ``tojson`` write it; Ollama writes none), non-ASCII characters as they are,
``<``, ``>`` and ``&`` escaped (as Go's encoder, Ollama's, writes them): no fewer tokens
than either writes. The chat door's requests without memory (:mod:`memory_chain.chat.core`)
and the agent middleware (:mod:`memory_chain.integrations.middleware`) count with these
functions; the chat's budget (:mod:`memory_chain.chat.budget`) counts its plain-text
prompt with the same :data:`~memory_chain.chat.sections.MESSAGE_OVERHEAD`.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from memory_chain.tokens import EstimatingCounter
    >>> call = AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"},
    ...                                   "id": "1"}])
    >>> message_tokens([call], EstimatingCounter())[0] > MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from memory_chain.chat.sections import MESSAGE_OVERHEAD
from memory_chain.errors import InvalidInputError
from memory_chain.messages import message_text
from memory_chain.tokens import TokenCount

#: Tokens an image part is counted as. Vision models turn an image into a fixed or bounded
#: number of embeddings: Gemma 3 256, LLaVA 576, Qwen2.5-VL at most 1,280 (Ollama scales
#: larger images down); Mistral Small 3.1 takes up to about 3,000 for a large image: pass
#: a larger ``image_tokens`` for such a model.
IMAGE_TOKENS = 1280
#: Tokens a chat template adds once when tools are offered: its paragraph on how to call
#: them (Qwen2.5's is 78 tokens, Llama 3.1's about 60), counted high.
TOOLS_OVERHEAD = 128
#: Tokens a template adds around each tool's schema (a line break, a wrapper).
TOOL_OVERHEAD = 4
#: Tokens a template adds around each tool call (Qwen2.5's ``<tool_call>`` markers: 4-8).
TOOL_CALL_OVERHEAD = 8
#: Tokens a template adds around a tool's result, beyond a message's role markers
#: (Qwen2.5's ``<tool_response>`` markers: 6-9).
TOOL_RESULT_OVERHEAD = 8

#: Content parts that hold an image, as LangChain's providers take them.
_IMAGE_PARTS = frozenset({"image_url", "image"})
#: Content parts that repeat the message's tool calls.
_TOOL_USE_PARTS = frozenset({"tool_use", "tool_call"})
#: Content parts of reasoning, and the key of their text.
_REASONING_PARTS = {"thinking": "thinking", "reasoning": "reasoning"}
#: What Go's JSON encoder (Ollama's) escapes, and how.
_HTML_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def sent_json(value: Any) -> str:
    """``value`` as JSON, written to count no fewer tokens than a template writes it."""
    return json.dumps(value, ensure_ascii=False, default=str).translate(_HTML_ESCAPES)


def tool_schema(tool: BaseTool | Mapping[str, Any] | Any) -> dict[str, Any]:
    """A tool as the provider is sent it (the OpenAI tool format, as ``ChatOllama`` sends)."""
    return convert_to_openai_tool(tool)


def tool_tokens(tools: Sequence[BaseTool | Mapping[str, Any] | Any], counter: TokenCount) -> int:
    """Tokens the tools' schemas take in the prompt (0 without tools)."""
    if not tools:
        return 0
    counts = counter.count_many([sent_json(tool_schema(tool)) for tool in tools])
    return TOOLS_OVERHEAD + sum(counts) + TOOL_OVERHEAD * len(tools)


def _parts(message: BaseMessage) -> tuple[list[str], int]:
    """The texts a message's content parts add beyond :func:`message_text`, and its images.

    Raises:
        InvalidInputError: A part that cannot be counted (audio, video, a file, unknown).
    """
    if isinstance(message.content, str):
        return [], 0
    texts: list[str] = []
    images = 0
    for part in message.content:
        if isinstance(part, str):
            continue
        kind = part.get("type")
        if kind == "text":
            continue  # in message_text
        if kind in _IMAGE_PARTS:
            images += 1
        elif kind in _TOOL_USE_PARTS and getattr(message, "tool_calls", None):
            continue  # the message's tool calls, counted as such
        elif kind in _TOOL_USE_PARTS:
            texts.append(sent_json(part))
        elif isinstance(kind, str) and kind in _REASONING_PARTS:
            texts.append(str(part.get(_REASONING_PARTS[kind]) or part.get("text") or ""))
        else:
            raise InvalidInputError(
                f"a {message.type} message has a content part of type {kind!r}: its tokens "
                "cannot be counted (text and image parts can)"
            )
    return texts, images


def _extras(message: BaseMessage) -> tuple[list[str], int, int]:
    """What a message sends beyond its text: texts to count, fixed tokens, images."""
    texts, images = _parts(message)
    fixed = 0
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            texts.append(sent_json({"name": call["name"], "arguments": call["args"]}))
        for invalid in message.invalid_tool_calls:
            texts.append(sent_json({"name": invalid.get("name"), "arguments": invalid.get("args")}))
        fixed += TOOL_CALL_OVERHEAD * (len(message.tool_calls) + len(message.invalid_tool_calls))
        reasoning = message.additional_kwargs.get("reasoning_content")
        if reasoning:
            texts.append(str(reasoning))
    elif isinstance(message, ToolMessage):
        fixed += TOOL_RESULT_OVERHEAD
    return texts, fixed, images


def extra_tokens(
    message: BaseMessage, counter: TokenCount, *, image_tokens: int = IMAGE_TOKENS
) -> int:
    """Tokens a message is sent with beyond its text and role markers (see the module).

    Raises:
        InvalidInputError: A content part that cannot be counted.
    """
    texts, fixed, images = _extras(message)
    return fixed + images * image_tokens + sum(counter.count_many(texts) if texts else [])


def message_tokens(
    messages: Sequence[BaseMessage], counter: TokenCount, *, image_tokens: int = IMAGE_TOKENS
) -> list[int]:
    """Tokens of each message as the model receives it, its role markers included.

    Raises:
        InvalidInputError: A content part that cannot be counted.
    """
    counts = counter.count_many([message_text(message) for message in messages])
    return [
        count + MESSAGE_OVERHEAD + extra_tokens(message, counter, image_tokens=image_tokens)
        for message, count in zip(messages, counts, strict=True)
    ]
