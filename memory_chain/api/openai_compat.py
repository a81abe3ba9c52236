"""OpenAI-compatible chat: ``GET /v1/models`` and ``POST /v1/chat/completions``.

The ``openai`` SDK and Open WebUI talk to memory_chain as to any OpenAI server (base URL
``http://<host>:<port>/v1``). Replies come from the memory chat chain, so memory retrieval,
storage and consolidation triggers are the same as on ``/memory``. The requested model name is
accepted and ignored: the configured chat model answers, and responses name it.

Who and which conversation:
    The user is decided as on every route (:func:`~memory_chain.api.deps.resolve_user`). The
    conversation is, in order: the body's ``conversation_id`` field or an
    ``X-Conversation-Id`` header; Open WebUI's forwarded ``X-OpenWebUI-Chat-Id``; otherwise
    ``"oa-"`` and a hash of the user and the first user message, which stays the same while a
    client resends the whole history. The id used is returned in ``X-Conversation-Id``.

What is stored:
    Clients resend the whole history each turn; only the last message (the user's) is new.
    The user and assistant messages before it are compared with the stored turns
    (whitespace-insensitive):

    * the history is what is stored: the chain stores the new message and the reply;
    * the history starts with what is stored and goes on (a chat begun elsewhere, a reply
      the client kept after a dropped stream): the missing turns are stored first, then the
      chain runs;
    * the message repeats the last stored exchange (a retry, Open WebUI's *regenerate*): a
      reply is generated from memory without that exchange and nothing is stored;
    * otherwise the history diverged (edited messages, another branch): nothing of it is
      stored or rewritten, since memory is append-only; the chain answers with memory and
      stores the new message and the reply.

    System, developer and tool messages are not stored and do not reach the model (the chain
    has its own system message). Open WebUI's background tasks (title, tags, follow-ups,
    search queries: one user message starting with ``### Task:``) are answered by the chat
    model without memory and stored nowhere. ``temperature``, ``max_tokens`` and ``user`` are
    accepted and ignored (the server's settings apply).

Errors have OpenAI's shape plus the API's usual ``detail``:
``{"error": {"message", "type", "param", "code"}, "detail": message}``. A stream that fails
after it started ends with an ``{"error": ...}`` event and ``[DONE]``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import run_in_executor
from pydantic import BaseModel, ConfigDict, Field

from memory_chain.api.deps import CurrentUser, ServicesDep
from memory_chain.api.errors import status_of
from memory_chain.chain import DEFAULT_SYSTEM_MESSAGE, LLMUnavailableError, build_prompt_with_memory
from memory_chain.errors import ConversationNotFoundError, InvalidInputError, MemoryChainError
from memory_chain.messages import message_text
from memory_chain.schemas import ID_PATTERN, NewTurn, Turn, validate_id, validate_new_turns
from memory_chain.services import Services

logger = logging.getLogger(__name__)

#: Open WebUI's background-task prompts (title, tags, follow-ups, queries) start with this.
OPENWEBUI_TASK_PREFIX = "### Task:"
#: The ``created`` of the model card: when this process loaded the module (stable per run).
_STARTED = int(time.time())
_ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 503: "service_unavailable"}


# -- errors ---------------------------------------------------------------------------------


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """An error in OpenAI's shape, with the API's usual ``detail`` too."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    body = {
        "error": {"message": message, "type": kind, "param": None, "code": status},
        "detail": message,
    }
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_message(error: RequestValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        if item.get("type") == "json_invalid":
            return "the request body is not valid JSON: send a chat completion request object"
        where = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
        parts.append(f"{where}: {item.get('msg')}" if where else str(item.get("msg")))
    return "invalid request: " + "; ".join(parts) + " (see the OpenAI chat completions API)"


def _with_llm_detail(request: Request, message: str) -> str:
    """Add what start-up found (for instance no Ollama at the configured URL)."""
    services: Services | None = getattr(request.app.state, "services", None)
    models = services.models if services is not None else None
    if models is not None and models.provider == "unavailable":
        return f"{message} ({models.detail})"
    return message


class _OpenAIErrors(APIRoute):
    """Answers this router's errors (validation, auth, library) in OpenAI's error shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The route handler, wrapped."""
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return error_response(422, _validation_message(exc))
            except HTTPException as exc:
                return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))
            except MemoryChainError as exc:
                status, message = status_of(exc), str(exc)
                if isinstance(exc, LLMUnavailableError):
                    message = _with_llm_detail(request, message)
                if status >= 500:
                    logger.error("chat completion failed: %s", message)
                return error_response(status, message)

        return route


class ErrorDetail(BaseModel):
    """What went wrong."""

    message: str
    type: str
    param: str | None = None
    code: int


class ErrorBody(BaseModel):
    """An error response."""

    error: ErrorDetail
    detail: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in [
        (401, "Missing or unknown API key."),
        (404, "Unknown conversation, or one of another user."),
        (422, "Malformed request."),
        (503, "The chat model or a store is unreachable; the message says what to start."),
    ]
}

