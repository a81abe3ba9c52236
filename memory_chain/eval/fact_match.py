"""Extracted facts scored against gold observations: one-to-one matching, held-out thresholds.

A fact extractor is scored on LoCoMo's ``observation`` facts by meaning, not wording: a fact
and an observation *match* when their embeddings' cosine is at least a threshold *t*. Scored
many-to-one (a gold observation recalled when any fact is close to it, a fact correct when it
is close to any observation), ten copies of one right fact count ten times as correct and one
broad fact recalls several observations. One-to-one, as here, each observation pairs with at
most one fact and each fact with at most one observation, and the pairs counted are a
maximum matching of the pairs at or above *t*: precision is matched facts over facts found,
recall matched observations over observations.

*t* cannot be chosen by the F1 it gives (a lower *t* only adds matches, so the lowest always
wins); it is chosen so that a fact rarely matches an observation of someone else's life
(:func:`chance_threshold`), and leave-one-conversation-out (:func:`held_out`): each
conversation is scored at the *t* chosen on the others.

Example:
    >>> import numpy as np
    >>> gold = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> found = np.array([[1.0, 0.0], [1.0, 0.0]])  # two copies of the first observation
    >>> match_counts(gold, found, 0.9)
    Counts(matched=1, gold=2, found=2)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: The thresholds tried: 0.40, 0.45, ..., 0.80.
THRESHOLDS = tuple(round(0.40 + 0.05 * i, 2) for i in range(9))

#: The share of facts a threshold lets match another conversation's observations.
CHANCE_RATE = 0.05


@dataclass(frozen=True, slots=True)
class Counts:
    """One comparison's (or a sum's) matched pairs, gold observations and facts found."""

    matched: int
    gold: int
    found: int

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.matched + other.matched, self.gold + other.gold, self.found + other.found
        )


@dataclass(frozen=True, slots=True)
class Scores:
    """Precision, recall and F1 of summed :class:`Counts`."""

    precision: float
    recall: float
    f1: float

    @classmethod
    def of(cls, counts: Sequence[Counts]) -> Scores:
        """The scores of the sum of ``counts`` (micro-averaged)."""
        total = sum(counts, Counts(0, 0, 0))
        precision = total.matched / total.found if total.found else 0.0
        recall = total.matched / total.gold if total.gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return cls(precision, recall, f1)

    def f(self) -> tuple[float, float, float]:
        """(precision, recall, F1)."""
        return self.precision, self.recall, self.f1


def maximum_matching(allowed: np.ndarray) -> int:
    """The size of a maximum matching of a bipartite graph given as a boolean matrix.

    Rows and columns are the two sides; ``allowed[i, j]`` says row ``i`` may pair with column
    ``j``. Kuhn's augmenting paths: enough for the tens of facts a session yields.
    """
    owner = [-1] * allowed.shape[1]  # the row each column is paired with

    def augment(row: int, seen: list[bool]) -> bool:
        for column in np.flatnonzero(allowed[row]):
            if seen[column]:
                continue
            seen[column] = True
            if owner[column] < 0 or augment(owner[column], seen):
                owner[column] = row
                return True
        return False

    return sum(augment(row, [False] * allowed.shape[1]) for row in range(allowed.shape[0]))


def match_counts(gold: np.ndarray, found: np.ndarray, t: float) -> Counts:
    """One-to-one :class:`Counts` of ``found`` facts against ``gold`` at threshold ``t``.

    Args:
        gold: The observations' unit-length embeddings, one row each.
        found: The extracted facts' unit-length embeddings, one row each.
        t: The least cosine of a matching pair.
    """
    if not len(gold) or not len(found):
        return Counts(0, len(gold), len(found))
    return Counts(maximum_matching(gold @ found.T >= t), len(gold), len(found))


def lenient(gold: np.ndarray, found: np.ndarray, t: float) -> tuple[int, int]:
    """The earlier many-to-one rule, for comparison.

    Returns:
        (observations with some fact at ``t``, facts with some observation at ``t``).
    """
    if not len(gold) or not len(found):
        return 0, 0
    close = gold @ found.T >= t
    return int(close.any(axis=1).sum()), int(close.any(axis=0).sum())


def first_person_as(name: str, text: str) -> str:
    """A first-person fact about ``name`` in the third person, roughly ("I'm" → "Ana is")."""
    text = re.sub(r"\bI(?:'m| am)\b", f"{name} is", text)
    text = re.sub(r"\bI've\b", f"{name} has", text)
    text = re.sub(r"\bmy\b|\bMy\b", f"{name}'s", text)
    return re.sub(r"\bI\b|\bme\b|\bmyself\b", name, text)


@dataclass(frozen=True, slots=True)
class Session:
    """One session's gold observations (third person) and extracted facts (first person)."""

    gold: tuple[str, ...]
    found: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation's sessions, about ``speaker`` (the user whose facts are extracted)."""

    name: str
    speaker: str
    sessions: tuple[Session, ...]


