"""Scoring a reply against LoCoMo's reference answer: answer F1 and "contains the answer".

Both compare normalized text: lower-cased, punctuation and the articles (and "and") removed,
as LoCoMo's evaluation normalizes (its Porter stemming left out: tokens are compared
unstemmed). For multi-hop questions the reference is a comma-separated list and each part is
scored on its own:

- :func:`answer_f1`: token-overlap F1 with the reference (a multi-hop reference's parts each
  matched to their best part of the reply, and averaged);
- :func:`contains_answer`: whether the reply holds the reference's words in order (every part
  of a multi-hop reference): a judge-free accuracy that a long but right reply does not lose,
  as it loses F1 precision.

Example:
    >>> answer_f1("The Lisbon trip!", "lisbon trip", 4)
    1.0
    >>> contains_answer("She went to Lisbon, by train.", "Lisbon", 4)
    True
"""

from __future__ import annotations

import re
import statistics
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = frozenset(string.punctuation)
#: LoCoMo's multi-hop category: references list several answers.
MULTI_HOP = 1


def normalize_answer(text: str) -> list[str]:
    """LoCoMo's answer normalization, as tokens."""
    lowered = text.lower().replace(",", " ")
    without = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    return _ARTICLES.sub(" ", without).split()


def token_f1(prediction: str, reference: str) -> float:
    """Token-overlap F1 of two answers after normalization (0..1)."""
    predicted, gold = normalize_answer(prediction), normalize_answer(reference)
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _parts(text: str) -> list[str]:
    return [part for part in text.split(",") if part.strip()] or [text]


def answer_f1(prediction: str, reference: str, category: int) -> float:
    """LoCoMo's answer F1 of one reply (0..1); multi-hop references are scored per part."""
    if category != MULTI_HOP:
        return token_f1(prediction, reference)
    replies = _parts(prediction)
    return statistics.fmean(
        max(token_f1(reply, part) for reply in replies) for part in _parts(reference)
    )


def contains_answer(prediction: str, reference: str, category: int) -> bool:
    """Whether the normalized reply holds the normalized reference as a run of words.

    A multi-hop reference counts when the reply holds every one of its comma-separated parts.
    A reference with no words (only punctuation) is never contained.
    """
    reply = f" {' '.join(normalize_answer(prediction))} "
    parts = _parts(reference) if category == MULTI_HOP else [reference]
    wanted = [" ".join(normalize_answer(part)) for part in parts]
    return all(words and f" {words} " in reply for words in wanted)
