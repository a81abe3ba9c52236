"""Each user's memory status (``memory-chain status``, ``GET /v1/users/me/status``).

On SQLite and PostgreSQL: a ChatGPT export imported for ana (the file of
``tests/imports/samples``), a live conversation of bob's; the figures follow the import, the
embedding outbox being worked off (claimed and settled, as the tier-3 indexer does) and a
consolidation with fake models (a fixed summary, one scripted fact).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from memory_chain.facts.model import FactDraft
from memory_chain.imports import history_progress, import_history
from memory_chain.manager import MemoryManager
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.status import MemoryStatus, memory_status
from tests.imports.consolidating import TRIP, consolidate_trip

EXPORT = Path(__file__).parents[1] / "imports" / "samples" / "chatgpt_conversations.json"
DOG = "chatgpt-65e1f2a0-2222-4c2d-9e8f-0a1b2c3d4e5f"


def _browser_count(manager: MemoryManager, user: str) -> int:
    """What the memory browser adds up: each conversation's highest summarized turn."""
    return sum(
        max((s.turn_range_end for s in manager.summaries(info.conversation_id, user)), default=0)
        for info in manager.conversations(user)
    )


def test_the_figures_follow_an_import_the_embedding_and_a_consolidation(
    store: SQLStore,
) -> None:
    queued = SQLStore(store.engine, queue_embeddings=True)
    manager = MemoryManager(queued, TurnBuffer())
    assert memory_status(queued) == []
    assert memory_status(queued, user_id="ana") == [MemoryStatus("ana")]

    import_history(manager, EXPORT, user="ana")
    manager.add_turns("notes", "bob", [HumanMessage("My locker is 12."), AIMessage("Noted.")])
    ana, bob = memory_status(queued)
    assert ana == MemoryStatus(
        "ana", conversations=2, turns=7, turns_to_consolidate=7,
        conversations_to_consolidate=2, turns_to_embed=7,
    )  # fmt: skip
    assert (bob.user_id, bob.turns, bob.turns_to_embed) == ("bob", 2, 2)
    assert memory_status(queued, user_id="bob") == [bob]

    # The tier-3 indexer's round: claim a batch, store its points, settle it.
    outbox = queued.outbox()
    outbox.done(outbox.claim(5))
    (ana,) = memory_status(queued, user_id="ana")
    (bob,) = memory_status(queued, user_id="bob")
    assert ana.turns_to_embed + bob.turns_to_embed == 4

    consolidate_trip(queued, manager)
    manager.add_fact("ana", FactDraft("I grow basil on the balcony."))
    (ana,) = memory_status(queued, user_id="ana")
    assert (ana.turns, ana.turns_consolidated, ana.turns_to_consolidate) == (7, 5, 2)
    assert ana.turns_consolidated == _browser_count(manager, "ana")
    assert ana.conversations_to_consolidate == 1
    assert (ana.facts, ana.facts_learnt) == (2, 1)
    # Dated by the last turn it covers (the imported turn's own time).
    assert ana.last_summary_at == datetime(2024, 4, 25, 9, 6, tzinfo=UTC)
    assert ana.as_dict()["last_summary_at"] == "2024-04-25T09:06:00+00:00"
    progress = history_progress(queued, user_id="ana")
    assert (progress.to_consolidate, progress.unsummarized_turns) == (1, 2)
    assert progress.to_embed == ana.turns_to_embed


def test_archived_conversations_wait_for_nothing_and_deleted_ones_are_not_counted(
    store: SQLStore,
) -> None:
    manager = MemoryManager(store, TurnBuffer())
    import_history(manager, EXPORT, user="ana")
    manager.archive(DOG, "ana")
    (ana,) = memory_status(store, user_id="ana", tier3=False)
    assert (ana.conversations, ana.turns, ana.turns_to_consolidate) == (2, 7, 5)
    assert ana.turns_to_embed is None
    assert ana.as_dict()["turns_to_embed"] is None
    store.set_status(TRIP, "deleted", user_id="ana")
    (ana,) = memory_status(store, user_id="ana", tier3=False)
    assert (ana.conversations, ana.turns, ana.turns_to_consolidate) == (1, 2, 0)
