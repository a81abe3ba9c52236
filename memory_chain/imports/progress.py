"""How far imported history has come: turns still to embed, conversations to consolidate."""

from __future__ import annotations

from dataclasses import dataclass

from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.progress import backlog


@dataclass(frozen=True, slots=True)
class HistoryProgress:
    """What is left to do before imported history is fully searchable and learnt from.

    Attributes:
        to_embed: Turns queued for tier 3 (not found by meaning yet; found by keyword).
        to_consolidate: Conversations with turns no summary covers yet (their facts are
            not learnt yet).
        unsummarized_turns: Turns of those conversations no summary covers.
    """

    to_embed: int
    to_consolidate: int
    unsummarized_turns: int

    def describe(self) -> str:
        """One line for people."""
        if not (self.to_embed or self.to_consolidate):
            return "every turn is embedded and consolidated"
        return (
            f"{self.to_embed} turns wait to be embedded; {self.to_consolidate} conversations "
            f"({self.unsummarized_turns} turns) wait to be consolidated: a running server "
            "does both in the background (`memory-chain consolidate --all` consolidates now)"
        )


def history_progress(
    store: SQLStore, *, user_id: str | None = None, queued: bool = True, limit: int = 100_000
) -> HistoryProgress:
    """The embedding queue and the consolidation backlog (of one user, or everyone's).

    Args:
        store: Tier 2.
        user_id: Only this user's conversations in the backlog (the embedding queue is
            counted whole).
        queued: Whether the store queues turns for tier 3 (``False``: nothing to embed).
        limit: Most conversations counted.
    """
    waiting = [
        item for item in backlog(store, limit=limit) if user_id is None or item.user_id == user_id
    ]
    return HistoryProgress(
        to_embed=store.outbox().count() if queued else 0,
        to_consolidate=len(waiting),
        unsummarized_turns=sum(item.turn_count - item.summarized_through for item in waiting),
    )


__all__ = ["HistoryProgress", "history_progress"]
