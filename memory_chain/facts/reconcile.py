"""Whether two facts say the same, or are two values of one subject: the similarity tests.

Similarity alone cannot tell an update from a different fact: with all-MiniLM-L6-v2, "I live
in Paris" / "I live in Berlin" score 0.60 and "I play guitar" / "I play tennis" 0.64, "My
favourite colour is blue" / "... green" 0.85 and "I moved to Lisbon" / "I live in Lisbon"
0.85 (measured 2026-12-05). So the tests only decide what they can decide
(:mod:`memory_chain.facts.rules` applies them, with the order of values and corrections, to
decide what a new fact does):

* **the same fact**: the same words (case, spacing and end punctuation aside), or a cosine of
  at least :data:`SAME_COSINE` (a rephrasing that says nothing new): :func:`same_as`;
* **a newer value**: both facts name their subject ("home city") and it is the same (compared
  by :func:`~memory_chain.facts.grounding.subject_key`: case, articles and plurals aside),
  and the two facts are related: a cosine of at least :data:`SUBJECT_COSINE`, so that a
  wrong subject cannot retire a fact about something else. Without vectors the subject
  alone decides. A subject of which several hold at once ("hobby", "pet", "friend") never
  does (it is among the vague ones, :data:`memory_chain.facts.grounding.VAGUE_SUBJECTS`):
  :func:`updated_by_subject`.

What the subject is comes from whoever made the fact (the extractor, or a client that sets
it); an explicit correction names the fact it replaces (``replaces=``). A fact saved
without a subject (an explicit "remember that ...") gets one when the same fact comes with
one later (:func:`filled`): from then on a newer value supersedes it
(:func:`updated_by_subject`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memory_chain.facts.grounding import subject_key
from memory_chain.facts.model import Fact, FactKind

#: A cosine at which two facts say the same ("My seat is 14C" / "my seat is 14C." 0.985).
SAME_COSINE = 0.95
#: Cosine from which the extractor trusts the model's "replaces" (the model's label is the
#: only other signal). With all-MiniLM-L6-v2, many updates score above it ("I live in
#: Paris" / "I live in Berlin" 0.58, "I live in Lisbon" / "I moved to Porto last month"
#: 0.60, "I love sushi" / "I love pizza" 0.49, "My wife is Anna" / "My wife is Ana" 0.78),
#: facts about different things below (0.12-0.29 in 5 pairs measured).
REPLACES_COSINE = 0.4
#: Cosine from which two facts of the same subject are related enough for the newer to
#: supersede the older. Lower than :data:`REPLACES_COSINE`: there the model's label is the
#: only other signal, here the subject agrees too, and a move told in other words with names
#: the model has never seen scores well below 0.4 ("I live in Marrowick." / "I've moved to
#: Lindqvale." 0.28, "I got the keys to my new flat in Halvorsby." / "We moved to Quenmouth
#: last weekend." 0.26, "I live in Porto." / "I live in Berlin." 0.40), while a fact given a
#: wrong subject is about something plainly else ("I live in Porto." / "My dog is called
#: Rex." 0.05, / "My wife is Ana." 0.15, / "I am allergic to peanuts." 0.11; all-MiniLM-L6-v2,
#: measured 2026-12-06).
SUBJECT_COSINE = 0.2

_SPACES = re.compile(r"\s+")


def normalized(text: str) -> str:
    """``text`` compared loosely: case folded, spaces collapsed, end punctuation dropped."""
    return _SPACES.sub(" ", text.casefold()).strip().rstrip(".!;,").strip()


@dataclass(frozen=True, slots=True)
class Known:
    """A current fact of the user, with its vector when it has one."""

    fact: Fact
    vector: np.ndarray | None


def same_as(text: str, vector: np.ndarray | None, known: Sequence[Known]) -> Fact | None:
    """The known fact that says what ``text`` says, if any.

    The same words (:func:`normalized`), or else the most similar fact at a cosine of at
    least :data:`SAME_COSINE`.
    """
    key = normalized(text)
    for item in known:
        if normalized(item.fact.text) == key:
            return item.fact
    if vector is not None:
        best: tuple[float, Fact] | None = None
        for item in known:
            if item.vector is not None:
                score = float(np.dot(vector, item.vector))
                if best is None or score > best[0]:
                    best = (score, item.fact)
        if best is not None and best[0] >= SAME_COSINE:
            return best[1]
    return None


def updated_by_subject(
    subject: str | None, vector: np.ndarray | None, known: Sequence[Known]
) -> Fact | None:
    """The known fact a fact about ``subject`` is a newer value of, if any.

    One with the same subject (not a vague one) and, when both have vectors, related to it
    (a cosine of at least :data:`SUBJECT_COSINE`); of several, the most similar.
    """
    about = subject_key(subject)
    if about is None:
        return None
    candidates: list[tuple[float, Fact]] = []
    for item in known:
        if subject_key(item.fact.subject) != about:
            continue
        if vector is None or item.vector is None:
            score = 0.0  # nothing to check the subject with: it decides alone
        else:
            score = float(np.dot(vector, item.vector))
            if score < SUBJECT_COSINE:
                continue  # about something else, whatever the subject says
        candidates.append((score, item.fact))
    if not candidates:
        return None
    # The most similar; of equals, the newest (then by id: the same answer every time).
    return max(candidates, key=lambda c: (c[0], c[1].valid_from, c[1].created_at, c[1].id))[1]


def filled(fact: Fact, subject: str | None, kind: FactKind) -> dict[str, str]:
    """What a known fact learns from the same fact said again: the subject and kind it lacks.

    Returns:
        The fields to set (``subject`` when ``fact`` has none, ``kind`` when ``fact``'s is
        ``"other"``); empty when there is nothing to learn.
    """
    values: dict[str, str] = {}
    if fact.subject is None and subject is not None and subject.strip():
        values["subject"] = subject
    if fact.kind == "other" and kind != "other":
        values["kind"] = kind
    return values
