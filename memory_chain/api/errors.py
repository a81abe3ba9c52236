"""Mapping memory_chain errors to HTTP responses: a JSON body that says what to fix."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from memory_chain.errors import (
    ConversationNotFoundError,
    InvalidInputError,
    MemoryChainError,
    StorageError,
)

logger = logging.getLogger(__name__)

_STATUS: list[tuple[type[MemoryChainError], int]] = [
    (InvalidInputError, 422),
    (ConversationNotFoundError, 404),
    (StorageError, 503),
]


def status_of(error: MemoryChainError) -> int:
    """HTTP status for a library error."""
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 500


def install_error_handlers(app: FastAPI) -> None:
    """Answer library errors with ``{"detail": message}`` and a fitting status."""

    async def handle(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, MemoryChainError)
        status = status_of(error)
        if status >= 500:
            logger.error("request failed: %s", error)
        return JSONResponse({"detail": str(error)}, status_code=status)

    app.add_exception_handler(MemoryChainError, handle)
