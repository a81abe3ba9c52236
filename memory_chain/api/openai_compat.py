"""OpenAI-compatible chat: ``GET /v1/models`` and ``POST /v1/chat/completions``.

The ``openai`` SDK and Open WebUI talk to memory_chain as to any OpenAI server (base URL
``http://<host>:<port>/v1``). This module only parses and maps: a request becomes one
:class:`~memory_chain.chat.request.ChatRequest` (the new message, the history, the client's
system and developer messages, the model, ``temperature``, ``top_p``,
``max_tokens``/``max_completion_tokens``, ``stop``, ``seed``), which
:class:`~memory_chain.chat.core.ChatCore` answers with memory, as on ``/memory``. Which
conversation a request belongs to is decided in :mod:`memory_chain.api.openai_history`, the
bodies are in :mod:`memory_chain.api.openai_bodies`.

``/v1/models`` lists the LLM server's models (Ollama's ``/api/tags``; the embedded model when
that is what runs) to any key holder, whoever the user; a request naming another model gets
OpenAI's 404 ``model_not_found``. A message too long for the model's context window gets 400
``context_length_exceeded`` with the numbers, and nothing is stored.

Errors have OpenAI's shape plus the API's usual ``detail``:
``{"error": {"message", "type", "param", "code"}, "detail": message}``. A stream that fails
after it started ends with an ``{"error": ...}`` event and ``[DONE]``
(:mod:`memory_chain.api.openai_errors`).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from langchain_core.messages import AIMessageChunk
from langchain_core.runnables.config import run_in_executor

from memory_chain.api.deps import Authenticated, CurrentUser, ServicesDep
from memory_chain.api.openai_bodies import (
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    ErrorBody,
    ModelCard,
    ModelList,
    ReplyMessage,
    Usage,
)
from memory_chain.api.openai_errors import ERRORS, OpenAIErrors, stream_error_event
from memory_chain.api.openai_history import conversation_of, derived_conversation_id, parse_messages
from memory_chain.catalog import ListedModel
from memory_chain.chat.core import ChatCore, PreparedTurn
from memory_chain.chat.request import ChatRequest, ReplyOptions
from memory_chain.errors import LLMUnavailableError, ModelNotFoundError
from memory_chain.messages import message_text
from memory_chain.services import Services

#: The ``created`` of a model card whose date is unknown: when this process loaded the module.
_STARTED = int(time.time())

router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAIErrors)


def chat_core(services: Services) -> ChatCore:
    """The chat core, or a 503 on a server started without a chat model."""
    if services.core is None:
        raise LLMUnavailableError("the server runs without a chat model: start it with one")
    return services.core


def _card(model: ListedModel) -> ModelCard:
    created = _STARTED
    if model.modified_at:
        with contextlib.suppress(ValueError):
            created = int(datetime.fromisoformat(model.modified_at).timestamp())
    return ModelCard(id=model.name, created=created)


def _listed(services: Services) -> list[ListedModel]:
    """The LLM server's models; the configured chat model alone while it cannot be asked."""
    models = services.models
    if models is None:
        return [ListedModel(services.settings.ollama_chat_model)]
    try:
        return models.catalog.models()
    except LLMUnavailableError:
        return [ListedModel(models.catalog.default_model)]


def _request(
    body: ChatCompletionRequest, request: Request, services: Services, user: str
) -> ChatRequest:
    """The core's request of an OpenAI-style body."""
    parsed = parse_messages(body.messages)
    options = ReplyOptions.of(
        temperature=body.temperature,
        top_p=body.top_p,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        stop=body.stop,
        seed=body.seed,
    )
    if parsed.is_task:  # stored nowhere: any id will do
        conversation = derived_conversation_id(user, parsed.first_user_text)
    else:
        conversation = conversation_of(request, body, user, parsed.first_user_text)
    return ChatRequest.checked(
        conversation_id=conversation,
        user_id=user,
        message=parsed.new_text,
        system=parsed.system,
        history=parsed.history,
        model=body.model or None,
        options=options,
        memory=not parsed.is_task,
        max_chars=services.settings.max_message_chars,
    )


# -- routes ---------------------------------------------------------------------------------


@router.get("/models", response_model=ModelList, responses={401: ERRORS[401]})
def list_models(services: ServicesDep, _key: Authenticated) -> ModelList:
    """The models a chat completion may name (the LLM server's).

    Any API key may list them, a proxy key without a user header too: the list holds no one's
    memory, and Open WebUI asks for it without a user (at start-up, to cache the models).
    """
    return ModelList(data=[_card(model) for model in _listed(services)])


