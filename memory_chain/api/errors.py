"""Errors as HTTP: JSON bodies that say what to fix, and a request-size limit.

Library errors map to statuses (bad input 422; a message too long for the model's window, or
a request the model refuses, 400; no API key or an unknown one 401, with ``WWW-Authenticate:
Bearer``; a valid key that cannot act as the user it needs 403; an unknown or foreign
conversation, an unknown model 404; a write that collided with a stored row, or a fact past
the user's limit of current facts, 409; a store or the LLM down 503). A database error that
reaches a route without passing tier 2's mapping is mapped the same way
(:func:`~memory_chain.tiers.sql.rows.storage_error`), so bad input never answers 500.
Oversize bodies get 413 before they are read whole.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_chain.consolidation import ConsolidationError
from memory_chain.errors import (
    AuthenticationError,
    ContextOverflowError,
    ConversationNotFoundError,
    FactLimitError,
    FactNotFoundError,
    IdentityRefusedError,
    InvalidInputError,
    LLMUnavailableError,
    MemoryChainError,
    ModelNotFoundError,
    ModelRequestError,
    StorageConflictError,
    StorageError,
)
from memory_chain.tiers.sql.rows import storage_error

logger = logging.getLogger(__name__)

#: FastAPI's answer to a body it cannot decode (not UTF-8, nested too deeply for the parser).
FASTAPI_BODY_ERROR = "There was an error parsing the body"
#: What the API answers instead: what to fix.
BODY_ERROR = (
    "the body could not be read as JSON (not UTF-8, or nested too deeply): send a JSON object "
    "encoded in UTF-8"
)

_STATUS: list[tuple[type[MemoryChainError], int]] = [
    (AuthenticationError, 401),
    # 403, not 400: the request is well formed and its key valid, but the key alone may not
    # act as anyone; only the front end's settings (or memory_chain's) can change that.
    (IdentityRefusedError, 403),
    (ContextOverflowError, 400),
    (ModelRequestError, 400),
    # 409, not 422: the request is well formed; the user's facts are at their limit, and the
    # same request succeeds once some are dismissed.
    (FactLimitError, 409),
    (InvalidInputError, 422),
    (ModelNotFoundError, 404),
    (ConversationNotFoundError, 404),
    (FactNotFoundError, 404),
    (LLMUnavailableError, 503),
    (ConsolidationError, 503),
    (StorageConflictError, 409),
    (StorageError, 503),
]


def status_of(error: MemoryChainError) -> int:
    """HTTP status for a library error."""
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 500


def headers_of(error: MemoryChainError) -> dict[str, str] | None:
    """Response headers a library error's answer carries (the scheme a 401 asks for)."""
    return {"WWW-Authenticate": "Bearer"} if isinstance(error, AuthenticationError) else None


def install_error_handlers(app: FastAPI) -> None:
    """Answer library errors with ``{"detail": message}`` and a fitting status."""

    async def handle(_request: Request, error: Exception) -> JSONResponse:
        status = status_of(error) if isinstance(error, MemoryChainError) else 500
        if status >= 500:
            logger.error("request failed: %s", error)
        headers = headers_of(error) if isinstance(error, MemoryChainError) else None
        return JSONResponse({"detail": str(error)}, status_code=status, headers=headers)

    app.add_exception_handler(MemoryChainError, handle)

    async def driver(request: Request, error: Exception) -> JSONResponse:
        mapped = storage_error(error)
        if mapped is None:  # a misuse of SQLAlchemy (a bug), not the database's answer
            logger.error("request failed: %r", error)
            return JSONResponse({"detail": "internal error (logged)"}, status_code=500)
        return await handle(request, mapped)

    app.add_exception_handler(SQLAlchemyError, driver)

    async def invalid(_request: Request, error: Exception) -> Response:
        from fastapi.encoders import jsonable_encoder

        if isinstance(error, RequestValidationError):
            errors = error.errors()
        elif isinstance(error, ValidationError):
            errors = error.errors(include_url=False, include_context=False)
        else:
            errors = []
        body = json.dumps({"detail": jsonable_encoder(errors)})  # ASCII: lone surrogates escaped
        return Response(body, status_code=422, media_type="application/json")

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(ValidationError, invalid)

    async def http_error(request: Request, error: Exception) -> Response:
        from fastapi.exception_handlers import http_exception_handler

        if isinstance(error, StarletteHTTPException) and error.detail == FASTAPI_BODY_ERROR:
            error = StarletteHTTPException(error.status_code, BODY_ERROR, error.headers)
        return await http_exception_handler(request, error)  # type: ignore[arg-type]

    app.add_exception_handler(StarletteHTTPException, http_error)


class BodySizeLimit:
    """ASGI middleware: 413 for request bodies over the limit (declared or streamed).

    Args:
        app: The wrapped app.
        max_bytes: The limit, or a function returning it (read per request, so settings
            read at start-up apply).
    """

    def __init__(self, app: ASGIApp, max_bytes: int | Callable[[], int]) -> None:
        self.app = app
        self._limit = max_bytes

    @property
    def max_bytes(self) -> int:
        """The current limit."""
        return self._limit() if callable(self._limit) else self._limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, cutting it off with 413 past the limit."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLargeError
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLargeError:
            if not started:
                await self._too_large(send)

    async def _too_large(self, send: Send) -> None:
        body = json.dumps(
            {"detail": f"request body over {self.max_bytes:,} bytes: send less"}
        ).encode()
        headers: list[Any] = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class _TooLargeError(StarletteHTTPException):
    """Raised from ``receive`` past the limit.

    An HTTP error, so that FastAPI's body parsing passes it on (it turns other exceptions
    into 400) and it is answered 413.
    """

    def __init__(self) -> None:
        super().__init__(status_code=413, detail="request body too large: send less")
