"""Tier 3 as a LangChain retriever: the turns most similar to a query.

Every search is filtered by user (always), and optionally by conversation, role, time range
and tags. Each :class:`~langchain_core.documents.Document` holds the turn's content, and in its
metadata the turn's tier-3 payload plus ``score`` (cosine similarity: **higher is more similar**,
at most 1.0), ``tier`` (``"tier3"``) and ``id`` (the point id).

Example:
    >>> retriever = TurnRetriever(semantic=SemanticSearch(index, embeddings), user_id="ana", k=5)
    ... # doctest: +SKIP
    >>> docs = retriever.invoke("when do we fly?", conversation_id="trip")  # doctest: +SKIP
    >>> docs[0].metadata["turn_number"], docs[0].metadata["score"]  # doctest: +SKIP
    (3, 0.71)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, Field

from memory_chain.errors import InvalidInputError
from memory_chain.schemas import as_utc, validate_id
from memory_chain.tiers.vectors.index import VectorFilter, VectorHit
from memory_chain.tiers.vectors.semantic import SemanticSearch

_SEARCH_ARGS = frozenset(
    {"k", "conversation_id", "roles", "since", "until", "score_threshold", "tags"}
)


def hit_to_document(hit: VectorHit) -> Document:
    """A search hit as a Document (content, payload, score, tier, id)."""
    metadata: dict[str, Any] = hit.payload.to_dict()
    metadata.update(score=hit.score, tier="tier3", id=hit.id)
    return Document(page_content=hit.payload.content, metadata=metadata, id=hit.id)


class TurnRetriever(BaseRetriever):
    """Semantic search over one user's stored turns.

    Per-call arguments (``retriever.invoke(query, k=3, conversation_id="c1")``) override
    the fields of the same name: ``k``, ``conversation_id``, ``roles``, ``since``, ``until``,
    ``score_threshold``. The user cannot be overridden per call.

    Args:
        semantic: Tier 3's search (a :class:`SemanticSearch` over an opened index, or the
            server's whole :class:`~memory_chain.tiers.vectors.tier.Tier3`).
        user_id: Whose turns are searched.
        k: Number of turns to return.
        conversation_id: Restrict to one conversation.
        roles: Restrict to these roles (``user``, ``assistant``, ``system``).
        since: Only turns at or after this time.
        until: Only turns at or before this time.
        score_threshold: Drop hits less similar than this.
        tags: Only turns with any of these tags (``question``, ``code``, ``technical``,
            ``fact``: see :mod:`memory_chain.tiers.vectors.tags`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    semantic: SemanticSearch
    user_id: str
    k: int = Field(default=5, ge=1, le=1000)
    conversation_id: str | None = None
    roles: list[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    score_threshold: float | None = None
    tags: list[str] | None = None

    def _search_args(self, overrides: dict[str, Any]) -> tuple[VectorFilter, int, float | None]:
        unknown = set(overrides) - _SEARCH_ARGS
        if unknown:
            raise InvalidInputError(
                f"unknown search arguments {sorted(unknown)}: use {sorted(_SEARCH_ARGS)}"
            )
        args = {name: getattr(self, name) for name in _SEARCH_ARGS} | overrides
        k = args["k"]
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
            raise InvalidInputError(f"k must be an integer from 1 to 1000, got {k!r}")
        conversation_id = args["conversation_id"]
        if conversation_id is not None:
            validate_id(conversation_id)
        since, until, roles, tags = args["since"], args["until"], args["roles"], args["tags"]
        if isinstance(roles, str):
            raise InvalidInputError(f"roles must be a list of role names, got {roles!r}")
        if isinstance(tags, str):
            raise InvalidInputError(f"tags must be a list of tag names, got {tags!r}")
        where = VectorFilter(
            user_id=validate_id(self.user_id, "user id"),
            conversation_id=conversation_id,
            roles=tuple(roles) if roles is not None else None,
            since=as_utc(since) if since else None,
            until=as_utc(until) if until else None,
            tags=tuple(tags) if tags is not None else None,
        )
        return where, k, args["score_threshold"]

    def search(self, query: str, **overrides: Any) -> list[Document]:
        """Embed ``query`` and return the most similar turns, best first."""
        where, k, threshold = self._search_args(overrides)
        if not query.strip():
            raise InvalidInputError("query is empty: send some text to search for")
        hits = self.semantic.find(query, where, k)
        return [hit_to_document(hit) for hit in hits if threshold is None or hit.score >= threshold]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self.search(query, **kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        # Not async I/O: the same search in a worker thread, as langchain-core's default runs
        # it, but that default takes no per-call arguments (``ainvoke(query, k=3)`` would
        # raise TypeError), so it is overridden to pass them on.
        return await run_in_executor(None, self.search, query, **kwargs)
