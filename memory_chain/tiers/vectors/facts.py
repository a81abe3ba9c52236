"""User facts: what a user asked to remember, searchable from all their conversations.

Facts live in their own collection (the seed's ``user_facts``) with the same payload as turns
(the turn that said "remember this"), so the same :class:`VectorIndex` backends serve them.
"""

from __future__ import annotations

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


class UserFacts:
    """Stores and finds remembered facts per user.

    Args:
        index: An opened index on the facts collection.
        embeddings: The embedding model.
    """

    def __init__(self, index: VectorIndex, embeddings: Embeddings) -> None:
        self.index = index
        self.embeddings = embeddings

    def remember(self, user_id: str, turns: list[Turn]) -> int:
        """Store turns as facts of ``user_id`` (idempotent per turn)."""
        if not turns:
            return 0
        vectors = self.embeddings.embed_documents([turn.content for turn in turns])
        self.index.upsert(
            [
                VectorPoint(
                    id=point_id(turn.conversation_id, turn.turn_number),
                    vector=vector,
                    payload=TurnPayload(
                        conversation_id=turn.conversation_id,
                        user_id=user_id,
                        turn_number=turn.turn_number,
                        role=turn.role,
                        content=turn.content,
                        timestamp=turn.timestamp,
                        tokens=turn.token_total or None,
                        tags=("fact",),
                    ),
                )
                for turn, vector in zip(turns, vectors, strict=True)
            ]
        )
        self.index.flush()
        return len(turns)

    def search(self, user_id: str, vector: list[float], k: int) -> list[VectorHit]:
        """The user's facts most similar to ``vector`` (cosine, higher is more similar)."""
        return self.index.search(vector, VectorFilter(user_id=user_id), k)

    def forget(self, user_id: str, conversation_id: str | None = None) -> None:
        """Remove the facts of a conversation (or all of a user's)."""
        self.index.delete(VectorFilter(user_id=user_id, conversation_id=conversation_id))
