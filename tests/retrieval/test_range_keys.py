"""Fact-augmented keys: a turn found under what consolidation learnt from its range."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from memory_chain.retrieval.candidates import Candidates
from memory_chain.retrieval.fusion import Candidate, FusionWeights
from memory_chain.retrieval.range_keys import RangeKey, credit_ranges, key_text
from memory_chain.schemas import MemoryItem
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from tests.retrieval.items import turn

TURNS = {
    1: "user: Morning! Busy week ahead.",
    2: "assistant: Anything special?",
    3: "user: I start at St Mary's on Monday, night shifts on the ward.",
    4: "assistant: Good luck!",
    5: "user: We got a puppy, a beagle called Toby.",
    6: "assistant: Lovely.",
}
KEYS = [
    RangeKey("c", 1, 4, key_text("Ana starts a new job.", ["I am a nurse at St Mary's."])),
    RangeKey("c", 5, 6, key_text("Ana's new pet.", ["I have a beagle named Toby."])),
]


def test_key_text_is_the_summary_then_the_facts() -> None:
    assert key_text(" A summary. ", ["Fact one.", " ", "Fact two."]) == (
        "A summary. Fact one. Fact two."
    )
    assert key_text(None, ["Only a fact."]) == "Only a fact."


def test_a_question_worded_like_the_fact_finds_the_turn_through_its_key(
    embeddings: SentenceEmbeddings,
) -> None:
    question = "What is Ana's profession?"
    query = np.asarray(embeddings.embed_query(question))
    stored = embeddings.embed_documents(list(TURNS.values()))
    vectors = {n: np.asarray(v) for n, v in zip(TURNS, stored, strict=True)}
    # Semantic search alone found the other range's turn and the greeting.
    found = Candidates(
        [Candidate(turn(n, TURNS[n]), ["tier3"], cosine=float(vectors[n] @ query)) for n in (1, 5)],
        [],
        keyword=False,
        semantic=True,
        vector=query.tolist(),
    )
    key_vectors = np.asarray(embeddings.embed_documents([k.text for k in KEYS]))
    hits = [(k, float(c)) for k, c in zip(KEYS, key_vectors @ query, strict=True)]
    assert hits[0][1] > hits[1][1]  # the fact is worded like the question

    def turns_of(key: RangeKey) -> list[tuple[MemoryItem, float | None]]:
        return [
            (turn(n, TURNS[n]), float(vectors[n] @ query)) for n in range(key.first, key.last + 1)
        ]

    credit_ranges(found, hits, turns_of, range_k=1)
    by_number = {c.item.turn_number: c for c in found.items}
    assert sorted(by_number) == [1, 2, 3, 4, 5]  # the first range's turns were added
    assert by_number[3].sources == ["range-key"]
    assert by_number[1].sources == ["tier3", "range-key"]
    assert by_number[3].range_cosine == pytest.approx(hits[0][1])
    assert by_number[5].range_cosine is None  # its range was not among the best

    on = found.rank(replace(FusionWeights(), range_key=0.5), 5)
    # The answer (turn 3) was no candidate; its range's key makes it one and lifts the whole
    # range (the credit is the same for each of its turns) above the other range's turn.
    assert {i.turn_number for i in on[:4]} == {1, 2, 3, 4}
    assert on[4].turn_number == 5
    assert on[4].score == pytest.approx(off_score(found, 5))
    expected = off_score(found, on[0].turn_number) + 0.5 * hits[0][1]
    assert on[0].score == pytest.approx(expected, abs=1e-5)


def off_score(found: Candidates, number: int | None) -> float:
    ranked = found.rank(FusionWeights(), 10)
    return next(i.score for i in ranked if i.turn_number == number)


def test_range_key_weight_cannot_be_negative() -> None:
    with pytest.raises(ValueError, match="range_key must not be negative"):
        FusionWeights(range_key=-0.1)
