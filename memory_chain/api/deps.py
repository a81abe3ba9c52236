"""FastAPI dependencies: the API's one door onto the running services.

Routes declare what they use as ``Annotated`` aliases (the FastAPI full-stack template's
style): the calling user (:data:`CurrentUser`), the memory (:data:`MemoryDep`, the
:class:`~memory_chain.manager.MemoryManager` that reaches every tier), one of the caller's
conversations (:data:`OwnedConversation`), consolidation (:data:`ConsolidationDep`,
:data:`SummarizerDep`) and the settings. Only the health, metrics and chat routes take the
whole :class:`~memory_chain.services.Services`: the first two report on all of it, and the
chat is made of its chain, models and memory.

Who the caller is:
    Decided by :func:`memory_chain.identity.identify`, the rule every door shares (see
    there): without keys the server is single-tenant and trusts the caller (the user header
    ``X-User-Id`` or Open WebUI's ``X-OpenWebUI-User-Id``, else ``default_user_id``); with
    ``api_keys`` (or ``proxy_api_keys``) every request needs a key (``Authorization: Bearer
    <key>`` as the openai SDK sends, or ``X-API-Key``): an ``api_keys`` key alone decides the
    user, a ``proxy_api_keys`` key needs the user header and acts as ``<namespace>:<user>``
    (403 without it, unless ``proxy_shared_user``). Refusals are library errors the app
    answers (401, 403, 422). :data:`Authenticated` checks only the key, for routes that read
    no one's memory (the model list).

Which conversations are the caller's:
    Conversation ids are each user's own: ``trip`` of one user and ``trip`` of another are two
    conversations, and every store call carries the user with the id. A route about an
    existing conversation takes :data:`OwnedConversation`: the caller's conversation of the
    path's id, or 404 when the caller has none of that id (whatever other users have, so ids
    can neither be probed nor taken). Routes that write (adding turns, chatting, LangServe's
    ``/memory``) create the conversation when it is missing, so they need only the user.

Blocking work:
    A route or dependency that reads or writes a store is a plain ``def``: FastAPI runs it in
    its threadpool, one thread hop for the whole function. Those that do no I/O are ``async
    def``, since a plain ``def`` one would cost a hop per request for a dictionary lookup or a
    header check. The chat route is the one ``async def`` route with blocking steps, because
    it streams the model's reply; it runs them with LangChain's ``run_in_executor``, as the
    chat chain's own steps do.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from memory_chain.config import MemorySettings
from memory_chain.consolidation import ConsolidationService
from memory_chain.errors import AuthenticationError, ConversationNotFoundError, LLMUnavailableError
from memory_chain.identity import Caller, authenticate, identify, match_key, presented_key
from memory_chain.manager import MemoryManager
from memory_chain.schemas import ID_PATTERN, ConversationInfo
from memory_chain.services import Services


def get_services(request: Request) -> Services:
    """The running app's services."""
    services: Services = request.app.state.services
    return services


async def services_dependency(request: Request) -> Services:
    """FastAPI dependency: the running app's services."""
    return get_services(request)


ServicesDep = Annotated[Services, Depends(services_dependency)]


def resolve_user(request: Request, services: Services, *, named_user: object = None) -> str:
    """The user a request acts as (:func:`~memory_chain.identity.identify`).

    Args:
        request: The request (its key and user headers).
        services: The running services (their settings).
        named_user: A user the request names in its body (LangServe's configurable).

    Raises:
        AuthenticationError: Keys are configured and none (or a wrong one) is given (401).
        IdentityRefusedError: A proxy key without a user header, or a named user other than
            the key's (403).
        InvalidInputError: A malformed user id (422).
    """
    caller = Caller.from_headers(request.headers, named_user=named_user)
    return identify(services.settings, caller)


async def metrics_access(request: Request, services: ServicesDep) -> None:
    """FastAPI dependency of ``/metrics``: its key, or any API key, when keys are set.

    Raises:
        AuthenticationError: When a key is needed and none (or a wrong one) is given (401).
    """
    settings = services.settings
    metrics_key = settings.metrics_api_key
    if not settings.keys_required and metrics_key is None:
        return
    accepted = {**settings.api_keys, **settings.proxy_api_keys}
    if metrics_key is not None:
        accepted[metrics_key.get_secret_value()] = "metrics"
    presented = presented_key(request.headers)
    if presented is None or match_key(presented, accepted) is None:
        raise AuthenticationError(
            "missing or unknown key: /metrics takes 'Authorization: Bearer <key>' with "
            "metrics_api_key or an API key"
        )


async def current_user(request: Request, services: ServicesDep) -> str:
    """FastAPI dependency: the calling user."""
    return resolve_user(request, services)


async def key_holder(request: Request, services: ServicesDep) -> None:
    """FastAPI dependency: a valid key when keys are set, whoever the user is."""
    authenticate(services.settings, presented_key(request.headers))


Authenticated = Annotated[None, Depends(key_holder)]

CurrentUser = Annotated[str, Depends(current_user)]


async def memory_dependency(services: ServicesDep) -> MemoryManager:
    """FastAPI dependency: the memory manager, the routes' way into every tier."""
    return services.manager


MemoryDep = Annotated[MemoryManager, Depends(memory_dependency)]


async def settings_dependency(services: ServicesDep) -> MemorySettings:
    """FastAPI dependency: the server's settings."""
    return services.settings


SettingsDep = Annotated[MemorySettings, Depends(settings_dependency)]

ConversationId = Annotated[
    str,
    Path(
        pattern=f"^{ID_PATTERN.pattern}$",
        description="1-128 letters, digits and '._:@-', starting with a letter or digit.",
    ),
]


def owned_conversation(
    conversation_id: ConversationId, memory: MemoryDep, user: CurrentUser
) -> ConversationInfo:
    """FastAPI dependency: the caller's conversation named by the path (one SQL lookup).

    Raises:
        ConversationNotFoundError: When the caller has no conversation of that id (404).
    """
    info = memory.conversation(conversation_id, user)
    if info is None:
        raise ConversationNotFoundError(conversation_id)
    return info


OwnedConversation = Annotated[ConversationInfo, Depends(owned_conversation)]


async def consolidation_dependency(services: ServicesDep) -> ConsolidationService | None:
    """FastAPI dependency: the consolidation service; ``None`` on a server without an LLM."""
    return services.consolidation


ConsolidationDep = Annotated[ConsolidationService | None, Depends(consolidation_dependency)]


def summarizer(services: ServicesDep) -> ConsolidationService:
    """FastAPI dependency: consolidation, when an LLM can summarize now.

    Asks a model that was missing at start-up whether it is back (a short HTTP request).

    Raises:
        LLMUnavailableError: When the server runs without an LLM, or it cannot be reached
            (503, with what to start).
    """
    consolidation, models = services.consolidation, services.models
    if consolidation is None or models is None:
        raise LLMUnavailableError(
            "this server runs without an LLM, so it cannot summarize: start it with one "
            "(Ollama at MEMORY_CHAIN_OLLAMA_BASE_URL, or MEMORY_CHAIN_LLM_FALLBACK=embedded); "
            "the turns stay stored and unsummarized"
        )
    if not models.reachable():
        raise LLMUnavailableError(
            f"no LLM to summarize with ({models.detail}); the turns stay stored and are "
            "summarized once it is reachable"
        )
    return consolidation


SummarizerDep = Annotated[ConsolidationService, Depends(summarizer)]
