"""qdrant-client's failures as this package's errors: unreachable, or refused.

qdrant-client raises different exceptions for one failure depending on the transport (REST
through httpx, gRPC) and the mode (server, or the local modes, which raise plain
``ValueError``/``KeyError``/``RuntimeError``). :func:`client_errors` maps them all: a server
that cannot be reached (connection refused, timeout, 502/503/504, gRPC UNAVAILABLE) raises
:class:`~memory_chain.errors.VectorStoreUnavailableError`, so that turns stay queued in tier
2; anything the server refuses raises :class:`~memory_chain.errors.VectorStoreError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import grpc  # type: ignore[import-untyped]
import httpx
from pydantic import ValidationError
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memory_chain.errors import MemoryChainError, VectorStoreError, VectorStoreUnavailableError

_UNAVAILABLE_HTTP = frozenset({502, 503, 504})
_UNAVAILABLE_GRPC = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def unreachable(where: str, exc: BaseException) -> VectorStoreUnavailableError:
    """The error saying that the Qdrant at ``where`` cannot be reached, and what to do."""
    return VectorStoreUnavailableError(
        f"Qdrant at {where} is unreachable: {exc!s}. Start the server or check "
        "qdrant_url and the API key; turns stay in tier 2 until it is back"
    )


@contextlib.contextmanager
def client_errors(where: str, collection: str, action: str) -> Iterator[None]:
    """Map the client's errors raised in the block to ours.

    Args:
        where: The server (URL, host or local path), as messages name it.
        collection: The collection the block works on.
        action: What the block does, as in "refused to ``action`` collection ...".

    Raises:
        VectorStoreUnavailableError: The server cannot be reached.
        VectorStoreError: The server (or the local mode) refused the call.
    """
    try:
        yield
    except MemoryChainError:
        raise
    except ResponseHandlingException as exc:
        # Raised around every failed send (connect, timeout); also when parsing a reply.
        if isinstance(exc.source, ValidationError):
            raise VectorStoreError(
                f"Qdrant at {where} sent a reply this qdrant-client cannot read "
                f"({exc.source}): use a server version matching qdrant-client"
            ) from exc
        raise unreachable(where, exc.source) from exc
    except httpx.TransportError as exc:
        raise unreachable(where, exc) from exc
    except UnexpectedResponse as exc:
        if exc.status_code in _UNAVAILABLE_HTTP:
            raise unreachable(where, exc) from exc
        raise VectorStoreError(
            f"Qdrant at {where} refused to {action} collection {collection!r}: {exc}"
        ) from exc
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        if code in _UNAVAILABLE_GRPC:
            raise unreachable(where, exc) from exc
        raise VectorStoreError(
            f"Qdrant at {where} refused to {action} collection {collection!r}: {exc}"
        ) from exc
    except (ValueError, KeyError, RuntimeError) as exc:
        # Local mode raises these: a missing collection, a closed client.
        raise VectorStoreError(
            f"Qdrant ({where}) could not {action} collection {collection!r}: {exc}"
        ) from exc