router = APIRouter(prefix="/v1", tags=["openai"], route_class=_OpenAIErrors)


# -- request and response bodies ------------------------------------------------------------


class ContentPart(BaseModel):
    """A part of a message's content; only text parts are read."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    """One message of the history."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        """The message's text (text parts joined by newlines)."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        return "\n".join(part.text or "" for part in self.content if part.type == "text")


class StreamOptions(BaseModel):
    """Streaming options."""

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat completion request, plus ``conversation_id``."""

    model: str | None = Field(default=None, description="Accepted; the configured model answers.")
    messages: list[ChatMessage] = Field(min_length=1, description="The history; the last is new.")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, description="Ignored.")
    max_tokens: int | None = Field(default=None, description="Ignored.")
    max_completion_tokens: int | None = Field(default=None, description="Ignored.")
    n: int | None = Field(default=None, ge=1, le=1, description="Only one choice.")
    user: str | dict[str, Any] | None = Field(
        default=None, description="Ignored: the user comes from the API key or X-User-Id."
    )
    conversation_id: str | None = Field(
        default=None,
        pattern=f"^{ID_PATTERN.pattern}$",
        description="The conversation (else X-Conversation-Id, X-OpenWebUI-Chat-Id, derived).",
    )


class ModelCard(BaseModel):
    """A model, as OpenAI lists it."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "memory_chain"


class ModelList(BaseModel):
    """The models this server answers with (one)."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


class Usage(BaseModel):
    """Token counts as the model reported them."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ReplyMessage(BaseModel):
    """The assistant's reply."""

    role: Literal["assistant"] = "assistant"
    content: str
    refusal: str | None = None


class Choice(BaseModel):
    """The one choice of a completion."""

    index: int = 0
    message: ReplyMessage
    logprobs: None = None
    finish_reason: Literal["stop", "length"]


class ChatCompletion(BaseModel):
    """A ``chat.completion`` object."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[Choice]
    usage: Usage


# -- conversation and history ---------------------------------------------------------------


@dataclass(frozen=True)
class Said:
    """A user or assistant message, compared without regard to whitespace."""

    role: str
    text: str

    @property
    def key(self) -> tuple[str, str]:
        """What two messages must share to be the same."""
        return self.role, " ".join(self.text.split())

    @classmethod
    def of(cls, turn: Turn) -> Said:
        """From a stored turn."""
        return cls(turn.role, turn.content)


@dataclass(frozen=True)
class HistoryPlan:
    """What to do with a request's history.

    Attributes:
        action: ``"append"`` (in sync), ``"import"`` (store ``missing`` first), ``"repeat"``
            (answer, store nothing) or ``"diverged"`` (store only the new exchange).
        missing: Turns the client has and the server lacks (for ``"import"``).
    """

    action: Literal["append", "import", "repeat", "diverged"]
    missing: tuple[Said, ...] = ()


def _keys(messages: Sequence[Said]) -> list[tuple[str, str]]:
    return [message.key for message in messages]


def plan_history(
    history: Sequence[Said], stored: Sequence[Said], stored_count: int, new_text: str
) -> HistoryPlan:
    """Compare the client's history with the stored turns (see the module docstring).

    Args:
        history: The user and assistant messages before the new one.
        stored: The stored turns: all of them when ``stored_count <= len(history)``, else at
            least the last four.
        stored_count: How many turns are stored.
        new_text: The new user message.

    Returns:
        The plan.
    """
    complete = len(stored) == stored_count
    if complete and _keys(history) == _keys(stored):
        return HistoryPlan("append")
    if (
        stored_count >= 2
        and stored[-2].key == Said("user", new_text).key
        and stored[-1].role == "assistant"
    ):
        before, before_count = stored[:-2], stored_count - 2
        overlap = min(len(history), len(before), 2)
        if (before_count == 0 and not history) or (
            overlap > 0 and _keys(history[-overlap:]) == _keys(before[-overlap:])
        ):
            return HistoryPlan("repeat")
    if complete and len(history) > stored_count and _keys(history[:stored_count]) == _keys(stored):
        return HistoryPlan("import", tuple(history[stored_count:]))
    return HistoryPlan("diverged")


def derived_conversation_id(user_id: str, first_user_message: str) -> str:
    """The conversation of a client that names none: stable while it resends the history."""
    seed = f"{user_id}\x1f{' '.join(first_user_message.split())}"
    return "oa-" + hashlib.sha256(seed.encode()).hexdigest()[:32]


def conversation_of(
    request: Request, body: ChatCompletionRequest, user_id: str, first_user_message: str
) -> str:
    """The conversation a request belongs to (see the module docstring).

    Raises:
        InvalidInputError: If ``X-Conversation-Id`` is malformed.
    """
    if body.conversation_id:
        return body.conversation_id
    header = request.headers.get("x-conversation-id")
    if header:
        return validate_id(header, "conversation id in X-Conversation-Id")
    chat_id = request.headers.get("x-openwebui-chat-id")
    if chat_id:
        if ID_PATTERN.fullmatch(chat_id):
            return chat_id
        logger.warning("ignoring a malformed X-OpenWebUI-Chat-Id %r", chat_id[:80])
    return derived_conversation_id(user_id, first_user_message)


@dataclass(frozen=True)
class ParsedChat:
    """A request's messages, split."""

    new_text: str
    history: tuple[Said, ...]
    first_user_text: str
    is_task: bool


