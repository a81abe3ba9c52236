"""How far imported history has come: turns still to embed, conversations to consolidate."""

from __future__ import annotations

from dataclasses import dataclass

from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.status import memory_status


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
            "does both in the background (`memory-chain status` shows how far; `memory-chain "
            "consolidate --all` consolidates now)"
        )


def history_progress(
    store: SQLStore, *, user_id: str | None = None, queued: bool = True
) -> HistoryProgress:
    """The embedding queue and the consolidation backlog (of one user, or everyone's).

    Summed from :func:`~memory_chain.tiers.sql.status.memory_status`, what ``memory-chain
    status`` shows per user.

    Args:
        store: Tier 2.
        user_id: Only this user's turns and conversations.
        queued: Whether the store queues turns for tier 3 (``False``: nothing to embed).
    """
    statuses = memory_status(store, user_id=user_id, tier3=queued)
    return HistoryProgress(
        to_embed=sum(s.turns_to_embed or 0 for s in statuses),
        to_consolidate=sum(s.conversations_to_consolidate for s in statuses),
        unsummarized_turns=sum(s.turns_to_consolidate for s in statuses),
    )


__all__ = ["HistoryProgress", "history_progress"]
