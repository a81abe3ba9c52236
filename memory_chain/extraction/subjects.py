"""A subject for an extracted fact the model left without one, told by meaning.

A fact's subject is what lets a newer value supersede the older ("I moved to Porto" retires
"I live in Lisbon"). Small local models, even with the subject constrained to
:data:`~memory_chain.extraction.prompt.SUBJECTS`, mostly leave it empty (measured with the
embedded 0.5B model on the update suite: moves and new jobs extracted with no subject, so
both values stayed current). So a fact left without one is compared, by the embedding model
memory already runs, with a few generic example sentences of each subject, and of *none of
them* (other people's homes and jobs, hobbies, things owned, a child's birthday, plans): it takes
the subject whose nearest example is at :data:`MIN_COSINE` or more and ahead of every other
class's nearest, "none" included, by :data:`MARGIN`. The examples name no one and no place
of any test data; the thresholds were chosen on a list of 44 hand-written facts (18 with a
subject: 13 found; 26 without: 1 given one, "I'm learning Spanish" as school), never on the
update suite, which checks them.

Example:
    >>> guesser = SubjectGuesser(embed)  # doctest: +SKIP
    >>> guesser.guess(["We moved to Porto last month.", "I love hiking."])  # doctest: +SKIP
    ['home', None]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from memory_chain.errors import MemoryChainError

logger = logging.getLogger(__name__)

#: Example sentences of each subject, and of none (``None``).
EXAMPLES: dict[str | None, tuple[str, ...]] = {
    "home": (
        "I live in this city.",
        "I moved to a new town.",
        "My home is a flat in the city.",
        "We relocated to another place.",
    ),
    "job": (
        "I work as an engineer.",
        "I got a new job at a company.",
        "I started working at a new workplace.",
        "I quit my job.",
    ),
    "partner": (
        "My wife is called Maria.",
        "My husband's name is Tom.",
        "I married my partner.",
        "My girlfriend and I are together.",
    ),
    "school": (
        "I study biology at university.",
        "I go to school.",
        "I enrolled in a college course.",
        "I am a student.",
    ),
    "diet": (
        "I am vegetarian.",
        "I don't eat meat.",
        "I eat fish again.",
        "I follow a vegan diet.",
    ),
    "age": ("I am 34 years old.", "I just turned forty."),
    "birthday": ("My birthday is on 3 May.", "I was born on 12 June."),
    None: (
        "My sister lives in another city.",
        "My friend works at a bank.",
        "My wife works as a teacher.",
        "My son goes to school.",
        "I bought a new car.",
        "I like hiking.",
        "I have a dog.",
        "My daughter turns 7 in May.",
        "I'm allergic to peanuts.",
        "I play the guitar.",
        "My favourite food is pizza.",
        "Someday we want to live by the sea.",
        "We might change jobs someday.",
    ),
}
#: The least cosine between a fact and its subject's nearest example.
MIN_COSINE = 0.5
#: How far that must be ahead of every other class's nearest example.
MARGIN = 0.1

#: Unit vectors of texts (rows), or ``None`` when there is no embedding model.
EmbedUnit = Callable[[list[str]], "np.ndarray | None"]


class SubjectGuesser:
    """Tells the subject of facts by their nearest example (see the module docstring).

    The examples are embedded on first use, once. Creating one does no I/O.

    Args:
        embed: Unit vectors of texts, or ``None`` when no embedding model is at hand.
    """

    def __init__(self, embed: EmbedUnit) -> None:
        self.embed = embed
        self._examples: list[tuple[str | None, np.ndarray]] | None = None

    def guess(self, texts: Sequence[str]) -> list[str | None]:
        """Each text's subject, or ``None`` (none told apart, or no embedding model)."""
        if not texts:
            return []
        examples = self._embedded()
        vectors = self.embed(list(texts))
        if not examples or vectors is None:
            return [None] * len(texts)
        nearest = np.stack([(matrix @ vectors.T).max(axis=0) for _, matrix in examples])
        subjects = [subject for subject, _ in examples]
        guessed: list[str | None] = []
        for column in nearest.T:
            order = np.argsort(-column)
            best, second = column[order[0]], column[order[1]]
            subject = subjects[order[0]]
            ok = subject is not None and best >= MIN_COSINE and best - second >= MARGIN
            guessed.append(subject if ok else None)
        return guessed

    def _embedded(self) -> list[tuple[str | None, np.ndarray]]:
        if self._examples is None:
            flat = [(subject, text) for subject, texts in EXAMPLES.items() for text in texts]
            try:
                vectors = self.embed([text for _, text in flat])
            except MemoryChainError as exc:
                logger.info("subjects not told by meaning: %s", exc)
                return []
            if vectors is None:
                return []
            rows: dict[str | None, list[np.ndarray]] = {}
            for (subject, _), vector in zip(flat, vectors, strict=True):
                rows.setdefault(subject, []).append(vector)
            self._examples = [(subject, np.stack(found)) for subject, found in rows.items()]
        return self._examples
