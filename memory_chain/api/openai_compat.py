"""OpenAI-compatible chat: ``GET /v1/models`` and ``POST /v1/chat/completions``.

The ``openai`` SDK and Open WebUI talk to memory_chain as to any OpenAI server (base URL
``http://<host>:<port>/v1``). Replies come from the memory chat chain, so memory retrieval,
storage and consolidation triggers are the same as on ``/memory``. The requested model name is
accepted and ignored: the configured chat model answers, and responses name it.

Which conversation a request belongs to and which of its messages are stored is decided in
:mod:`memory_chain.api.openai_history`; the request and response bodies are in
:mod:`memory_chain.api.openai_bodies`.

Errors have OpenAI's shape plus the API's usual ``detail``:
``{"error": {"message", "type", "param", "code"}, "detail": message}``. A stream that fails
after it started ends with an ``{"error": ...}`` event and ``[DONE]``
(:mod:`memory_chain.api.openai_errors`).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import run_in_executor

from memory_chain.api.deps import CurrentUser, ServicesDep
from memory_chain.api.openai_bodies import (
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessage,
    Choice,
    ErrorBody,
    ModelCard,
    ModelList,
    ReplyMessage,
    Usage,
)
from memory_chain.api.openai_errors import ERRORS, OpenAIErrors, error_response, stream_error_event
from memory_chain.api.openai_history import (
    ParsedChat,
    Said,
    conversation_of,
    parse_messages,
    plan_history,
)
from memory_chain.chain import DEFAULT_SYSTEM_MESSAGE, LLMUnavailableError, build_prompt_with_memory
from memory_chain.errors import MemoryChainError
from memory_chain.manager import MemoryManager
from memory_chain.messages import message_text
from memory_chain.schemas import NewTurn, Turn, validate_new_turns
from memory_chain.services import Services

logger = logging.getLogger(__name__)

#: The ``created`` of the model card: when this process loaded the module (stable per run).
_STARTED = int(time.time())

router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAIErrors)


# -- replies --------------------------------------------------------------------------------


def served_model(services: Services) -> str:
    """The name of the model that answers."""
    if services.models is not None:
        name = getattr(services.models.chat, "model", None)
        if isinstance(name, str) and name:
            return name
    return services.settings.ollama_chat_model


async def _chain_reply(
    services: Services, conversation_id: str, user_id: str, text: str
) -> AsyncGenerator[AIMessageChunk, None]:
    if services.chain is None:
        raise LLMUnavailableError("the server runs without a chat model: start it with one")
    config: RunnableConfig = {
        "configurable": {"conversation_id": conversation_id, "user_id": user_id}
    }
    stream = services.chain.astream({"input": text}, config)
    try:
        async for chunk in stream:
            yield chunk
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


async def _model_reply(
    services: Services, messages: list[BaseMessage]
) -> AsyncGenerator[AIMessageChunk, None]:
    """The chat model alone: nothing retrieved, nothing stored."""
    if services.models is None:
        raise LLMUnavailableError("the server runs without a chat model: start it with one")
    try:
        async for chunk in services.models.chat.astream(messages):
            yield chunk
    except MemoryChainError:
        raise
    except Exception as exc:
        raise LLMUnavailableError(
            f"the chat model failed ({type(exc).__name__}: {exc}): check that Ollama runs at "
            f"{services.models.base_url} and has the model pulled (`ollama pull <model>`)"
        ) from exc


def _as_messages(messages: Sequence[ChatMessage]) -> list[BaseMessage]:
    kinds: dict[str, type[BaseMessage]] = {
        "system": SystemMessage,
        "developer": SystemMessage,
        "user": HumanMessage,
        "assistant": AIMessage,
    }
    return [
        kinds[message.role](message.text)
        for message in messages
        if message.role in kinds and message.text.strip()
    ]


async def _repeat_reply(
    services: Services, conversation_id: str, user_id: str, text: str
) -> AsyncGenerator[AIMessageChunk, None]:
    """A new answer to the last stored exchange, from memory without that exchange."""
    context = await run_in_executor(None, services.manager.retrieve, conversation_id, user_id, text)
    recent = context.recent
    if (
        len(recent) >= 2
        and Said.of(recent[-2]).key == Said("user", text).key
        and recent[-1].role == "assistant"
    ):
        recent = recent[:-2]
    prompt = build_prompt_with_memory(DEFAULT_SYSTEM_MESSAGE, replace(context, recent=recent), text)
    return _model_reply(services, prompt)


def _stored(
    memory: MemoryManager, conversation_id: str, user_id: str, history: int
) -> tuple[int, list[Turn]]:
    """The stored turn count and the turns to compare with the client's history.

    All the turns when there are no more than the ``history`` messages the client sent, else
    the last four (and any stored since the count was read). A conversation id another user
    chose is a different conversation, this user's own (0 turns until they write to it).
    """
    info = memory.conversation(conversation_id, user_id)
    count = info.turn_count if info is not None else 0
    if count == 0:
        return 0, []
    after = 0 if count <= history else count - 4
    return count, memory.turns(conversation_id, user_id, after=after)


async def _reply_for(
    services: Services, parsed: ParsedChat, cid: str, user: str
) -> AsyncGenerator[AIMessageChunk, None]:
    """Store what the client has and the server lacks; the reply to stream."""
    # Both reads in one worker-thread hop: each hop costs the event loop a thread wake-up.
    count, turns = await run_in_executor(
        None, _stored, services.manager, cid, user, len(parsed.history)
    )
    plan = plan_history(parsed.history, [Said.of(t) for t in turns], count, parsed.new_text)
    if plan.action != "append":
        logger.info(
            "conversation %s: history %s, %d turns to add", cid, plan.action, len(plan.missing)
        )
    if plan.action == "repeat":
        return await _repeat_reply(services, cid, user, parsed.new_text)
    # "retry": the chain finds the message stored and unanswered, and stores only the reply.
    if plan.missing:
        missing = [
            HumanMessage(said.text) if said.role == "user" else AIMessage(said.text)
            for said in plan.missing
        ]
        await run_in_executor(None, services.manager.add_turns, cid, user, missing)
    return _chain_reply(services, cid, user, parsed.new_text)


def _finish(reply: AIMessageChunk | None) -> Literal["stop", "length"]:
    done = reply.response_metadata.get("done_reason") if reply is not None else None
    return "length" if done == "length" else "stop"


async def _usage(services: Services, reply: AIMessageChunk | None, prompt_text: str) -> Usage:
    meta = reply.usage_metadata if reply is not None else None
    if meta:
        prompt, completion = int(meta["input_tokens"]), int(meta["output_tokens"])
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=int(meta.get("total_tokens") or prompt + completion),
        )
    # The model reported nothing: count locally (the prompt without memory, a lower bound).
    texts = [prompt_text, message_text(reply) if reply is not None else ""]
    prompt, completion = await run_in_executor(None, services.manager.counter.count_many, texts)
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


# -- routes ---------------------------------------------------------------------------------


@router.get("/models", response_model=ModelList, responses={401: ERRORS[401]})
async def list_models(services: ServicesDep, _user: CurrentUser) -> ModelList:
    """The model that answers (any model name is accepted in chat completions)."""
    return ModelList(data=[ModelCard(id=served_model(services), created=_STARTED)])


@router.get(
    "/models/{model_id:path}",
    response_model=ModelCard,
    responses={401: ERRORS[401], 404: {"model": ErrorBody, "description": "Another model."}},
)
async def get_model(model_id: str, services: ServicesDep, _user: CurrentUser) -> Response:
    """The model, if ``model_id`` names the one that answers."""
    name = served_model(services)
    if model_id != name:
        return error_response(404, f"model {model_id!r} not found: this server serves {name!r}")
    return JSONResponse(ModelCard(id=name, created=_STARTED).model_dump())


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
    parsed = parse_messages(body.messages)
    # The store's checks, before the model runs rather than when its reply is stored.
    validate_new_turns(
        [NewTurn("user", parsed.new_text)], max_chars=services.settings.max_message_chars
    )
    headers: dict[str, str] = {}
    if parsed.is_task:
        reply = _model_reply(services, _as_messages(body.messages))
    else:
        cid = conversation_of(request, body, user, parsed.first_user_text)
        headers["X-Conversation-Id"] = cid
        reply = await _reply_for(services, parsed, cid, user)
    answer = _Answer(
        services=services,
        model=served_model(services),
        prompt_text=parsed.new_text,
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


@dataclass
class _Answer:
    """One completion, as a ``chat.completion`` or as ``chat.completion.chunk`` events."""

    services: Services
    model: str
    prompt_text: str
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
            model=self.model,
            choices=[Choice(message=ReplyMessage(content=text), finish_reason=_finish(reply))],
            usage=await _usage(self.services, reply, self.prompt_text),
        )

    def _event(self, choices: list[dict[str, Any]], usage: Usage | None = None) -> str:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
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
        self, first: AIMessageChunk | None, rest: AsyncGenerator[AIMessageChunk, None]
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
            await rest.aclose()
        yield self._delta({}, _finish(reply))
        if self.include_usage:
            yield self._event([], await _usage(self.services, reply, self.prompt_text))
        yield "data: [DONE]\n\n"
