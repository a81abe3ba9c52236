"""Vector points for the vector index tests, importable by their child processes too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from memory_chain.tiers.vectors.index import TurnPayload, VectorPoint, point_id

#: The test vectors' dimension.
DIM = 16
#: The first test turn's time.
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def unit_vectors(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    vectors: np.ndarray = rng.normal(size=(n, dim))
    normalized: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normalized


def make_point(
    user: str, conversation: str, turn: int, vector: np.ndarray, *, minutes: int = 0
) -> VectorPoint:
    payload = TurnPayload(
        conversation_id=conversation,
        user_id=user,
        turn_number=turn,
        role="user" if turn % 2 == 0 else "assistant",
        content=f"{user}/{conversation} turn {turn}: ünïcode ✓",
        timestamp=T0 + timedelta(minutes=minutes),
        tokens=10 + turn,
        summary=None if turn % 3 else f"summary {turn}",
        tags=("travel", f"t{turn}") if turn % 2 else (),
    )
    return VectorPoint(
        id=point_id(user, conversation, turn), vector=vector.tolist(), payload=payload
    )
