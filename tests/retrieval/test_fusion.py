"""Score fusion: keyword scores, cosines, question/answer structure and time windows."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memory_chain.retrieval.fusion import Candidate, FusionWeights, rank, score_candidates
from memory_chain.retrieval.timeframes import time_windows
from memory_chain.schemas import MemoryItem
from tests.retrieval.items import WHEN, turn

W = FusionWeights(keyword=0.5, answer_of_question=0.6, question_penalty=0.2, time=0.3)


def test_scores_combine_normalised_bm25_and_cosine() -> None:
    best = Candidate(turn(1), ["tier2-turns", "tier3"], keyword=8.0, cosine=0.4)
    half = Candidate(turn(2), ["tier2-turns"], keyword=4.0, cosine=0.1)
    semantic = Candidate(turn(3), ["tier3"], cosine=0.7)
    scores = score_candidates([best, half, semantic], weights=W)
    assert scores == pytest.approx([0.5 * 1 + 0.5 * 0.4, 0.5 * 0.5 + 0.5 * 0.1, 0.5 * 0.7])
    ranked = rank([half, semantic, best], weights=W, limit=2)
    assert [i.turn_number for i in ranked] == [1, 3]
    assert ranked[0].sources == ("tier2-turns", "tier3")
    assert ranked[0].score == pytest.approx(0.7)


def test_confidence_beats_rank_a_sure_keyword_match_is_not_outvoted() -> None:
    # Reciprocal rank fusion puts an item both lists rank in the middle above the item one
    # list is certain of; score fusion keeps the certain one first.
    sure = Candidate(turn(1), ["tier2-turns", "tier3"], keyword=20.0, cosine=0.30)
    middling = Candidate(turn(2), ["tier2-turns", "tier3"], keyword=6.0, cosine=0.35)
    assert [i.turn_number for i in rank([middling, sure], weights=W, limit=2)] == [1, 2]


def test_an_answer_inherits_its_questions_cosine_and_the_question_loses_some() -> None:
    question = Candidate(turn(1, "What are your plans for the summer?"), ["tier3"], cosine=0.6)
    answer = Candidate(turn(2, "Researching adoption agencies."), ["tier3"], cosine=0.3)
    answer.question_before = 0.6
    scores = score_candidates([question, answer], weights=W)
    assert scores[0] == pytest.approx(0.5 * (0.6 - 0.2 * 0.6))
    assert scores[1] == pytest.approx(0.5 * (0.3 + 0.6 * 0.6))
    assert scores[1] > scores[0]


def test_a_turn_in_the_querys_time_window_gets_the_bonus() -> None:
    inside = Candidate(turn(1, when=datetime(2023, 5, 4, tzinfo=UTC)), cosine=0.3)
    outside = Candidate(turn(2, when=datetime(2023, 6, 20, tzinfo=UTC)), cosine=0.5)
    windows = time_windows("what happened on 3 May 2023?", now=None)
    scores = score_candidates([inside, outside], weights=W, windows=windows)
    assert scores == pytest.approx([0.5 * 0.3 + 0.3, 0.5 * 0.5])
    # The slack reaches a day later; without slack it does not.
    tight = replace(W, time_slack=timedelta(0))
    assert score_candidates([inside], weights=tight, windows=windows)[0] == pytest.approx(0.15)


def test_a_turn_that_tells_of_the_querys_time_gets_the_bonus_whenever_it_was_said() -> None:
    # Said on 20 May 2023, "two weeks ago" is the week of 1-7 May: 13 days after 7 May, past
    # the slack, the turn counts by what it tells, not by when it was said.
    told = Candidate(
        turn(1, "Two weeks ago we adopted a puppy.", when=datetime(2023, 5, 20, tzinfo=UTC)),
        ["tier3"],
        cosine=0.2,
    )
    silent = Candidate(
        turn(2, "We adopted a puppy.", when=datetime(2023, 5, 20, tzinfo=UTC)),
        ["tier3"],
        cosine=0.2,
    )
    windows = time_windows("What did we do on 7 May 2023?", now=None)
    scores = score_candidates([told, silent], weights=W, windows=windows)
    assert scores[0] == pytest.approx(scores[1] + W.time)
    assert told.mentions is not None  # read once, kept
    assert len(told.mentions) == 1
    assert score_candidates([told], weights=W, windows=windows)[0] == pytest.approx(scores[0])


def test_a_query_asking_when_prefers_turns_that_say_when() -> None:
    dated = Candidate(turn(1, "We adopted Luna two weeks ago."), cosine=0.4)
    undated = Candidate(turn(2, "Luna loves the park."), cosine=0.45)
    asking = score_candidates([dated, undated], weights=W, asks_when=True)
    b = 1 - W.when_keyword  # the semantic share of a query asking when
    assert asking == pytest.approx([b * 0.4 + W.when, b * 0.45])
    assert [i.turn_number for i in rank([undated, dated], weights=W, limit=2, asks_when=True)] == [
        1,
        2,
    ]
    # A query that does not ask when gets no bonus, and a zero weight turns it off.
    assert score_candidates([dated, undated], weights=W) == pytest.approx([0.2, 0.225])
    off = replace(W, when=0.0)
    assert score_candidates([dated], weights=off, asks_when=True) == pytest.approx([b * 0.4])


def test_a_query_asking_when_leans_on_keyword_search() -> None:
    worded = Candidate(turn(1, "Eva started the job."), keyword=6.0, cosine=0.2)
    similar = Candidate(turn(2, "Eva loves her job."), keyword=3.0, cosine=0.8)
    weights = replace(W, when_keyword=0.8)
    assert [i.turn_number for i in rank([worded, similar], weights=weights, limit=2)] == [2, 1]
    asking = score_candidates([worded, similar], weights=weights, asks_when=True)
    assert asking == pytest.approx([0.8 * 1 + 0.2 * 0.2, 0.8 * 0.5 + 0.2 * 0.8])
    assert asking[0] > asking[1]


def test_one_source_alone_ranks_by_its_own_score() -> None:
    a = Candidate(turn(1), keyword=2.0, cosine=0.9)
    b = Candidate(turn(2), keyword=4.0, cosine=0.1)
    assert score_candidates([a, b], weights=W, semantic=False) == pytest.approx([0.5, 1.0])
    assert score_candidates([a, b], weights=W, keyword=False) == pytest.approx([0.9, 0.1])


def test_a_turn_not_embedded_yet_counts_as_the_least_similar_found() -> None:
    queued = Candidate(turn(1), keyword=4.0)
    embedded = [Candidate(turn(n), keyword=4.0, cosine=c) for n, c in ((2, 0.2), (3, 0.6))]
    scores = score_candidates([queued, *embedded], weights=W)
    assert scores[0] == pytest.approx(scores[1])


def test_summaries_have_scores_of_their_own() -> None:
    summary = MemoryItem(
        tier="tier2", kind="summary", conversation_id="c", content="s", timestamp=WHEN, score=0,
        turn_range=(1, 10),
    )  # fmt: skip
    scores = score_candidates(
        [Candidate(summary, keyword=3.0), Candidate(turn(1), keyword=9)], weights=W
    )
    assert scores[0] == pytest.approx(0.5)  # the best summary: a


def test_weights_are_checked() -> None:
    with pytest.raises(ValueError, match=r"keyword weight must be within 0\.\.1"):
        FusionWeights(keyword=1.5)
    with pytest.raises(ValueError, match=r"when_keyword weight must be within 0\.\.1"):
        FusionWeights(when_keyword=-0.2)
    with pytest.raises(ValueError, match="must not be negative"):
        FusionWeights(time=-1)
    with pytest.raises(ValueError, match="when must not be negative"):
        FusionWeights(when=-0.1)
