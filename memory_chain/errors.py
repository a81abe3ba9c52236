"""Errors raised by memory_chain.

Bad arguments raise :class:`InvalidInputError` (a :class:`ValueError`); everything else that
the library raises derives from :class:`MemoryChainError`. Messages say what to do next. Only
the server turns these into HTTP responses.
"""

from __future__ import annotations


class MemoryChainError(Exception):
    """Base class of every error memory_chain raises on purpose."""


class InvalidInputError(MemoryChainError, ValueError):
    """An argument is malformed: an empty message, an unknown role, an oversize content."""


class ConversationNotFoundError(MemoryChainError, LookupError):
    """The conversation does not exist, or it belongs to another user.

    Both cases give the same error so that a caller cannot learn which ids others use.
    """

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"conversation {conversation_id!r} not found: check the id, and that it belongs "
            "to the calling user"
        )
        self.conversation_id = conversation_id


class FactNotFoundError(MemoryChainError, LookupError):
    """No remembered fact of the user has this id (or the fact is another user's)."""

    def __init__(self, fact_id: str) -> None:
        super().__init__(f"fact {fact_id!r} not found: list the user's facts with GET /v1/facts")
        self.fact_id = fact_id


class StorageError(MemoryChainError):
    """A store failed (database locked for too long, schema missing, server unreachable)."""


class SchemaNotReadyError(StorageError):
    """The SQL schema is missing or older than this version of memory_chain."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"the memory database schema is not ready ({detail}): run `memory-chain migrate` "
            "or call memory_chain.tiers.sql.migrate.upgrade(engine) first"
        )


class VectorStoreError(StorageError):
    """Tier 3 failed: the vector engine rejected an operation."""


class VectorStoreUnavailableError(VectorStoreError):
    """Tier 3 cannot be reached (server down, folder locked by another process).

    Turns stay queued in tier 2 and are embedded when it is back (``memory-chain reindex``
    or the next backfill).
    """


class EmbeddingModelError(MemoryChainError):
    """The embedding model cannot be loaded or built (an ONNX graph that fails to export)."""
