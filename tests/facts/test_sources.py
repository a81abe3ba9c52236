"""Each conversation a fact was said in is kept; a purge takes only its own (SQLite, PostgreSQL).

A fact said again (the rulebook's ``same``, ``filled``, ``past``) keeps the new conversation
as one more source; a purge removes the conversation's sources, deletes the facts left with
none (their edit-history copies with them), moves a fact's own ``conversation_id`` to a
source left, and re-links the facts a deleted one superseded
(:func:`memory_chain.facts.rules.relinked`): nothing is left pointing at a purged
conversation or a deleted fact.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from memory_chain.facts.model import Fact, FactDraft, FactSource
from memory_chain.schemas import NewTurn
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.export import read_facts
from memory_chain.tiers.sql.facts import FactStore

ALL = ("current", "superseded", "dismissed")


@pytest.fixture
def facts(store: SQLStore) -> FactStore:
    return FactStore(store.database)  # no model: matched by words and subjects


def said(month: int) -> datetime:
    return datetime(2026, month, 1, tzinfo=UTC)


def chat(store: SQLStore, *conversations: str, user: str = "ana") -> None:
    for conversation in conversations:
        turns = [NewTurn("user", f"turn {n} of {conversation}") for n in range(1, 10)]
        store.append_turns(conversation, turns, user_id=user)


def draft(
    words: str,
    conversation: str | None,
    turn: int,
    month: int,
    *,
    subject: str | None = None,
    origin: str = "extracted",
) -> FactDraft:
    return FactDraft(
        words,
        kind="biography",
        origin=origin,  # type: ignore[arg-type]
        subject=subject,
        conversation_id=conversation,
        turns=(turn, turn) if conversation else None,
        valid_from=said(month),
    )


def sources(store: SQLStore, fact_id: str) -> list[FactSource]:
    (found,) = [f for f in read_facts(store.engine, user_id="ana") if f.id == fact_id]
    return list(found.sources)


def dangling(store: SQLStore) -> list[str]:
    """Facts pointing at a missing fact or a purged conversation, sources of missing facts."""
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM facts")).all()
        kept = {
            r[0].split("/", 1)[1]
            for r in conn.execute(text("SELECT conversation_id FROM conversations"))
        }
        said_in = conn.execute(text("SELECT fact_id, conversation_id FROM fact_sources")).all()
    ids = {row.id for row in rows}
    found = [
        f"{r.text}: superseded by a missing fact"
        for r in rows
        if r.superseded_by and r.superseded_by not in ids
    ]
    found += [
        f"{r.text}: from purged {r.conversation_id}"
        for r in rows
        if r.conversation_id and r.conversation_id not in kept
    ]
    found += [f"a source of a missing fact in {c}" for f, c in said_in if f not in ids]
    found += [f"a source in purged {c}" for _, c in said_in if c not in kept]
    return found


def test_a_fact_said_again_keeps_every_conversation_and_outlives_all_but_the_last(
    facts: FactStore, store: SQLStore
) -> None:
    chat(store, "a", "b", "c")
    first = facts.add("ana", draft("I live in Lisbon.", "a", 2, 3))
    assert first.action == "added"
    seat = first.fact
    assert facts.add("ana", draft("I live in Lisbon.", "b", 5, 4)).action == "same"
    # Said again in a conversation it has: that source's turns widen, and the fact's with it.
    assert facts.add("ana", draft("I live in Lisbon.", "a", 9, 5)).action == "same"
    filled = facts.add("ana", draft("I live in Lisbon.", "c", 1, 6, subject="home"))
    assert filled.action == "filled"
    assert sources(store, seat.id) == [
        FactSource("a", (2, 9), said(3)),
        FactSource("b", (5, 5), said(4)),
        FactSource("c", (1, 1), said(6)),
    ]
    assert (facts.get("ana", seat.id) or seat).turns == (2, 9)
    assert [f.id for f in facts.of_user("ana", conversation_id="c")] == [seat.id]

    assert store.delete_conversation("a", user_id="ana")
    kept = facts.get("ana", seat.id)
    assert kept is not None
    assert (kept.status, kept.conversation_id, kept.turns) == ("current", "b", (5, 5))
    assert dangling(store) == []
    assert store.delete_conversation("b", user_id="ana")
    assert store.delete_conversation("c", user_id="ana")
    assert facts.of_user("ana", statuses=ALL) == []
    assert dangling(store) == []


def test_a_past_fact_said_again_keeps_the_new_source_for_recall(
    facts: FactStore, store: SQLStore
) -> None:
    chat(store, "a", "b")
    smoke = facts.add("ana", draft("I smoke a few cigarettes a day.", "a", 3, 3)).fact
    facts.dismiss("ana", smoke.id)
    again = facts.add("ana", draft("I smoke a few cigarettes a day.", "b", 7, 4))
    assert (again.action, again.fact.id) == ("past", smoke.id)
    # Both turns that said it are found, so that neither brings the dismissed fact back.
    retired = facts.retired("ana", ["a", "b"])
    assert sorted((f.conversation_id, f.turns, now) for f, now in retired) == [
        ("a", (3, 3), None),
        ("b", (7, 7), None),
    ]
    assert store.delete_conversation("a", user_id="ana")
    kept = facts.get("ana", smoke.id)
    assert kept is not None
    assert (kept.status, kept.conversation_id) == ("dismissed", "b")
    assert dangling(store) == []


def test_a_fact_added_by_hand_outlives_the_conversations_that_said_it(
    facts: FactStore, store: SQLStore
) -> None:
    chat(store, "a")
    mine = facts.add("ana", draft("I live in Lisbon.", None, 0, 3, origin="api")).fact
    assert facts.add("ana", draft("I live in Lisbon.", "a", 2, 4)).action == "same"
    assert sources(store, mine.id) == [FactSource("a", (2, 2), said(4))]
    assert store.delete_conversation("a", user_id="ana")
    kept = facts.get("ana", mine.id)
    assert kept is not None
    assert (kept.status, kept.conversation_id) == ("current", None)
    assert sources(store, mine.id) == []


def test_an_edited_fact_goes_with_its_history_copy(facts: FactStore, store: SQLStore) -> None:
    chat(store, "a", "b")
    seat = facts.add("ana", draft("My seat is 14C.", "a", 2, 3)).fact
    facts.edit("ana", seat.id, text="My seat is 15A.")
    (copy,) = facts.of_user("ana", statuses=("superseded",))
    assert sources(store, copy.id) == sources(store, seat.id)
    assert store.delete_conversation("a", user_id="ana")
    assert facts.of_user("ana", statuses=ALL) == []
    assert dangling(store) == []


def _home(facts: FactStore, where: str, conversation: str, month: int) -> Fact:
    return facts.add(
        "ana", draft(f"I live in {where}.", conversation, 1, month, subject="home")
    ).fact


def test_purging_a_superseder_relinks_what_it_superseded(facts: FactStore, store: SQLStore) -> None:
    chat(store, "a", "b", "c")
    lisbon = _home(facts, "Lisbon", "a", 3)
    porto = _home(facts, "Porto", "b", 4)
    berlin = _home(facts, "Berlin", "c", 5)
    # The middle value goes: the chain skips it.
    assert store.delete_conversation("b", user_id="ana")
    past = facts.get("ana", lisbon.id)
    assert past is not None
    assert (past.status, past.superseded_by) == ("superseded", berlin.id)
    assert facts.get("ana", porto.id) is None
    # The current value goes: the one it replaced holds again.
    assert store.delete_conversation("c", user_id="ana")
    assert [(f.id, f.status, f.invalidated_at) for f in facts.of_user("ana", statuses=ALL)] == [
        (lisbon.id, "current", None)
    ]
    assert dangling(store) == []


def test_purging_a_dismissed_superseder_brings_nothing_back(
    facts: FactStore, store: SQLStore
) -> None:
    chat(store, "a", "b")
    lisbon = _home(facts, "Lisbon", "a", 3)
    porto = _home(facts, "Porto", "b", 4)
    facts.dismiss("ana", porto.id)
    assert store.delete_conversation("b", user_id="ana")
    past = facts.get("ana", lisbon.id)
    assert past is not None
    assert (past.status, past.superseded_by) == ("dismissed", None)
    assert facts.of_user("ana") == []
    assert dangling(store) == []


def test_a_key_goes_back_to_the_fact_that_holds_again(facts: FactStore, store: SQLStore) -> None:
    chat(store, "b")
    put = facts.put("ana", "home", "I live in Lisbon.", kind="biography", subject="home")
    later = FactDraft("I live in Porto.", kind="biography", subject="home", conversation_id="b")
    porto = facts.add("ana", later).fact  # said now, after the put
    assert facts.by_key("ana", "home") == facts.get("ana", porto.id)  # the key follows
    assert store.delete_conversation("b", user_id="ana")
    again = facts.by_key("ana", "home")
    assert again is not None
    assert (again.id, again.status, again.key) == (put.id, "current", "home")
    assert dangling(store) == []


def test_a_range_is_filed_only_while_its_conversation_exists(
    facts: FactStore, store: SQLStore
) -> None:
    chat(store, "a")
    said_in_a = [
        (draft("I live in Lisbon.", "a", 1, 3), None),
        (draft("I am vegan.", "a", 2, 3), None),
    ]
    changes = facts.add_said("ana", "a", said_in_a)
    assert [c.action for c in changes or []] == ["added", "added"]
    assert store.delete_conversation("a", user_id="ana")
    assert facts.add_said("ana", "a", said_in_a) is None
    assert facts.add_said("ana", "never", said_in_a) is None
    assert facts.of_user("ana", statuses=ALL) == []
