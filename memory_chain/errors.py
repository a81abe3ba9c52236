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


class AuthenticationError(MemoryChainError):
    """The server has API keys and the request presents none of them (HTTP 401)."""


class IdentityRefusedError(MemoryChainError, PermissionError):
    """The key is valid, but the request cannot act as the user it would need (HTTP 403).

    A proxy key without the header naming its user, or a request naming a user other than its
    key's (see :mod:`memory_chain.identity`).
    """


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


class FactLimitError(InvalidInputError):
    """The user has as many current facts as memory keeps per user: no fact was added.

    Answered 409 over HTTP (the same request succeeds once the user has room); a tool error
    over MCP; raised by a LangGraph store's ``put`` (a ``ValueError``). Learning at
    consolidation skips the fact and logs it.

    Attributes:
        user_id: Whose facts.
        limit: The most current facts a user may have (``memory_max_facts_per_user``).
        current: How many the user has.
    """

    def __init__(self, user_id: str, limit: int, current: int, adding: int = 1) -> None:
        if adding == 1:
            said = f"has {current:,} current facts, the most memory keeps per user"
        else:
            said = (
                f"has {current:,} current facts; {adding:,} more would pass the {limit:,} "
                "memory keeps per user"
            )
        super().__init__(
            f"user {user_id!r} {said} (memory_max_facts_per_user): nothing was added. Dismiss "
            "facts that no longer hold (DELETE /v1/facts/{id}, MCP forget, a store delete, or "
            '"forget ..." in a chat), or raise MEMORY_CHAIN_MEMORY_MAX_FACTS_PER_USER'
        )
        self.user_id = user_id
        self.limit = limit
        self.current = current


class StorageError(MemoryChainError):
    """A store failed (database locked for too long, schema missing, server unreachable)."""


class StorageConflictError(StorageError):
    """A write collided with what is stored: a key taken, often by a concurrent writer.

    Nothing of the write is stored; sending the request again usually succeeds, or says what
    is in the way.
    """


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


class ContextOverflowError(InvalidInputError):
    """The user's message (with the client's instructions) cannot fit the model's window.

    Attributes:
        message_tokens: Tokens of the message.
        system_tokens: Tokens of the instructions that must come with it.
        window: The model's context window.
        reserve: Tokens kept for the reply.
        limit: The most tokens the message could have.
    """

    def __init__(
        self, *, model: str, message_tokens: int, system_tokens: int, window: int, reserve: int
    ) -> None:
        limit = max(window - reserve - system_tokens, 0)
        with_system = f" and the instructions {system_tokens:,}" if system_tokens else ""
        super().__init__(
            f"the message has {message_tokens:,} tokens{with_system}, but model {model!r} reads "
            f"{window:,} tokens in all (its context window), {reserve:,} of them kept for the "
            f"reply: a message can have at most about {limit:,} tokens here. Shorten or split "
            "the message, ask for a shorter reply (max_tokens), or choose a model with a "
            "larger window (GET /v1/models)"
        )
        self.message_tokens = message_tokens
        self.system_tokens = system_tokens
        self.window = window
        self.reserve = reserve
        self.limit = limit


class LLMUnavailableError(MemoryChainError):
    """The chat model could not be reached or failed (the service is degraded)."""


class ModelNotFoundError(MemoryChainError, LookupError):
    """A request names a model the LLM server does not have.

    Attributes:
        model: The name asked for.
    """

    def __init__(self, model: str, available: list[str] | None = None) -> None:
        shown = f" ({', '.join(repr(name) for name in available[:10])})" if available else ""
        super().__init__(
            f"the model {model!r} does not exist here: use one of GET /v1/models{shown}"
        )
        self.model = model


class ModelRequestError(InvalidInputError):
    """The chat model refused the request as malformed (a client error, not an outage)."""
