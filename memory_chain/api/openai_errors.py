"""Errors of the OpenAI-compatible routes, in OpenAI's shape.

``{"error": {"message", "type", "param", "code"}, "detail": message}``: the ``error`` object
is what the openai SDK and Open WebUI read, ``detail`` is what the API's other routes send.
Validation, authentication and library errors raised anywhere in these routes (their
dependencies included) are answered so by :class:`OpenAIErrors`; a stream that fails after
its status line went out ends with :func:`stream_error_event` and ``[DONE]``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from memory_chain.api.errors import headers_of, status_of
from memory_chain.api.openai_bodies import ErrorBody
from memory_chain.errors import (
    ContextOverflowError,
    LLMUnavailableError,
    MemoryChainError,
    ModelNotFoundError,
)
from memory_chain.services import Services
from memory_chain.tiers.sql.rows import storage_error

logger = logging.getLogger(__name__)

_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    503: "service_unavailable",
}

#: The error responses the chat routes document (each with OpenAI's error body).
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in [
        (
            400,
            "The message cannot fit the model's context window (code "
            "context_length_exceeded, with the numbers), or the model refused the request.",
        ),
        (401, "Missing or unknown API key."),
        (
            403,
            "A proxy key without the header naming its user (Open WebUI: "
            "ENABLE_FORWARD_USER_INFO_HEADERS=True).",
        ),
        (404, "Unknown model (code model_not_found)."),
        (422, "Malformed request."),
        (503, "The chat model or a store is unreachable; the message says what to start."),
    ]
}


def error_response(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    code: str | None = None,
    param: str | None = None,
) -> Response:
    """An error in OpenAI's shape, with the API's usual ``detail`` too."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    if code is not None:
        kind = "invalid_request_error"
    body = {
        "error": {"message": message, "type": kind, "param": param, "code": code or status},
        "detail": message,
    }
    return JSONResponse(body, status_code=status, headers=headers)


def _code_of(error: MemoryChainError) -> tuple[str | None, str | None]:
    """OpenAI's ``code`` and ``param`` of an error it has a code for."""
    if isinstance(error, ModelNotFoundError):
        return "model_not_found", "model"
    if isinstance(error, ContextOverflowError):
        return "context_length_exceeded", "messages"
    return None, None


def stream_error_event(error: Exception) -> str:
    """The server-sent event that reports a failure after the stream began, as OpenAI does."""
    code: str | None = None
    param: str | None = None
    error = storage_error(error) or error  # a driver error that passed no mapping
    if isinstance(error, MemoryChainError):
        status, message = status_of(error), str(error)
        code, param = _code_of(error)
    else:
        logger.error("chat completion stream failed", exc_info=error)
        status, message = 500, f"the reply failed ({type(error).__name__}): see the log"
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"message": message, "type": kind, "param": param, "code": code or status}
    return f"data: {json.dumps({'error': body}, ensure_ascii=False)}\n\n"


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


class OpenAIErrors(APIRoute):
    """Answers a router's errors (validation, auth, library) in OpenAI's error shape."""

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
                code, param = _code_of(exc)
                return error_response(status, message, headers_of(exc), code=code, param=param)

        return route
