"""Whether a new fact is one memory has, replaces one, or is new: the deterministic rule.

Similarity alone cannot tell an update from a different fact: with all-MiniLM-L6-v2, "I live
in Paris" / "I live in Berlin" score 0.60 and "I play guitar" / "I play tennis" 0.64, "My
favourite colour is blue" / "... green" 0.85 and "I moved to Lisbon" / "I live in Lisbon"
0.85 (measured 2026-12-05). So the rule only decides what it can decide:

* **the same fact**: the same words (case, spacing and end punctuation aside), or a cosine of
  at least :data:`SAME_COSINE` (a rephrasing that says nothing new): no row is added;
* **a newer value**: both facts name their subject ("home city") and it is the same: the new
  fact supersedes the old one (which keeps its history);
* otherwise a new fact.

What the subject is comes from whoever made the fact (the extractor, or a client that sets
it); an explicit correction names the fact it replaces (``replaces=``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from memory_chain.facts.model import Fact

#: A cosine at which two facts say the same ("My seat is 14C" / "my seat is 14C." 0.985).
SAME_COSINE = 0.95

_SPACES = re.compile(r"\s+")


def normalized(text: str) -> str:
    """``text`` compared loosely: case folded, spaces collapsed, end punctuation dropped."""
    return _SPACES.sub(" ", text.casefold()).strip().rstrip(".!;,").strip()


@dataclass(frozen=True, slots=True)
class Known:
    """A current fact of the user, with its vector when it has one."""

    fact: Fact
    vector: np.ndarray | None


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a new fact.

    Attributes:
        action: ``"same"`` (store nothing), ``"supersede"`` (store it, retire ``target``) or
            ``"add"``.
        target: The known fact it matches or replaces.
    """

    action: Literal["same", "supersede", "add"]
    target: Fact | None = None


def decide(
    text: str, subject: str | None, vector: np.ndarray | None, known: Sequence[Known]
) -> Decision:
    """Reconcile a new fact with the user's current ones (see the module docstring)."""
    key = normalized(text)
    for item in known:
        if normalized(item.fact.text) == key:
            return Decision("same", item.fact)
    if vector is not None:
        best: tuple[float, Fact] | None = None
        for item in known:
            if item.vector is not None:
                score = float(np.dot(vector, item.vector))
                if best is None or score > best[0]:
                    best = (score, item.fact)
        if best is not None and best[0] >= SAME_COSINE:
            return Decision("same", best[1])
    if subject:
        about = normalized(subject)
        for item in known:
            if item.fact.subject and normalized(item.fact.subject) == about:
                return Decision("supersede", item.fact)
    return Decision("add")
