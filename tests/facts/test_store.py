"""The users' facts in tier 2: reconciled, edited and dismissed with their history, ranked.

On SQLite and PostgreSQL, with the real embedding model; the manager's filing of "remember
that ..." and "forget that ..." requests as they are stored, with tier 3 on or off.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_chain.errors import InvalidInputError
from memory_chain.facts.model import FactDraft
from memory_chain.manager import MemoryManager
from memory_chain.schemas import NewTurn
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings


@pytest.fixture
def facts(store: SQLStore, embeddings: SentenceEmbeddings) -> FactStore:
    return FactStore(store.database, embed=embeddings.embed_documents)


def test_the_same_fact_again_adds_nothing_and_a_new_subject_value_supersedes(
    facts: FactStore,
) -> None:
    first = facts.add("ana", FactDraft("I live in Porto.", subject="home city"))
    assert first.action == "added"
    for again in ("i live in porto", "  I live in Porto!  ", "I live in Porto"):
        change = facts.add("ana", FactDraft(again))
        assert (change.action, change.fact.id) == ("same", first.fact.id)
    # A different fact about something else is added, even when its words are close.
    other = facts.add("ana", FactDraft("I live in Porto with my sister."))
    assert other.action == "added"
    moved = facts.add("ana", FactDraft("I live in Berlin.", subject="Home City "))
    assert moved.action == "superseded"
    assert moved.replaced is not None
    assert moved.replaced.id == first.fact.id
    current = {f.text for f in facts.of_user("ana")}
    assert current == {"I live in Berlin.", "I live in Porto with my sister."}
    (old,) = facts.of_user("ana", statuses=("superseded",))
    assert (old.text, old.superseded_by) == ("I live in Porto.", moved.fact.id)
    assert old.invalidated_at is not None
    # Another user's facts are another user's.
    assert facts.add("bob", FactDraft("I live in Porto.")).action == "added"
    assert facts.of_user("bob")[0].user_id == "bob"
    assert facts.count("ana") == {"current": 2, "superseded": 1, "dismissed": 0}


def test_a_fact_saved_without_a_subject_takes_it_and_a_newer_value_supersedes_it(
    facts: FactStore,
) -> None:
    # "Remember: I live in Lisbon" is saved as said, without subject or kind ...
    saved = facts.add("ana", FactDraft("I live in Lisbon", origin="explicit")).fact
    assert (saved.subject, saved.kind) == (None, "other")
    # ... the extractor finds the same fact in that turn, with them: no row, filled in.
    again = facts.add(
        "ana",
        FactDraft("I live in Lisbon.", kind="biography", origin="extracted", subject="home city"),
    )
    assert (again.action, again.fact.id, again.replaced) == ("filled", saved.id, None)
    assert (again.fact.subject, again.fact.kind, again.fact.origin) == (
        "home city",
        "biography",
        "explicit",
    )
    stored = facts.get("ana", saved.id)
    assert stored is not None
    assert (stored.subject, stored.kind, stored.text) == ("home city", "biography", saved.text)
    assert facts.count("ana") == {"current": 1, "superseded": 0, "dismissed": 0}
    # A known subject or kind is not overwritten by the same fact said again.
    kept = facts.add("ana", FactDraft("I live in Lisbon", kind="plan", subject="residence"))
    assert (kept.action, kept.fact.subject, kept.fact.kind) == ("same", "home city", "biography")
    # Now a newer value of the subject supersedes the saved fact.
    moved = facts.add("ana", FactDraft("I live in Porto.", origin="extracted", subject="home city"))
    assert moved.action == "superseded"
    assert moved.replaced is not None
    assert moved.replaced.id == saved.id
    assert [f.text for f in facts.of_user("ana")] == ["I live in Porto."]


def test_a_subject_filled_in_retires_the_older_value_of_it(facts: FactStore) -> None:
    march = datetime(2026, 3, 1, tzinfo=UTC)
    june = datetime(2026, 6, 1, tzinfo=UTC)
    lisbon = facts.add(
        "ana", FactDraft("I live in Lisbon.", subject="home city", valid_from=march)
    ).fact
    # Saved later, without a subject: nothing tells it updates Lisbon yet.
    porto = facts.add("ana", FactDraft("I live in Porto", origin="explicit", valid_from=june))
    assert porto.action == "added"
    assert len(facts.of_user("ana")) == 2
    # The same fact with its subject: Porto (the newer) supersedes Lisbon, no row added.
    change = facts.add("ana", FactDraft("I live in Porto.", subject="home city"))
    assert (change.action, change.fact.id, change.fact.status) == (
        "filled",
        porto.fact.id,
        "current",
    )
    assert change.replaced is not None
    assert (change.replaced.id, change.replaced.superseded_by) == (lisbon.id, porto.fact.id)
    assert [f.id for f in facts.of_user("ana")] == [porto.fact.id]
    assert facts.count("ana") == {"current": 1, "superseded": 1, "dismissed": 0}


def test_a_subject_filled_in_on_an_older_fact_retires_that_fact(facts: FactStore) -> None:
    # An old save reaches the extractor late (its conversation consolidated last).
    old = facts.add(
        "ana",
        FactDraft(
            "I live in Lisbon", origin="explicit", valid_from=datetime(2026, 3, 1, tzinfo=UTC)
        ),
    ).fact
    porto = facts.add("ana", FactDraft("I live in Porto.", subject="home city")).fact
    change = facts.add("ana", FactDraft("I live in Lisbon.", subject="home city"))
    assert (change.action, change.fact.id, change.fact.status) == ("filled", old.id, "superseded")
    assert change.fact.superseded_by == porto.id
    assert [f.text for f in facts.of_user("ana")] == ["I live in Porto."]


def test_an_older_value_learnt_late_goes_into_the_history(facts: FactStore) -> None:
    # June's conversation was consolidated first; March's, telling the older home, after.
    june = facts.add(
        "ana",
        FactDraft("I live in Porto.", subject="home", valid_from=datetime(2026, 6, 1, tzinfo=UTC)),
    ).fact
    late = facts.add(
        "ana",
        FactDraft("I live in Lisbon.", subject="home", valid_from=datetime(2026, 3, 1, tzinfo=UTC)),
    )
    assert (late.action, late.fact.status, late.fact.superseded_by) == (
        "history",
        "superseded",
        june.id,
    )
    assert [f.text for f in facts.of_user("ana")] == ["I live in Porto."]
    (history,) = facts.of_user("ana", statuses=("superseded",))
    assert (history.text, history.superseded_by) == ("I live in Lisbon.", june.id)
    # Told later than Porto, a move supersedes as before.
    moved = facts.add(
        "ana",
        FactDraft("I live in Berlin.", subject="home", valid_from=datetime(2026, 9, 1, tzinfo=UTC)),
    )
    assert (moved.action, moved.replaced.id if moved.replaced else None) == (
        "superseded",
        june.id,
    )


def test_a_correction_known_already_replaces_through_the_known_fact(facts: FactStore) -> None:
    lisbon = facts.add("ana", FactDraft("I live in Lisbon.", subject="home city")).fact
    saved = facts.add("ana", FactDraft("I've moved to Porto", origin="explicit")).fact
    # The extractor's trusted "replaces" for a fact the user saved already: no duplicate.
    change = facts.add(
        "ana", FactDraft("I've moved to Porto.", subject="home city"), replaces=lisbon.id
    )
    assert (change.action, change.fact.id, change.fact.subject) == (
        "corrected",
        saved.id,
        "home city",
    )
    assert change.replaced is not None
    assert (change.replaced.id, change.replaced.superseded_by) == (lisbon.id, saved.id)
    assert [f.id for f in facts.of_user("ana")] == [saved.id]
    assert facts.count("ana") == {"current": 1, "superseded": 1, "dismissed": 0}


def test_a_subject_supersedes_only_a_related_fact_and_is_compared_loosely(
    facts: FactStore,
) -> None:
    porto = facts.add("ana", FactDraft("I live in Porto.", subject="home city")).fact
    # A wrong subject does not retire a fact about something else (cosine below the band).
    rex = facts.add("ana", FactDraft("My dog is called Rex.", subject="home city"))
    assert rex.action == "added"
    # Case, articles and plurals aside, the subject is the same: Berlin supersedes Porto.
    berlin = facts.add("ana", FactDraft("I live in Berlin.", subject="The Home Cities"))
    assert berlin.action == "superseded"
    assert berlin.replaced is not None
    assert berlin.replaced.id == porto.id
    assert {f.text for f in facts.of_user("ana")} == {"My dog is called Rex.", "I live in Berlin."}
    # A move in other words, with names the model never saw (cosine 0.28), is still related.
    facts.add("bob", FactDraft("I live in Marrowick.", subject="home city"))
    moved = facts.add("bob", FactDraft("I've moved to Lindqvale.", subject="home city"))
    assert moved.action == "superseded"
    assert [f.text for f in facts.of_user("bob")] == ["I've moved to Lindqvale."]


def test_a_subject_of_which_several_hold_never_supersedes(facts: FactStore) -> None:
    # 0.64 apart: related, but a second hobby is no newer value of the first.
    facts.add("ana", FactDraft("I play tennis.", subject="hobby"))
    guitar = facts.add("ana", FactDraft("I play guitar.", subject="hobby"))
    assert guitar.action == "added"
    facts.add("ana", FactDraft("I have a cat called Tom.", subject="pet"))
    assert facts.add("ana", FactDraft("I have a dog called Rex.", subject="pets")).action == "added"
    assert len(facts.of_user("ana")) == 4


def test_facts_said_together_do_not_supersede_one_another(facts: FactStore) -> None:
    marek = facts.add("ana", FactDraft("My brother Marek opened a bike shop.", subject="brother"))
    # Learnt from the same range (kept): both hold.
    sign = facts.add(
        "ana",
        FactDraft("I helped my brother paint the shop's sign.", subject="brother"),
        keep={marek.fact.id},
    )
    assert sign.action == "added"
    assert len(facts.of_user("ana")) == 2
    # From a later range the subject rule applies again.
    later = facts.add("ana", FactDraft("My brother Marek closed his bike shop.", subject="brother"))
    assert later.action == "superseded"


def test_extraction_does_not_bring_back_a_retired_fact(facts: FactStore) -> None:
    lucja = facts.add("ana", FactDraft("My niece is called Lucja.", subject="niece")).fact
    lucia = facts.add(
        "ana", FactDraft("My niece is called Lucia.", subject="niece"), replaces=lucja.id
    )
    assert lucia.action == "corrected"
    # A small model reads "Lucia, not Lucja" and files the old value again: not stored.
    again = facts.add("ana", FactDraft("my niece is called Lucja", origin="extracted"))
    assert (again.action, again.fact.id, again.fact.status) == ("past", lucja.id, "superseded")
    dismissed = facts.add("ana", FactDraft("I smoke a pack a day.")).fact
    facts.dismiss("ana", dismissed.id)
    smoke = facts.add("ana", FactDraft("I smoke a pack a day.", origin="extracted"))
    assert (smoke.action, smoke.fact.id) == ("past", dismissed.id)
    assert [f.text for f in facts.of_user("ana")] == ["My niece is called Lucia."]
    # The user (or a client) may bring a retired fact back.
    back = facts.add("ana", FactDraft("I smoke a pack a day.", origin="explicit"))
    assert back.action == "added"
    assert back.fact.id != dismissed.id


def test_without_vectors_the_subject_alone_decides(store: SQLStore) -> None:
    bare = FactStore(store.database)
    porto = bare.add("ana", FactDraft("I live in Porto.", subject="home city")).fact
    berlin = bare.add("ana", FactDraft("I live in Berlin.", subject="Home city"))
    assert berlin.action == "superseded"
    assert berlin.replaced is not None
    assert berlin.replaced.id == porto.id
    assert bare.add("ana", FactDraft("I play tennis.", subject="hobby")).action == "added"
    assert bare.add("ana", FactDraft("I swim.", subject="hobby")).action == "added"


def test_a_correction_names_the_fact_it_replaces(facts: FactStore) -> None:
    anna = facts.add("ana", FactDraft("My wife is Anna.", kind="relationship")).fact
    fixed = facts.add("ana", FactDraft("My wife is Ana.", kind="relationship"), replaces=anna.id)
    assert (fixed.action, fixed.stored) == ("corrected", True)
    assert fixed.replaced is not None
    assert (fixed.replaced.id, fixed.replaced.superseded_by) == (anna.id, fixed.fact.id)
    assert [f.text for f in facts.of_user("ana")] == ["My wife is Ana."]
    # A correction of a fact retired since is the subject rule's to decide (it used to be
    # refused, and the extractor then asked again without it: one rule now, in facts/rules).
    again = facts.add("ana", FactDraft("My wife's name is Ana Silva."), replaces=anna.id)
    assert (again.action, again.replaced) == ("added", None)
    assert facts.add("ana", FactDraft("I swim."), replaces="f" * 32).action == "added"


def test_a_correction_learnt_late_goes_into_the_history(facts: FactStore) -> None:
    # June's conversation was consolidated first; March's, where the model labels Lisbon as
    # replacing Porto, after. The rulebook's order holds whatever "replaces" says: Porto,
    # which started to hold later, stays (before, the correction retired it).
    porto = facts.add(
        "ana",
        FactDraft(
            "I live in Porto.", subject="home city", valid_from=datetime(2026, 6, 1, tzinfo=UTC)
        ),
    ).fact
    late = facts.add(
        "ana",
        FactDraft(
            "I've just moved to Lisbon.",
            origin="extracted",
            valid_from=datetime(2026, 3, 1, tzinfo=UTC),
        ),
        replaces=porto.id,
    )
    assert (late.action, late.stored, late.fact.status, late.fact.superseded_by) == (
        "history",
        True,
        "superseded",
        porto.id,
    )
    assert [f.id for f in facts.of_user("ana")] == [porto.id]


def test_extraction_does_not_bring_back_a_past_fact_it_labels_as_a_correction(
    facts: FactStore,
) -> None:
    lucja = facts.add("ana", FactDraft("My niece is called Lucja.", subject="niece")).fact
    lucia = facts.add(
        "ana", FactDraft("My niece is called Lucia.", subject="niece"), replaces=lucja.id
    ).fact
    # "Lucia, not Lucja": a small model files the old value as correcting the new one. The
    # past-fact rule holds with "replaces" as without it (before, Lucia was retired).
    again = facts.add(
        "ana", FactDraft("my niece is called Lucja", origin="extracted"), replaces=lucia.id
    )
    assert (again.action, again.stored, again.fact.id) == ("past", False, lucja.id)
    assert [f.id for f in facts.of_user("ana")] == [lucia.id]


def test_a_subject_filled_in_keeps_the_facts_said_together(facts: FactStore) -> None:
    saved = facts.add("ana", FactDraft("My brother Marek opened a bike shop", origin="explicit"))
    sign = facts.add(
        "ana", FactDraft("I helped my brother paint the shop's sign.", subject="brother")
    )
    # The extractor finds the saved fact in the same range, with the subject: it is filled
    # in, and the fact said with it stays (before, the fill-in retired one of the two).
    change = facts.add(
        "ana",
        FactDraft("My brother Marek opened a bike shop.", origin="extracted", subject="brother"),
        keep={sign.fact.id},
    )
    assert (change.action, change.fact.id, change.replaced) == ("filled", saved.fact.id, None)
    assert len(facts.of_user("ana")) == 2


def test_an_edit_keeps_the_id_and_the_old_text_as_history(facts: FactStore) -> None:
    fact = facts.add("ana", FactDraft("My seat is 14C.")).fact
    edited = facts.edit("ana", fact.id, text="My seat is 15A.", kind="plan")
    assert edited is not None
    assert (edited.id, edited.text, edited.kind, edited.origin) == (
        fact.id,
        "My seat is 15A.",
        "plan",
        "api",
    )
    (history,) = facts.of_user("ana", statuses=("superseded",))
    assert (history.text, history.superseded_by, history.kind) == (
        "My seat is 14C.",
        fact.id,
        "other",
    )
    assert facts.edit("bob", fact.id, text="stolen") is None  # not bob's
    assert facts.edit("ana", history.id, text="x") is None  # not current
    with pytest.raises(InvalidInputError, match="new text"):
        facts.edit("ana", fact.id)
    with pytest.raises(InvalidInputError, match="kind"):
        facts.edit("ana", fact.id, kind="gossip")
    with pytest.raises(InvalidInputError, match="empty"):
        facts.edit("ana", fact.id, text="   ")
    # The new text is what ranks now.
    vector = facts.embed(["which seat do I have?"])[0] if facts.embed else None
    (ranked,) = facts.profile("ana", vector)
    assert ranked.fact.text == "My seat is 15A."
    assert ranked.score is not None


def test_a_dismissed_fact_leaves_the_profile_and_stays_in_the_history(facts: FactStore) -> None:
    fact = facts.add("ana", FactDraft("I hate olives.", kind="preference")).fact
    dismissed = facts.dismiss("ana", fact.id)
    assert dismissed is not None
    assert dismissed.status == "dismissed"
    assert facts.dismiss("ana", fact.id) == dismissed  # twice: the same
    assert facts.dismiss("bob", fact.id) is None
    assert facts.profile("ana") == []
    assert facts.of_user("ana", statuses=("dismissed",)) == [dismissed]
    # Said again later, it is a new current fact (the dismissed one is history).
    again = facts.add("ana", FactDraft("I hate olives."))
    assert again.action == "added"
    assert again.fact.id != fact.id


def test_the_profile_ranks_by_the_message_and_never_embeds_in_the_read(
    store: SQLStore, embeddings: SentenceEmbeddings
) -> None:
    bare = FactStore(store.database)  # no embedding model: stored without vectors
    for text in (
        "My daughter Mia turns 7 in May.",
        "I am allergic to peanuts.",
        "I drive a Volvo.",
    ):
        assert bare.add("ana", FactDraft(text)).action == "added"
    newest_first = [r.fact.text for r in bare.profile("ana")]
    assert newest_first[0] == "I drive a Volvo."
    assert all(r.score is None for r in bare.profile("ana"))
    calls: list[int] = []

    def counted(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return embeddings.embed_documents(texts)

    ranked = FactStore(store.database, embed=counted)
    question = embeddings.embed_query("Which foods must I avoid?")
    # A read (a chat turn) embeds nothing: the facts without a vector come newest first.
    unscored = ranked.profile("ana", question)
    assert [r.fact.text for r in unscored] == newest_first
    assert all(r.score is None for r in unscored)
    assert calls == []
    # The background embeds them (the tier-3 backfill thread runs embed_pending).
    assert ranked.embed_pending() == 3
    assert ranked.embed_pending() == 0
    assert calls == [3]
    order = ranked.profile("ana", question)
    assert order[0].fact.text == "I am allergic to peanuts."
    assert all(r.score is not None for r in order)
    scores = [r.score for r in order if r.score is not None]
    assert scores == sorted(scores, reverse=True)
    # The vectors were stored: a store without a model ranks them now.
    assert bare.profile("ana", question)[0].fact.text == "I am allergic to peanuts."


def test_forget_requests_dismiss_the_fact_they_name(facts: FactStore) -> None:
    facts.add("ana", FactDraft("My locker code is 4471."))
    facts.add("ana", FactDraft("I play the cello on Sundays."))
    assert [f.text for f in facts.forget_matching("ana", "my locker code")] == [
        "My locker code is 4471."
    ]
    assert facts.forget_matching("ana", "the weather in Oslo") == []  # names nothing
    assert [f.text for f in facts.of_user("ana")] == ["I play the cello on Sundays."]


def test_a_forget_request_names_the_facts_holding_its_words(facts: FactStore) -> None:
    facts.add("ana", FactDraft("My home address is 12 Rook Lane."))
    facts.add("ana", FactDraft("I smoke a few cigarettes a day."))
    facts.add("ana", FactDraft("I quit smoking last year."))
    facts.add("ana", FactDraft("I'm a member of the Dunmire rowing club."))
    facts.add("ana", FactDraft("I play the cello on Sundays."))
    # "address" alone is in the fact: no cosine needed.
    assert [f.text for f in facts.forget_matching("ana", "my address")] == [
        "My home address is 12 Rook Lane."
    ]
    # Every fact about smoking goes, by stem ("smoke" / "smoking").
    assert {f.text for f in facts.forget_matching("ana", "that I smoke")} == {
        "I smoke a few cigarettes a day.",
        "I quit smoking last year.",
    }
    assert [f.text for f in facts.forget_matching("ana", "my rowing club membership")] == [
        "I'm a member of the Dunmire rowing club."
    ]
    # A word of the request the fact lacks, and too far by cosine: nothing.
    assert facts.forget_matching("ana", "my cello teacher's address") == []
    assert [f.text for f in facts.of_user("ana")] == ["I play the cello on Sundays."]


def test_bad_facts_are_refused_with_what_to_fix(facts: FactStore) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        facts.add("ana", FactDraft(" "))
    with pytest.raises(InvalidInputError, match="2,000"):
        facts.add("ana", FactDraft("x" * 2001))
    with pytest.raises(InvalidInputError, match="kind"):
        facts.add("ana", FactDraft("ok", kind="gossip"))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="user id"):
        facts.add("../x", FactDraft("ok"))
    assert facts.of_user("ana") == []


def test_restore_keeps_ids_statuses_and_dates_and_is_idempotent(
    facts: FactStore, store: SQLStore
) -> None:
    facts.add("ana", FactDraft("I live in Porto.", subject="city"))
    facts.add("ana", FactDraft("I live in Berlin.", subject="city"))
    exported = facts.of_user("ana", statuses=("current", "superseded", "dismissed"))
    facts.delete_user("ana")
    assert facts.of_user("ana", statuses=("current", "superseded")) == []
    assert facts.restore(exported) == 2
    assert facts.restore(exported) == 0
    again = facts.of_user("ana", statuses=("current", "superseded", "dismissed"))
    assert again == exported


def test_the_manager_files_remember_and_forget_requests_as_they_are_stored(
    store: SQLStore, embeddings: SentenceEmbeddings
) -> None:
    manager = MemoryManager(
        store, TurnBuffer(), facts=FactStore(store.database, embed=embeddings.embed_documents)
    )  # tier 3 off: facts live in tier 2 all the same
    said = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)
    manager.add_turns(
        "trip",
        "ana",
        [
            NewTurn("user", "Our flight number is TP 1234.", timestamp=said),
            NewTurn("assistant", "Noted."),
            NewTurn("user", "Remember this."),  # about the previous message
            NewTurn("user", "I don't remember that movie."),  # not a save
            NewTurn("user", "Do you remember that song?"),  # a question, not a save
            NewTurn("user", "Please save this file as csv."),  # not about memory
            NewTurn("user", "Remember: my wife is Ana."),
        ],
    )
    facts = manager.facts("ana")
    assert {(f.text, f.turns) for f in facts} == {
        ("Our flight number is TP 1234.", (3, 3)),
        ("my wife is Ana.", (7, 7)),
    }
    assert all(f.origin == "explicit" and f.conversation_id == "trip" for f in facts)
    # "Forget that", in another conversation, about the previous message's subject.
    manager.add_turns("other", "ana", [NewTurn("user", "Please forget my flight number.")])
    assert [f.text for f in manager.facts("ana")] == ["my wife is Ana."]
    # Every prompt of the user has the current facts, none of another user.
    context = manager.retrieve("new", "ana", "Who is my wife?")
    assert [item.content for item in context.facts] == ["my wife is Ana."]
    assert manager.retrieve("new", "bob", "Who is my wife?").facts == ()
