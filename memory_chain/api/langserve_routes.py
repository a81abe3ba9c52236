"""LangServe routes: the chat chain at ``/memory``, the memory retriever at ``/memory/retriever``.

LangServe needs the runnables when the app is built, but the stores open when it starts, so
the routes serve stand-ins whose target is set at start-up (:class:`LateBound`). Every
request goes through :func:`config_modifier`, which puts the authenticated user into the
config (a client naming another user is refused when auth is on) and answers 400 when no
conversation is named (LangServe would otherwise fail with a 500, or share one empty
session). Conversation ids are each user's own: a conversation id names the calling user's
conversation.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from langchain_core.documents import Document
from langchain_core.messages import AIMessageChunk
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import RunnableBinding
from langserve import add_routes

from memory_chain.api.deps import get_services, resolve_user
from memory_chain.chain import (
    MEMORY_CONFIG_SPECS,
    ChatInput,
    MemoryChat,
    reply_options,
    user_text,
)
from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.identity import authenticate, presented_key
from memory_chain.manager import MemoryManager
from memory_chain.retrieval.retriever import MemoryRetriever
from memory_chain.schemas import validate_id

CONVERSATION_HEADERS = ("x-conversation-id", "x-openwebui-chat-id")
#: Most inputs in one batch request (each may be an LLM call).
MAX_BATCH = 16


def _not_started(_: Any) -> Any:
    raise MemoryChainError("the server is starting: try again in a moment")


class LateBound(RunnableBinding[Any, Any]):  # type: ignore[no-redef]  # pydantic-mypy quirk
    """A runnable whose target is set when the server starts; declares the memory config."""

    def bind_target(self, target: Runnable[Any, Any]) -> None:
        """Serve ``target`` from now on."""
        self.bound = target

    @property
    def config_specs(self) -> list[Any]:
        """The conversation and user fields the memory routes read."""
        return list(MEMORY_CONFIG_SPECS)


def chat_stand_in() -> LateBound:
    """The ``/memory`` runnable before start-up: chat input in, message chunks out."""
    placeholder = RunnableLambda(_not_started).with_types(
        input_type=ChatInput, output_type=AIMessageChunk
    )
    return LateBound(bound=placeholder, kwargs={}, config={})


def retriever_stand_in() -> LateBound:
    """The ``/memory/retriever`` runnable before start-up: a query in, documents out."""
    placeholder = RunnableLambda(_not_started).with_types(
        input_type=str, output_type=list[Document]
    )
    return LateBound(bound=placeholder, kwargs={}, config={})


def _conversation_from(config: dict[str, Any], request: Request) -> str | None:
    configurable = config.get("configurable") or {}
    conversation = configurable.get("conversation_id")
    if not conversation:
        for header in CONVERSATION_HEADERS:
            conversation = request.headers.get(header)
            if conversation:
                break
    return conversation or None


def config_modifier(required_conversation: bool) -> Any:
    """A ``per_req_config_modifier`` that sets the user and checks the conversation.

    LangServe calls it with the config and the request, outside FastAPI's dependencies, so it
    resolves the user with the function behind :data:`~memory_chain.api.deps.CurrentUser`,
    passing the ``configurable.user_id`` the client sent: the user it names without keys;
    with keys it must be the key's own user (403 otherwise).
    Nothing needs to own the conversation first: the chat creates the caller's conversation
    of that id when it is missing, and the retriever searches only the caller's.
    """

    async def modify(config: dict[str, Any], request: Request) -> dict[str, Any]:
        services = get_services(request)
        configurable = dict(config.get("configurable") or {})
        # Without keys the client may name the user here, as with X-User-Id; with keys a
        # named user other than the key's is refused (403), never silently replaced.
        user = resolve_user(request, services, named_user=configurable.get("user_id") or None)
        conversation = _conversation_from(config, request)
        if conversation is None and required_conversation:
            raise HTTPException(
                status_code=400,
                detail="no conversation id: send config "
                '{"configurable": {"conversation_id": "<id>"}} or an X-Conversation-Id header',
            )
        configurable["user_id"] = user
        if conversation is not None:
            try:
                # The user's own conversation of this id (ids are per user).
                configurable["conversation_id"] = validate_id(conversation)
            except InvalidInputError as exc:
                raise HTTPException(status_code=422, detail=str(exc)) from exc
        return {**config, "configurable": configurable}

    return modify


def retriever_target(memory: MemoryManager) -> Runnable[Any, Any]:
    """The memory retriever (the chat's own fused search), user and conversation per request."""

    def search(query: str, config: RunnableConfig) -> list[Document]:
        try:
            query.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError("the query is not valid Unicode text: send UTF-8") from exc
        configurable = config.get("configurable", {})
        retriever = MemoryRetriever(
            search=memory,
            user_id=configurable["user_id"],
            conversation_id=configurable.get("conversation_id") or None,
        )
        return retriever.invoke(query, config)

    return RunnableLambda(search, name="memory_retriever")


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def check_request(request: Request) -> None:
    """Refuse what LangServe would answer with a 500, and require a key on every route.

    A ``POST`` (a run) also needs its user, as every route onto memory does; the ``GET``
    routes (schemas, the playground's page) read no one's memory and need only the key.
    Bodies must be labelled JSON, as on the API's other routes: LangServe reads any body as
    JSON, and a web page may POST ``text/plain``, form or multipart bodies to a local server
    without a CORS preflight.
    """
    services = get_services(request)
    if request.method != "POST":
        authenticate(services.settings, presented_key(request.headers))
        return
    resolve_user(request, services)
    content_type = request.headers.get("content-type", "")
    if not _is_json(content_type):
        label = content_type.split(";")[0].strip() or "nothing"
        raise HTTPException(
            status_code=415,
            detail=f"the body is labelled {label!r}: send JSON with "
            "'Content-Type: application/json'",
        )
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise HTTPException(
            status_code=400, detail=f"the body is not JSON in UTF-8 ({type(exc).__name__})"
        ) from exc
    if not isinstance(body, dict):
        raise HTTPException(status_code=422, detail="the body must be a JSON object")
    if "config" in body and body["config"] is None:
        raise HTTPException(status_code=422, detail="config must be an object: omit it or send {}")
    batch = request.url.path.endswith("/batch")
    if batch and not isinstance(body.get("inputs"), list):
        raise HTTPException(status_code=422, detail='batch takes {"inputs": [...]}')
    if batch and len(body["inputs"]) > MAX_BATCH:
        raise HTTPException(
            status_code=422, detail=f"a batch takes at most {MAX_BATCH} inputs: split it"
        )
    if "/retriever/" in request.url.path:
        return
    _check_chat(body, batch)


def _check_chat(body: dict[str, Any], batch: bool) -> None:
    """Refuse a chat input or option the chain would refuse, before anything is stored.

    Streams would fail after their 200 has gone out: LangServe reports an error raised in the
    chain as an event of a stream that already answered 200.
    """
    configs = body.get("config")
    inputs = body["inputs"] if batch else [body.get("input")]
    try:
        for config in configs if isinstance(configs, list) else [configs]:
            configurable = config.get("configurable") if isinstance(config, dict) else None
            if isinstance(configurable, dict):
                reply_options(configurable)  # a seed out of the model's range
        for item in inputs:
            user_text(item)
    except InvalidInputError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc


def mount(app: FastAPI, chat: LateBound, retriever: LateBound) -> None:
    """Add the LangServe routes (invoke, batch, stream, stream_log, stream_events, playground)."""
    add_routes(
        app,
        chat,
        path="/memory",
        per_req_config_modifier=config_modifier(required_conversation=True),
        enabled_endpoints=[
            "invoke",
            "batch",
            "stream",
            "stream_log",
            "stream_events",
            "playground",
            "input_schema",
            "output_schema",
            "config_schema",
            "config_hashes",
        ],
        dependencies=[Depends(check_request)],
    )
    add_routes(
        app,
        retriever,
        path="/memory/retriever",
        per_req_config_modifier=config_modifier(required_conversation=False),
        enabled_endpoints=["invoke", "batch", "input_schema", "output_schema", "config_schema"],
        dependencies=[Depends(check_request)],
    )


__all__ = ["LateBound", "MemoryChat", "chat_stand_in", "mount", "retriever_stand_in"]