def parse_messages(messages: Sequence[ChatMessage]) -> ParsedChat:
    """Split the messages into the new user message and the user/assistant history.

    Raises:
        InvalidInputError: If the last message is not a user message with text, or a
            message is not valid Unicode.
    """
    for index, message in enumerate(messages):
        try:
            message.text.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800"): no store takes it
            raise InvalidInputError(
                f"messages.{index}: the text is not valid Unicode (a lone surrogate at "
                f"character {exc.start}): send UTF-8 text"
            ) from exc
    last = messages[-1]
    if last.role != "user":
        raise InvalidInputError(
            f"the last message has role {last.role!r}: end with the user's new message "
            "(role 'user'); this server does not run tools or continue assistant messages"
        )
    new_text = last.text
    if not new_text.strip():
        raise InvalidInputError("the last user message has no text: send some text")
    history = tuple(
        Said(message.role, message.text)
        for message in messages[:-1]
        if message.role in ("user", "assistant") and message.text.strip()
    )
    first_user = next((said.text for said in history if said.role == "user"), new_text)
    is_task = new_text.lstrip().startswith(OPENWEBUI_TASK_PREFIX) and not any(
        said.role == "assistant" for said in history
    )
    return ParsedChat(new_text, history, first_user, is_task)


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
    context = await services.manager.aretrieve(conversation_id, user_id, text)
    recent = context.recent
    if (
        len(recent) >= 2
        and Said.of(recent[-2]).key == Said("user", text).key
        and recent[-1].role == "assistant"
    ):
        recent = recent[:-2]
    prompt = build_prompt_with_memory(DEFAULT_SYSTEM_MESSAGE, replace(context, recent=recent), text)
    return _model_reply(services, prompt)


async def _owner_check(services: Services, conversation_id: str, user_id: str) -> int:
    """Stored turn count; 404 for a conversation of another user."""
    info = await services.store.aget_conversation(conversation_id)
    if info is not None and info.user_id != user_id:
        raise ConversationNotFoundError(conversation_id)
    return info.turn_count if info is not None else 0


async def _reply_for(
    services: Services, parsed: ParsedChat, cid: str, user: str
) -> AsyncGenerator[AIMessageChunk, None]:
    """Store what the client has and the server lacks; the reply to stream."""
    count = await _owner_check(services, cid, user)
    store = services.store
    if count <= len(parsed.history):
        turns = await store.aget_turns(cid, user_id=user)
    else:
        turns = await store.arecent_turns(cid, 4, user_id=user)
    plan = plan_history(parsed.history, [Said.of(t) for t in turns], count, parsed.new_text)
    if plan.action != "append":
        logger.info(
            "conversation %s: history %s, %d turns to add", cid, plan.action, len(plan.missing)
        )
    if plan.action == "repeat":
        return await _repeat_reply(services, cid, user, parsed.new_text)
    if plan.missing:
        missing = [
            HumanMessage(said.text) if said.role == "user" else AIMessage(said.text)
            for said in plan.missing
        ]
        await services.manager.aadd_turns(cid, user, missing)
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


@router.get("/models", response_model=ModelList, responses={401: _ERRORS[401]})
async def list_models(services: ServicesDep, _user: CurrentUser) -> ModelList:
    """The model that answers (any model name is accepted in chat completions)."""
    return ModelList(data=[ModelCard(id=served_model(services), created=_STARTED)])


@router.get(
    "/models/{model_id:path}",
    response_model=ModelCard,
    responses={401: _ERRORS[401], 404: {"model": ErrorBody, "description": "Another model."}},
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
        **_ERRORS,
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
            # The status line is sent: the error goes in the stream, as OpenAI does.
            if isinstance(exc, MemoryChainError):
                status, message = status_of(exc), str(exc)
            else:
                logger.exception("chat completion stream failed")
                status, message = 500, f"the reply failed ({type(exc).__name__}): see the log"
            kind = _ERROR_TYPES.get(status, "server_error")
            error = {"message": message, "type": kind, "param": None, "code": status}
            yield f"data: {json.dumps({'error': error}, ensure_ascii=False)}\n\n"
            yield "data: [DONE]\n\n"
            return
        finally:
            await rest.aclose()
        yield self._delta({}, _finish(reply))
        if self.include_usage:
            yield self._event([], await _usage(self.services, reply, self.prompt_text))
        yield "data: [DONE]\n\n"
