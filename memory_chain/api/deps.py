"""FastAPI dependencies: the running services and the calling user.

Without keys the server is single-tenant: the user comes from ``X-User-Id`` or Open WebUI's
forwarded ``X-OpenWebUI-User-Id`` header, else ``default_user_id``. With ``api_keys`` (or
``proxy_api_keys``) every request needs a key (``Authorization: Bearer <key>`` as the openai
SDK sends, or ``X-API-Key``). An ``api_keys`` key alone decides the user: headers cannot
impersonate anyone. A ``proxy_api_keys`` key belongs to a trusted front end serving many
users (Open WebUI): the user header names its user, inside the key's namespace
(``<namespace>:<user>``), so a front end's users are kept apart from each other and can never
act as a direct key's user or another front end's.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from memory_chain.errors import InvalidInputError
from memory_chain.schemas import validate_id
from memory_chain.services import Services

USER_HEADERS = ("x-user-id", "x-openwebui-user-id")


def get_services(request: Request) -> Services:
    """The running app's services."""
    services: Services = request.app.state.services
    return services


# The dependencies below are ``async def`` although they do no I/O: FastAPI runs a plain
# ``def`` dependency in its threadpool, a thread hop per dependency and request (two on every
# chat request) for a dictionary lookup or a header check.


async def services_dependency(request: Request) -> Services:
    """FastAPI dependency: the running app's services."""
    return get_services(request)


ServicesDep = Annotated[Services, Depends(services_dependency)]


def _presented_key(request: Request) -> str | None:
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key")


def resolve_user(request: Request, services: Services) -> str:
    """The user a request acts as (see the module docstring).

    Raises:
        HTTPException: 401 when keys are configured and none (or a wrong one) is given;
            422 for a malformed user header.
    """
    settings = services.settings
    if not settings.keys_required:
        return _header_user(request) or settings.default_user_id
    presented = _presented_key(request)
    if presented:
        user_id = _match(presented, settings.api_keys)
        if user_id is not None:
            return user_id
        namespace = _match(presented, settings.proxy_api_keys)
        if namespace is not None:
            forwarded = _header_user(request)
            if forwarded is None:
                return namespace
            try:
                return validate_id(f"{namespace}:{forwarded}", "user id")
            except InvalidInputError as exc:
                detail = f"the user header's id is too long once namespaced: {exc}"
                raise HTTPException(status_code=422, detail=detail) from exc
    raise HTTPException(
        status_code=401,
        detail="missing or unknown API key: send 'Authorization: Bearer <key>'",
        headers={"WWW-Authenticate": "Bearer"},
    )


def _match(presented: str, keys: dict[str, str]) -> str | None:
    """The value of the key equal to ``presented`` (compared in constant time), or ``None``."""
    found = None
    for key, value in keys.items():
        if hmac.compare_digest(presented.encode(), key.encode()):
            found = value
    return found


def _header_user(request: Request) -> str | None:
    """The user named by a user header, validated; ``None`` without one."""
    for header in USER_HEADERS:
        value = request.headers.get(header)
        if value:
            try:
                return validate_id(value, f"user id in {header}")
            except InvalidInputError as exc:
                raise HTTPException(status_code=422, detail=str(exc)) from exc
    return None


async def metrics_access(request: Request, services: ServicesDep) -> None:
    """FastAPI dependency of ``/metrics``: its key, or any API key, when keys are set.

    Raises:
        HTTPException: 401 when a key is needed and none (or a wrong one) is given.
    """
    settings = services.settings
    metrics_key = settings.metrics_api_key
    if not settings.keys_required and metrics_key is None:
        return
    accepted = {**settings.api_keys, **settings.proxy_api_keys}
    if metrics_key is not None:
        accepted[metrics_key.get_secret_value()] = "metrics"
    presented = _presented_key(request)
    if presented and _match(presented, accepted) is not None:
        return
    raise HTTPException(
        status_code=401,
        detail="missing or unknown key: /metrics takes 'Authorization: Bearer <key>' with "
        "metrics_api_key or an API key",
        headers={"WWW-Authenticate": "Bearer"},
    )


async def current_user(request: Request, services: ServicesDep) -> str:
    """FastAPI dependency: the calling user."""
    return resolve_user(request, services)


CurrentUser = Annotated[str, Depends(current_user)]
