"""FastAPI dependencies: the running services and the calling user.

Without ``api_keys`` the server is single-tenant: the user comes from ``X-User-Id`` or Open
WebUI's forwarded ``X-OpenWebUI-User-Id`` header, else ``default_user_id``. With ``api_keys``
every request needs a key (``Authorization: Bearer <key>`` as the openai SDK sends, or
``X-API-Key``), and the key alone decides the user: headers cannot impersonate anyone.
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


ServicesDep = Annotated[Services, Depends(get_services)]


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
    if settings.api_keys:
        presented = _presented_key(request)
        if presented:
            for key, user_id in settings.api_keys.items():
                if hmac.compare_digest(presented.encode(), key.encode()):
                    return user_id
        raise HTTPException(
            status_code=401,
            detail="missing or unknown API key: send 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    for header in USER_HEADERS:
        value = request.headers.get(header)
        if value:
            try:
                return validate_id(value, f"user id in {header}")
            except InvalidInputError as exc:
                raise HTTPException(status_code=422, detail=str(exc)) from exc
    return settings.default_user_id


def current_user(request: Request, services: ServicesDep) -> str:
    """FastAPI dependency: the calling user."""
    return resolve_user(request, services)


CurrentUser = Annotated[str, Depends(current_user)]