Embed = Callable[[list[str]], np.ndarray]


def _vectors(embed: Embed, texts: Sequence[str]) -> np.ndarray:
    return np.asarray(embed(list(texts))).reshape(len(texts), -1) if texts else np.zeros((0, 1))


def chance_cosines(
    conversations: Sequence[Conversation], embed: Embed
) -> dict[tuple[str, str], np.ndarray]:
    """Each fact's best cosine with *another* conversation's observations.

    Each conversation's facts, rendered with the other conversation's speaker as their subject
    (so that the name is not what tells them apart), are compared with that conversation's
    observations: those are facts about someone else's life, so every match is by chance.
    Embedded once, for every threshold and fold to read.

    Returns:
        Per ``(own conversation, other conversation)`` name pair with facts and observations,
        the best cosine of each of the own conversation's facts.
    """
    gold = {
        other.name: _vectors(embed, [text for session in other.sessions for text in session.gold])
        for other in conversations
    }
    found: dict[tuple[str, str], np.ndarray] = {}
    for own in conversations:
        facts = [fact for session in own.sessions for fact in session.found]
        for other in conversations:
            if other is own or not facts or not len(gold[other.name]):
                continue
            rendered = _vectors(embed, [first_person_as(other.speaker, fact) for fact in facts])
            found[(own.name, other.name)] = (gold[other.name] @ rendered.T).max(axis=0)
    return found


def _rate(best: Sequence[np.ndarray], t: float) -> float:
    compared = sum(len(cosines) for cosines in best)
    return sum(int((cosines >= t).sum()) for cosines in best) / compared if compared else 0.0


def _lowest_rare(best: Sequence[np.ndarray], rate: float, thresholds: Sequence[float]) -> float:
    return next((t for t in sorted(thresholds) if _rate(best, t) <= rate), max(thresholds))


def chance_rate(conversations: Sequence[Conversation], embed: Embed, t: float) -> float:
    """How often a fact matches an observation of *another* conversation at ``t``.

    The share of (fact, other conversation) comparisons with a match (:func:`chance_cosines`).
    """
    return _rate(list(chance_cosines(conversations, embed).values()), t)


def chance_threshold(
    conversations: Sequence[Conversation],
    embed: Embed,
    *,
    rate: float = CHANCE_RATE,
    thresholds: Sequence[float] = THRESHOLDS,
) -> float:
    """The lowest threshold at which at most ``rate`` of facts match another life's observations.

    A threshold cannot be chosen by the F1 it gives: lowering it only adds matches, so the
    lowest always wins. It is chosen instead so that chance matches are rare
    (:func:`chance_rate`), on the conversations given; the highest threshold when none is.
    """
    return _lowest_rare(list(chance_cosines(conversations, embed).values()), rate, thresholds)


def scored(conversation: Conversation, embed: Embed, t: float) -> tuple[Counts, tuple[int, int]]:
    """A conversation's sessions scored at ``t``, each session apart.

    Returns:
        The one-to-one :class:`Counts` and the many-to-one (recalled, correct) of
        :func:`lenient`, summed over the sessions.
    """
    total, recalled, correct = Counts(0, 0, 0), 0, 0
    for session in conversation.sessions:
        found = [first_person_as(conversation.speaker, fact) for fact in session.found]
        gold_vectors, found_vectors = _vectors(embed, session.gold), _vectors(embed, found)
        total += match_counts(gold_vectors, found_vectors, t)
        more = lenient(gold_vectors, found_vectors, t)
        recalled, correct = recalled + more[0], correct + more[1]
    return total, (recalled, correct)


@dataclass(frozen=True, slots=True)
class Fold:
    """One conversation scored at the threshold chosen on the others."""

    conversation: str
    threshold: float
    counts: Counts
    #: The many-to-one (recalled, correct) at the same threshold.
    lenient: tuple[int, int]


def held_out(
    conversations: Sequence[Conversation],
    embed: Embed,
    *,
    rate: float = CHANCE_RATE,
    thresholds: Sequence[float] = THRESHOLDS,
) -> list[Fold]:
    """Leave-one-conversation-out: each conversation scored at the *t* chosen on the others.

    Args:
        conversations: At least three (the threshold of each is chosen on the others, and a
            chance rate needs two).
        embed: Unit-length embeddings of texts, one row each.
        rate: The chance-match rate the threshold allows (:func:`chance_threshold`).
        thresholds: The thresholds to choose from.

    Raises:
        ValueError: With fewer than three conversations.
    """
    if len(conversations) < 3:
        raise ValueError("held-out thresholds need at least three conversations")
    cosines = chance_cosines(conversations, embed)
    folds = []
    for conversation in conversations:
        # The chance matches among the others only: neither side is the held-out one.
        others = [best for pair, best in cosines.items() if conversation.name not in pair]
        t = _lowest_rare(others, rate, thresholds)
        folds.append(Fold(conversation.name, t, *scored(conversation, embed, t)))
    return folds
