"""The one retrieval: real SQLite keyword search, a real vector index, the real embedding model."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from memory_chain.errors import StorageError
from memory_chain.manager import MemoryManager
from memory_chain.retrieval.candidates import dense_query
from memory_chain.retrieval.retriever import MemoryRetriever
from tests.retrieval.trip import DAY, TRIP, add, drain


def test_find_fuses_both_tiers_without_duplicates(manager: MemoryManager) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    found = manager.find("When is our flight to Lisbon?", user_id="ana", limit=5)
    assert found.degraded == []
    first = found.items[0]
    assert first.turn_number == 1
    assert set(first.sources) == {"tier2-turns", "tier3"}
    keys = [(i.conversation_id, i.turn_number) for i in found.items]
    assert len(keys) == len(set(keys))
    assert [i.score for i in found.items] == sorted((i.score for i in found.items), reverse=True)


def test_the_reply_to_a_matching_question_is_a_candidate(manager: MemoryManager) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    manager.retrieval = replace(manager.retrieval, mode="dense", semantic_k=1)
    candidates = manager.memory_search.gather(
        "What are we packing for the holiday?", user_id="ana", conversation_id="trip"
    )
    by_turn = {c.item.turn_number: c for c in candidates.items}
    # Semantic search ranked only the question (k=1); its reply joined as a candidate, with
    # its own cosine and the question's.
    assert set(by_turn) == {3, 4}
    assert by_turn[4].cosine is not None
    assert by_turn[4].question_before == pytest.approx(by_turn[3].cosine)
    ranked = candidates.rank(manager.retrieval.weights, 2)
    assert [i.turn_number for i in ranked] == [4, 3]


def test_a_semantic_candidate_keeps_its_keyword_score_past_the_keyword_candidates(
    manager: MemoryManager,
) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    # One keyword candidate only: the other turns that share a word with the query are found
    # by semantic search, and fusion still knows their keyword scores.
    manager.retrieval = replace(manager.retrieval, keyword_k=1)
    query = "Which shoes and clothes should we pack for Lisbon?"
    candidates = manager.memory_search.gather(query, user_id="ana", conversation_id="trip")
    _, scores = manager.store.search_turns(query, user_id="ana", conversation_id="trip")
    keyword_found = [c for c in candidates.items if "tier2-turns" in c.sources]
    assert len(keyword_found) == 1
    others = [c for c in candidates.items if "tier2-turns" not in c.sources]
    completed = [c for c in others if c.keyword is not None]
    assert completed, [c.item.content for c in others]
    for candidate in completed:
        key = (candidate.item.conversation_id, candidate.item.turn_number)
        assert candidate.keyword == pytest.approx(scores[key])
    assert all(c.cosine is not None for c in candidates.items)


def test_recent_turns_are_left_out_and_can_still_be_a_question_before(
    manager: MemoryManager,
) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    found = manager.find("What should we pack?", user_id="ana", limit=6, exclude=[("trip", 3)])
    numbers = [i.turn_number for i in found.items]
    assert 3 not in numbers
    assert numbers[0] == 4  # the reply to the excluded question


def test_a_dated_question_prefers_turns_of_that_day(manager: MemoryManager) -> None:
    add(manager, "food", "ana", "We had pizza for dinner.", "Sounds tasty.", day=0)
    add(manager, "food", "ana", "We had pizza for dinner.", "Again!", day=20)
    drain(manager)
    found = manager.find("What did we have for dinner on 21 May 2024?", user_id="ana", limit=2)
    assert found.items[0].timestamp.date() == (DAY + timedelta(days=20)).date()
    found = manager.find("What did we have for dinner on 1 May 2024?", user_id="ana", limit=2)
    assert found.items[0].timestamp.date() == DAY.date()


def test_a_question_asking_when_prefers_the_turn_that_says_when(manager: MemoryManager) -> None:
    add(
        manager,
        "eva",
        "ana",
        "Eva loves her job in Berlin.",
        "Berlin is great.",
        "Eva started the job in 2021.",
        "Good for her.",
    )
    drain(manager)
    question = "When did Eva start her job in Berlin?"
    assert manager.find(question, user_id="ana", limit=4).items[0].turn_number == 3
    # Without the rules for questions asking when, the closer match of meaning comes first.
    weights = replace(manager.retrieval.weights, when=0.0, when_keyword=0.4)
    manager.retrieval = replace(manager.retrieval, weights=weights)
    assert manager.find(question, user_id="ana", limit=4).items[0].turn_number == 1


def test_user_scope_spans_conversations_and_never_another_user(manager: MemoryManager) -> None:
    add(manager, "trip", "ana", *TRIP)
    add(manager, "work", "ana", "The Lisbon office opens in June.")
    add(manager, "secret", "bob", "I also fly to Lisbon on the third of May.")
    drain(manager)
    found = manager.find("Lisbon", user_id="ana", limit=10)
    assert {i.conversation_id for i in found.items} == {"trip", "work"}
    only = manager.find("Lisbon", user_id="ana", conversation_id="work", limit=10)
    assert {i.conversation_id for i in only.items} == {"work"}


def test_common_words_are_left_out_of_the_embedded_query(manager: MemoryManager) -> None:
    assert dense_query("What did Ana's sister say?", {"ana", "s"}) == "What did ' sister say?"
    assert dense_query("Ana", {"ana"}) == "Ana"  # nothing would be left
    add(manager, "chat", "ana", *[f"Ana: message {i} about topic{i}" for i in range(60)])
    store = manager.store
    assert store.common_words("What did Ana say about topic7?", user_id="ana") == {"ana"}
    assert store.common_words("Ana", user_id="ana", min_rows=100) == set()
    assert store.common_words("Ana", user_id="bob") == set()  # a scope with no turns


def test_a_tier_that_fails_is_named_and_the_other_answers(
    manager: MemoryManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)

    def broken(*_: Any, **__: Any) -> Any:
        raise StorageError("database is locked")

    monkeypatch.setattr(manager.store, "search", broken)
    monkeypatch.setattr(manager.store, "common_words", broken)
    found = manager.find("When is our flight to Lisbon?", user_id="ana", limit=3)
    assert any(reason.startswith("tier2 keyword search") for reason in found.degraded)
    assert found.items[0].turn_number == 1
    assert found.items[0].sources == ("tier3",)
    monkeypatch.undo()
    assert manager.tier3 is not None
    manager.tier3.index.close()
    found = manager.find("When is our flight to Lisbon?", user_id="ana", limit=3)
    assert any(reason.startswith("tier3 semantic search") for reason in found.degraded)
    assert found.items[0].sources == ("tier2-turns",)


def test_every_read_path_returns_the_same_ranking(manager: MemoryManager) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    query = "who looks after the cat?"
    found = manager.find(query, user_id="ana", conversation_id="trip", limit=4)
    searched = manager.search("trip", "ana", query, k=4)
    retriever = MemoryRetriever(search=manager, user_id="ana", k=4)
    docs = retriever.invoke(query, conversation_id="trip")
    expected = [(i.turn_number, i.score) for i in found.items]
    assert [(i.turn_number, i.score) for i in searched.items] == expected
    assert [(d.metadata["turn_number"], d.metadata["score"]) for d in docs] == expected
    assert docs[0].page_content == TRIP[4]
    assert docs[0].metadata["sources"] == list(found.items[0].sources)


async def test_retriever_ainvoke_takes_the_per_call_arguments(manager: MemoryManager) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    retriever = MemoryRetriever(search=manager, user_id="ana", k=4)
    query = "who looks after the cat?"
    docs = await retriever.ainvoke(query, conversation_id="trip", k=2)
    expected = retriever.invoke(query, conversation_id="trip", k=2)
    assert len(docs) == 2
    assert [(d.page_content, d.metadata) for d in docs] == [
        (d.page_content, d.metadata) for d in expected
    ]


def test_keyword_search_in_a_worker_thread_changes_nothing(manager: MemoryManager) -> None:
    add(manager, "trip", "ana", *TRIP)
    drain(manager)
    query = "When do we leave for Lisbon, and what do we pack?"
    parallel = manager.find(query, user_id="ana", limit=6)
    manager.retrieval = replace(manager.retrieval, parallel=False)
    assert manager.find(query, user_id="ana", limit=6) == parallel
    manager.close()  # stops the worker threads; a later search starts them again
    manager.retrieval = replace(manager.retrieval, parallel=True)
    assert manager.find(query, user_id="ana", limit=6) == parallel
    manager.close()
