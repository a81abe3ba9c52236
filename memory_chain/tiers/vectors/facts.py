"""User facts: what a user asked to remember, searchable from all their conversations.

Facts live in their own collection (``user_facts`` by default) with the same payload as turns
(the turn that said "remember this"), so the same :class:`VectorIndex` backends serve them.

A fact is a user turn that asks to be remembered (:data:`EXPLICIT_SAVE`). It is derived from
the stored turn, so it is as durable as the turn: the tier-3 backfill files it while it embeds
the turn from the outbox, and the turn leaves the outbox only once both are flushed. A
"remember this" said while the vector store is down (or just before a crash) waits in tier 2
with its turn, and a reindex or an import rebuilds the facts from the turns.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from langchain_core.embeddings import Embeddings

from memory_chain.schemas import Turn
from memory_chain.tiers.vectors.index import (
    TurnPayload,
    VectorFilter,
    VectorHit,
    VectorIndex,
    VectorPoint,
    point_id,
)

#: User messages that ask to remember something.
EXPLICIT_SAVE = re.compile(
    r"\b(remember (this|that)|please remember|don'?t forget|do not forget|keep in mind|"
    r"note (this|that) down|save this)\b",
    re.IGNORECASE,
)


def is_explicit_save(turn: Turn) -> bool:
    """Whether a turn is a user's request to remember something."""
    return turn.role == "user" and EXPLICIT_SAVE.search(turn.content) is not None


class UserFacts:
    """Stores and finds remembered facts per user.

    Args:
        index: An index on the facts collection (opened by the caller).
        embeddings: The embedding model.
        is_fact: Which turns are facts.
    """

    def __init__(
        self,
        index: VectorIndex,
        embeddings: Embeddings,
        *,
        is_fact: Callable[[Turn], bool] = is_explicit_save,
    ) -> None:
        self.index = index
        self.embeddings = embeddings
        self.is_fact = is_fact

    def open(self) -> None:
        """Open (or create) the facts collection."""
        self.index.open()

    def close(self) -> None:
        """Close the facts collection."""
        self.index.close()

    def flush(self) -> None:
        """Make every stored fact durable."""
        self.index.flush()

    def delete(self, where: VectorFilter) -> None:
        """Remove the facts ``where`` selects."""
        self.index.delete(where)

    def drop(self) -> None:
        """Delete the whole collection (:meth:`open` creates it again)."""
        self.index.drop()

    def count(self) -> int:
        """How many facts are stored (every user's)."""
        return self.index.count()

    def remember(self, user_id: str, turns: list[Turn], *, flush: bool = True) -> int:
        """Store turns as facts of ``user_id`` (idempotent per turn).

        Args:
            user_id: The owner.
            turns: The turns to store (whether or not :attr:`is_fact` says so).
            flush: Make them durable now; the backfill flushes once per settle instead.

        Returns:
            How many facts were stored.
        """
        if not turns:
            return 0
        vectors = self.embeddings.embed_documents([turn.content for turn in turns])
        self.index.upsert(
            [
                VectorPoint(
                    id=point_id(user_id, turn.conversation_id, turn.turn_number),
                    vector=vector,
                    payload=TurnPayload(
                        conversation_id=turn.conversation_id,
                        user_id=user_id,
                        turn_number=turn.turn_number,
                        role=turn.role,
                        content=turn.content,
                        timestamp=turn.timestamp,
                        tokens=turn.content_tokens or None,
                        tags=("fact",),
                    ),
                )
                for turn, vector in zip(turns, vectors, strict=True)
            ]
        )
        if flush:
            self.index.flush()
        return len(turns)

    def of_user(
        self, user_id: str, *, conversation_id: str | None = None, limit: int = 100
    ) -> list[TurnPayload]:
        """The user's facts, newest first (of one conversation when given).

        Raises:
            VectorStoreError: If the facts collection cannot be read.
        """
        where = VectorFilter(user_id=user_id, conversation_id=conversation_id)
        facts = [point.payload for point in self.index.scroll(where)]
        facts.sort(key=lambda fact: (fact.timestamp, fact.turn_number), reverse=True)
        return facts[:limit]

    def search(self, user_id: str, vector: list[float], k: int) -> list[VectorHit]:
        """The user's facts most similar to ``vector`` (cosine, higher is more similar)."""
        return self.index.search(vector, VectorFilter(user_id=user_id), k)
