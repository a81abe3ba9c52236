"""Memory retrieval as a LangChain retriever: the same fused search a chat gets.

Each :class:`~langchain_core.documents.Document` holds an item's content, and in its metadata
``user_id``, ``tier`` (``"tier2"`` or ``"tier3"``: which tier first found it), ``sources``
(every search that found it), ``kind`` (``"turn"`` or ``"summary"``), ``conversation_id``,
``turn_number`` (turns) or ``turn_range`` (summaries), ``role``, ``timestamp`` (RFC 3339,
UTC), ``tags`` and ``score`` (the fused score: **higher is more relevant**, comparable within one
result list).

Example:
    >>> retriever = MemoryRetriever(search=manager, user_id="ana", k=5)  # doctest: +SKIP
    >>> docs = retriever.invoke("when do we fly?", conversation_id="trip")  # doctest: +SKIP
    >>> docs[0].metadata["sources"]  # doctest: +SKIP
    ['tier2-turns', 'tier3']
"""

from __future__ import annotations

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
from memory_chain.retrieval.search import Finder
from memory_chain.schemas import MemoryItem, as_utc, validate_id
from memory_chain.tiers.vectors.tags import turn_tags

_SEARCH_ARGS = frozenset({"k", "conversation_id", "include_archived", "tags"})


def item_to_document(item: MemoryItem, user_id: str) -> Document:
    """A memory item of ``user_id`` as a Document (content, where it came from, score)."""
    metadata: dict[str, Any] = {
        "user_id": user_id,
        "tier": item.tier,
        "sources": list(item.sources),
        "kind": item.kind,
        "conversation_id": item.conversation_id,
        "turn_number": item.turn_number,
        "turn_range": list(item.turn_range) if item.turn_range else None,
        "role": item.role,
        "timestamp": as_utc(item.timestamp).isoformat(),
        "score": item.score,
        "tags": list(turn_tags(item.role or "", item.content)),
    }
    return Document(page_content=item.content, metadata=metadata)


class MemoryRetriever(BaseRetriever):
    """The fused memory search of one user, as a retriever.

    Per-call arguments (``retriever.invoke(query, k=3, conversation_id="c1")``) override the
    fields of the same name; the user cannot be overridden per call.

    Args:
        search: What searches: the memory manager (its ``find`` is every door's
            retrieval, turns that stated a retired fact noted or left out) or a bare
            :class:`~memory_chain.retrieval.search.MemorySearch`.
        user_id: Whose memories are searched.
        k: Number of items to return.
        conversation_id: Restrict to one conversation (``None``: all of the user's).
        include_archived: Search archived conversations too (purged ones are never found).
        tags: Only items with any of these tags (``question``, ``code``, ``technical``,
            ``fact``); each document's metadata lists its ``tags``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    search: Finder
    user_id: str
    k: int = Field(default=5, ge=1, le=1000)
    conversation_id: str | None = None
    include_archived: bool = False
    tags: list[str] | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        unknown = set(kwargs) - _SEARCH_ARGS
        if unknown:
            raise InvalidInputError(
                f"unknown search arguments {sorted(unknown)}: use {sorted(_SEARCH_ARGS)}"
            )
        k = kwargs.get("k", self.k)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
            raise InvalidInputError(f"k must be an integer from 1 to 1000, got {k!r}")
        conversation_id = kwargs.get("conversation_id", self.conversation_id)
        if conversation_id is not None:
            validate_id(conversation_id)
        if not query.strip():
            raise InvalidInputError("query is empty: send some text to search for")
        include_archived = kwargs.get("include_archived", self.include_archived)
        if not isinstance(include_archived, bool):
            raise InvalidInputError(
                f"include_archived must be true or false, got {include_archived!r}"
            )
        tags = kwargs.get("tags", self.tags)
        if tags is not None and (
            isinstance(tags, str) or not all(isinstance(tag, str) for tag in tags)
        ):
            raise InvalidInputError(f"tags must be a list of tag names, got {tags!r}")
        user_id = validate_id(self.user_id, "user id")
        found = self.search.find(
            query,
            user_id=user_id,
            conversation_id=conversation_id,
            limit=k,
            include_archived=include_archived,
            tags=tags,
        )
        return [item_to_document(item, user_id) for item in found.items]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        # Not async I/O: the same search in a worker thread, as langchain-core's default runs
        # it, but that default takes no per-call arguments (``ainvoke(query, k=3)`` would
        # raise TypeError), so it is overridden to pass them on.
        return await run_in_executor(
            None, self._get_relevant_documents, query, run_manager=run_manager.get_sync(), **kwargs
        )
