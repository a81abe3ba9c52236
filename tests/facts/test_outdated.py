"""Recalled turns that stated a retired fact: noted as outdated, or left out of the context.

The manager on SQLite and PostgreSQL with the real embedding model (tier 3 off: keyword
search recalls the turns), and :func:`mark_outdated` alone for the rule's edges.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_chain.chat.budget import memory_line
from memory_chain.facts.model import Fact, FactDraft
from memory_chain.facts.outdated import LOOKBACK_TURNS, mark_outdated, recalled_from
from memory_chain.manager import MemoryManager
from memory_chain.schemas import MemoryItem, NewTurn
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings

SAID = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def manager(store: SQLStore, embeddings: SentenceEmbeddings) -> MemoryManager:
    facts = FactStore(store.database, embed=embeddings.embed_documents)
    return MemoryManager(store, TurnBuffer(), facts=facts)


def recalled(manager: MemoryManager, question: str) -> dict[str, MemoryItem]:
    """The user turns a new conversation's context recalls for ``question``, by text."""
    context = manager.retrieve("probe", "ana", question)
    return {item.content: item for item in context.items if item.role == "user"}


def test_a_turn_whose_fact_was_superseded_is_recalled_with_what_holds_now(
    manager: MemoryManager,
) -> None:
    manager.add_turns(
        "spring",
        "ana",
        [
            NewTurn("user", "I live in Berlin, near the river.", timestamp=SAID),
            NewTurn("assistant", "Berlin is lovely in spring."),
            NewTurn("user", "My sister lives in Berlin too.", timestamp=SAID),
        ],
    )
    home = FactDraft(
        "I live in Berlin.",
        subject="home",
        origin="extracted",
        conversation_id="spring",
        turns=(1, 1),
    )
    manager.fact_store.add("ana", home)
    # Nothing retired yet: the turns come back as they were said.
    before = recalled(manager, "Where do I live in Berlin?")
    assert "I live in Berlin, near the river." in before
    assert all(item.note is None for item in before.values())

    later = SAID + timedelta(days=60)
    manager.add_turns("summer", "ana", [NewTurn("user", "I moved to Porto.", timestamp=later)])
    moved = FactDraft(
        "I live in Porto.",
        subject="home",
        origin="extracted",
        conversation_id="summer",
        turns=(1, 1),
    )
    assert manager.fact_store.add("ana", moved).action == "superseded"

    after = recalled(manager, "Where do I live in Berlin?")
    old = after["I live in Berlin, near the river."]
    assert old.note == 'outdated, now: "I live in Porto."'
    assert memory_line(old, "probe").startswith(
        '- (2026-03-01 09:00, the user, another one; outdated, now: "I live in Porto.") I live'
    )
    # The sister's turn states no retired fact of the user's: not marked.
    assert after["My sister lives in Berlin too."].note is None
    # A later move is followed through the chain to the fact that holds now.
    manager.fact_store.add("ana", FactDraft("I live in Lisbon.", subject="home", origin="api"))
    again = recalled(manager, "Where do I live in Berlin?")
    assert again["I live in Berlin, near the river."].note == 'outdated, now: "I live in Lisbon."'
    # Another user's context is untouched by ana's facts.
    assert manager.retrieve("probe", "bob", "Where do I live in Berlin?").items == ()


def test_a_turn_whose_fact_was_forgotten_is_left_out_of_the_context(
    manager: MemoryManager,
) -> None:
    manager.add_turns(
        "health",
        "ana",
        [
            NewTurn("user", "I smoke about ten cigarettes a day.", timestamp=SAID),
            NewTurn("assistant", "Thanks for telling me."),
            NewTurn("user", "Remember this."),
            NewTurn("user", "I also smoke a pipe on holidays, but I like cigarettes more."),
        ],
    )
    (saved,) = manager.facts("ana")
    assert (saved.text, saved.turns) == ("I smoke about ten cigarettes a day.", (3, 3))
    assert "I smoke about ten cigarettes a day." in recalled(manager, "Do I smoke cigarettes?")

    manager.add_turns("later", "ana", [NewTurn("user", "Please forget that I smoke.")])
    assert manager.facts("ana") == []
    after = recalled(manager, "Do I smoke cigarettes?")
    # The turn the save pointed back to is out; the turn after it stated no saved fact.
    assert "I smoke about ten cigarettes a day." not in after
    assert "I also smoke a pipe on holidays, but I like cigarettes more." in after
    # It is still stored, and listed with its conversation's turns; no search, whichever
    # door asks, brings it back (every door recalls through MemoryManager.find).
    assert any(t.content.startswith("I smoke about ten") for t in manager.turns("health", "ana"))
    searched = manager.search("health", "ana", "smoke cigarettes", k=5)
    assert searched.items
    assert not any(i.content.startswith("I smoke about ten") for i in searched.items)


def _fact(text: str, status: str, *, conversation: str = "c", turn: int = 5) -> Fact:
    return Fact(
        id=text,
        user_id="ana",
        text=text,
        kind="other",
        origin="extracted",
        status=status,  # type: ignore[arg-type]
        created_at=SAID,
        valid_from=SAID,
        conversation_id=conversation,
        turns=(turn, turn),
    )


def _turn(text: str, number: int, *, role: str = "user", conversation: str = "c") -> MemoryItem:
    return MemoryItem(
        tier="sql",
        kind="turn",
        conversation_id=conversation,
        content=text,
        timestamp=SAID,
        score=1.0,
        turn_number=number,
        role=role,  # type: ignore[arg-type]
    )


def test_only_the_source_turn_or_the_few_before_it_that_say_the_fact_are_marked() -> None:
    old = _fact("I work at Siemens.", "superseded")
    now = _fact("I work at Bosch.", "current", turn=9)
    items = [
        _turn("I work at Siemens in Munich.", 5),  # the source turn
        _turn("Siemens again, I work there.", 5 - LOOKBACK_TURNS),  # "remember this" reach
        _turn("I work at Siemens, as I said.", 5 - LOOKBACK_TURNS - 1),  # before the reach
        _turn("We had pizza for lunch.", 5),  # the turn cited, but it does not say it
        _turn("I work at Siemens.", 5, role="assistant"),  # not the user's words
        _turn("I work at Siemens.", 5, conversation="d"),  # another conversation
        _turn("I work at Siemens.", 6),  # after the source turn
    ]
    marked = mark_outdated(items, [(old, now)])
    assert [item.note for item in marked] == [
        'outdated, now: "I work at Bosch."',
        'outdated, now: "I work at Bosch."',
        None,
        None,
        None,
        None,
        None,
    ]
    assert recalled_from(items) == {"c", "d"}
    assert mark_outdated(items, []) == items


def test_a_forgotten_fact_outweighs_a_replaced_one_in_the_same_turn() -> None:
    replaced = _fact("I live in Oslo.", "superseded")
    forgotten = _fact("I am vegan.", "dismissed")
    items = [_turn("I live in Oslo and I am vegan.", 5), _turn("I am vegan.", 5)]
    now = _fact("I live in Rome.", "current", turn=8)
    assert mark_outdated(items, [(replaced, now), (forgotten, None)]) == []
    kept = mark_outdated(items[:1], [(replaced, now)])
    assert [item.note for item in kept] == ['outdated, now: "I live in Rome."']
