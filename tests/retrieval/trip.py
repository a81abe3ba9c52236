"""The trip conversation and the helpers the retrieval tests share.

``add`` adds turns dated ``DAY`` (plus ``day`` days); ``drain`` embeds what is queued.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_chain.manager import MemoryManager
from memory_chain.schemas import NewTurn

DAY = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def add(manager: MemoryManager, conversation: str, user: str, *texts: str, day: int = 0) -> None:
    when = DAY + timedelta(days=day)
    manager.add_turns(
        conversation,
        user,
        [
            NewTurn("user" if i % 2 == 0 else "assistant", text, timestamp=when)
            for i, text in enumerate(texts)
        ],
    )


def drain(manager: MemoryManager) -> None:
    assert manager.tier3 is not None
    manager.tier3.indexer.drain()


TRIP = (
    "We fly to Lisbon on the third of May.",
    "Great, I will book the airport taxi.",
    "What should we pack for the trip?",
    "Light clothes, sunscreen and a good pair of walking shoes.",
    "My sister Eva will feed the cat while we are away.",
    "Remind me to buy euros before we leave.",
)