@router.get(
    "/models/{model_id:path}",
    response_model=ModelCard,
    responses={401: ERRORS[401], 404: {"model": ErrorBody, "description": "Another model."}},
)
def get_model(model_id: str, services: ServicesDep, _key: Authenticated) -> Response:
    """A model of the LLM server."""
    listed = _listed(services)
    found = next(
        (m for m in listed if m.name.removesuffix(":latest") == model_id.removesuffix(":latest")),
        None,
    )
    if found is None:
        raise ModelNotFoundError(model_id, [m.name for m in listed])
    return JSONResponse(_card(found).model_dump())


@router.post(
    "/chat/completions",
    response_model=None,
    responses={
        200: {
            "model": ChatCompletion,
            "description": "A chat.completion, or with stream=true server-sent "
            "chat.completion.chunk events ending with [DONE].",
            "content": {"text/event-stream": {}},
        },
        **ERRORS,
    },
)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, services: ServicesDep, user: CurrentUser
) -> Response:
    """Answer the last user message with memory, OpenAI style (see the module docstring)."""
    core = chat_core(services)
    chat = _request(body, request, services, user)
    # Blocking work (SQL, embedding, the vector engine) in one worker-thread hop.
    turn = await run_in_executor(None, core.prepare, chat)
    headers = {} if not chat.memory else {"X-Conversation-Id": chat.conversation_id}
    reply = core.astream(turn)
    answer = _Answer(
        turn=turn,
        include_usage=bool(body.stream_options and body.stream_options.include_usage),
    )
    if not body.stream:
        return JSONResponse((await answer.complete(reply)).model_dump(), headers=headers)
    try:
        first: AIMessageChunk | None = await anext(reply)
    except StopAsyncIteration:
        first = None
    return StreamingResponse(
        answer.events(first, reply),
        media_type="text/event-stream",
        headers={**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _finish(reply: AIMessageChunk | None) -> Literal["stop", "length"]:
    done = reply.response_metadata.get("done_reason") if reply is not None else None
    return "length" if done == "length" else "stop"


def _usage(turn: PreparedTurn, reply: AIMessageChunk | None) -> Usage:
    meta = reply.usage_metadata if reply is not None else None
    if meta:
        prompt, completion = int(meta["input_tokens"]), int(meta["output_tokens"])
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=int(meta.get("total_tokens") or prompt + completion),
        )
    # The model reported nothing: the budget's count of the prompt, and the reply's length
    # in the same units (an estimate where the model's tokenizer is not at hand).
    prompt = turn.prompt.tokens
    completion = len(message_text(reply).split()) if reply is not None else 0
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


@dataclass
class _Answer:
    """One completion, as a ``chat.completion`` or as ``chat.completion.chunk`` events."""

    turn: PreparedTurn
    include_usage: bool
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    async def complete(self, stream: AsyncIterator[AIMessageChunk]) -> ChatCompletion:
        """The whole reply."""
        reply: AIMessageChunk | None = None
        async for chunk in stream:
            reply = chunk if reply is None else reply + chunk
        text = message_text(reply) if reply is not None else ""
        return ChatCompletion(
            id=self.id,
            created=self.created,
            model=self.turn.model,
            choices=[Choice(message=ReplyMessage(content=text), finish_reason=_finish(reply))],
            usage=_usage(self.turn, reply),
        )

    def _event(self, choices: list[dict[str, Any]], usage: Usage | None = None) -> str:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.turn.model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if self.include_usage:
            body["usage"] = usage.model_dump() if usage is not None else None
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    def _delta(self, content: dict[str, str], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}
        return self._event([choice])

    async def events(
        self, first: AIMessageChunk | None, rest: AsyncIterator[AIMessageChunk]
    ) -> AsyncIterator[str]:
        """Server-sent events: the role, the content, the finish, the usage, ``[DONE]``."""
        yield self._delta({"role": "assistant", "content": ""})
        reply = first
        try:
            if first is not None:
                if text := message_text(first):
                    yield self._delta({"content": text})
                async for chunk in rest:
                    reply = chunk if reply is None else reply + chunk
                    if text := message_text(chunk):
                        yield self._delta({"content": text})
        except Exception as exc:
            # The status line is sent: the error goes in the stream.
            yield stream_error_event(exc)
            yield "data: [DONE]\n\n"
            return
        finally:
            close = getattr(rest, "aclose", None)
            if close is not None:
                await close()
        yield self._delta({}, _finish(reply))
        if self.include_usage:
            yield self._event([], _usage(self.turn, reply))
        yield "data: [DONE]\n\n"
