"""Extraction scoring: one-to-one matching and thresholds chosen on other conversations."""

from __future__ import annotations

import numpy as np
import pytest

from memory_chain.eval.fact_match import (
    Conversation,
    Counts,
    Scores,
    Session,
    chance_rate,
    chance_threshold,
    first_person_as,
    held_out,
    lenient,
    match_counts,
    maximum_matching,
    scored,
)


def unit(*angles: float) -> np.ndarray:
    """Unit vectors in the plane at ``angles`` (degrees): cosines are easy to read."""
    radians = np.radians(angles)
    return np.stack([np.cos(radians), np.sin(radians)], axis=1)


def test_copies_of_one_right_fact_count_once() -> None:
    gold = unit(0, 90)
    found = unit(0, 0, 0)  # three copies of the first observation
    assert match_counts(gold, found, 0.9) == Counts(matched=1, gold=2, found=3)
    # The earlier, lenient rule counted all three facts correct.
    assert lenient(gold, found, 0.9) == (1, 3)


def test_one_broad_fact_recalls_one_observation() -> None:
    gold = unit(0, 20)  # two observations close to each other
    found = unit(10)  # one fact between them, cosine 0.98 with each
    assert match_counts(gold, found, 0.9) == Counts(1, 2, 1)
    assert lenient(gold, found, 0.9) == (2, 1)


def test_the_matching_is_maximum_not_greedy() -> None:
    # Row 0 may pair with columns 0 and 1, row 1 only with column 0: a greedy pairing of
    # row 0 with column 0 leaves row 1 alone; the maximum pairs both.
    allowed = np.array([[True, True], [True, False]])
    assert maximum_matching(allowed) == 2
    assert maximum_matching(np.zeros((3, 2), dtype=bool)) == 0


def test_empty_sides_count_what_is_there() -> None:
    assert match_counts(unit(0, 90), np.zeros((0, 2)), 0.5) == Counts(0, 2, 0)
    assert match_counts(np.zeros((0, 2)), unit(0), 0.5) == Counts(0, 0, 1)
    assert Scores.of([Counts(0, 0, 0)]) == Scores(0.0, 0.0, 0.0)


def test_scores_are_micro_averaged() -> None:
    scores = Scores.of([Counts(1, 2, 1), Counts(1, 2, 3)])
    assert scores.precision == pytest.approx(2 / 4)
    assert scores.recall == pytest.approx(2 / 4)
    assert scores.f1 == pytest.approx(0.5)


def test_a_first_person_fact_is_rendered_about_the_speaker() -> None:
    assert first_person_as("Ana", "I'm a nurse and my cat likes me.") == (
        "Ana is a nurse and Ana's cat likes Ana."
    )


class Table:
    """Embeddings looked up by text: each text an angle in the plane (cosines easy to read)."""

    def __init__(self, angles: dict[str, float]) -> None:
        self.angles = angles

    def __call__(self, texts: list[str]) -> np.ndarray:
        return unit(*(self.angles[text] for text in texts))


def _life(name: str, speaker: str, gold: str, fact: str) -> Conversation:
    return Conversation(name, speaker, (Session((gold,), (fact,)),))


def test_the_threshold_keeps_chance_matches_with_other_lives_rare() -> None:
    # Each conversation's fact is 20 degrees from its own observation (cosine 0.94) and,
    # rendered about the other speaker, 40 degrees from the other's (cosine 0.77).
    embed = Table(
        {
            "Ana is a nurse.": 0,
            "Bo is a pilot.": 90,
            "Ana flies.": 20,  # a's fact ("I flies.") about Ana
            "Bo flies.": 50,  # ...and about Bo
            "Bo swims.": 110,  # b's fact about Bo
            "Ana swims.": 40,  # ...and about Ana
        }
    )
    lives = [
        _life("a", "Ana", "Ana is a nurse.", "I flies."),
        _life("b", "Bo", "Bo is a pilot.", "I swims."),
    ]
    assert chance_rate(lives, embed, 0.75) == 1.0  # every fact matches the other life
    assert chance_rate(lives, embed, 0.8) == 0.0
    assert chance_threshold(lives, embed, thresholds=(0.7, 0.75, 0.8, 0.95)) == 0.8
    # Scored at it, each conversation's own fact matches its own observation.
    assert scored(lives[0], embed, 0.8) == (Counts(1, 1, 1), (1, 1))
    # When no threshold keeps chance matches rare, the highest is used.
    assert chance_threshold(lives, embed, thresholds=(0.5, 0.7)) == 0.7


def test_each_conversation_is_scored_at_the_threshold_the_others_chose() -> None:
    # b's and c's facts are close to each other's observations (chance matches at 0.6),
    # a's are far from both: a is scored at 0.95, b and c at 0.6.
    embed = Table(
        {
            "A gold": 0,
            "A fa": 25,  # cosine 0.906 with A gold: matches at 0.6, not at 0.95
            "B fa": 190,
            "C fa": 220,
            "B gold": 100,
            "B fb": 110,
            "A fb": 90,
            "C fb": 155,  # cosine 0.906 with C gold
            "C gold": 130,
            "C fc": 140,
            "A fc": 90,
            "B fc": 125,  # cosine 0.906 with B gold
        }
    )
    lives = [_life(name, name.upper(), f"{name.upper()} gold", f"I f{name}") for name in "abc"]
    folds = {fold.conversation: fold for fold in held_out(lives, embed, thresholds=(0.6, 0.95))}
    assert [folds[name].threshold for name in "abc"] == [0.95, 0.6, 0.6]
    assert folds["a"].counts == Counts(0, 1, 1)
    assert folds["a"].lenient == (0, 0)
    assert folds["b"].counts == Counts(1, 1, 1)
    assert folds["c"].counts == Counts(1, 1, 1)


def test_held_out_needs_three_conversations() -> None:
    lives = [_life(n, n, "g", "f") for n in "ab"]
    with pytest.raises(ValueError, match="at least three conversations"):
        held_out(lives, Table({"g": 0, "f": 0}))
