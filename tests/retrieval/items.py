"""Memory items made by hand for the fusion and ranking tests: ``turn(n, text)``."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_chain.schemas import MemoryItem

#: When the made turns were said, unless told.
WHEN = datetime(2024, 5, 1, tzinfo=UTC)


def turn(
    n: int, text: str = "a turn", *, conversation: str = "c", when: datetime = WHEN
) -> MemoryItem:
    """A stored turn as retrieval finds it (tier 2, score 0)."""
    return MemoryItem(
        tier="tier2",
        kind="turn",
        conversation_id=conversation,
        content=text,
        timestamp=when,
        score=0.0,
        turn_number=n,
    )
