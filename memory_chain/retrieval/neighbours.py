"""The turns around the candidates: a question's answer, and the cosines fusion needs.

A question's answer is the turn after it, so semantic search alone misses it when the answer
says little the query says. After both searches, :func:`complete` gives every turn
candidate its cosine and keyword score where it has one, brings in the answer to each
candidate that asks something, and tells each candidate the cosine of the question before
it (:func:`~memory_chain.retrieval.fusion.score_candidates` credits an answer with its
question's cosine).

Example:
    >>> side = KeywordSide(hits, scores, KnownTurns())  # doctest: +SKIP
    >>> complete(tier3, vector, "ana", pool, side)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_chain.retrieval.candidates import (
    KnownTurns,
    Pool,
    TurnKey,
    payload_item,
    question_before,
    turn_of,
    wanted_neighbours,
)
from memory_chain.retrieval.fusion import is_question
from memory_chain.schemas import KeywordHit
from memory_chain.tiers.vectors.tier import Tier3


@dataclass
class KeywordSide:
    """What the keyword worker finds.

    Attributes:
        hits: The keyword candidates: the best turns, then the best summaries.
        scores: The keyword score of every turn among the best ``keyword_scored`` matches.
        known: The turn hits and their neighbours, read from tier 3 (empty without it).
    """

    hits: list[KeywordHit]
    scores: dict[TurnKey, float]
    known: KnownTurns


def complete(
    tier3: Tier3, vector: list[float], user_id: str, pool: Pool, side: KeywordSide
) -> None:
    """Complete what fusion needs of every candidate, and add the answers to questions.

    Every turn candidate gets its cosine (keyword hits) and its keyword score (semantic
    hits) where it has one; a candidate that asks something brings in the turn after it
    (its answer); each knows the cosine of the turn before it when that turn is a
    question. The text of the turns around the semantic hits is read from tier 3 by id
    now (that of the turns around the keyword hits was read while the query was
    embedded); only the cosines fusion uses are asked for.

    Args:
        tier3: Where the turns' vectors are.
        vector: The query, embedded.
        user_id: Whose turns.
        pool: The candidates so far (completed in place).
        side: What keyword search found.

    Raises:
        MemoryChainError: If tier 3 fails.
    """
    known = side.known
    known.read(tier3, user_id, {key for key in wanted_neighbours(pool) if pool.turn(*key) is None})
    needed: set[TurnKey] = set()
    for candidate in pool.turns():
        conversation, number = key = turn_of(candidate)
        if candidate.cosine is None:
            needed.add(key)
        before = known.payloads.get((conversation, number - 1))
        if (
            before is not None
            and is_question(before.content)
            and pool.turn(conversation, number - 1) is None
        ):
            needed.add((conversation, number - 1))
        after = (conversation, number + 1)
        if (
            after in known.payloads
            and is_question(candidate.item.content)
            and pool.turn(*after) is None
        ):
            needed.add(after)
    # Scored by the engine (a search restricted to these ids), without payloads.
    cosines = tier3.scores(vector, user_id, needed)
    for candidate in pool.turns():
        key = turn_of(candidate)
        if candidate.cosine is None:
            candidate.cosine = cosines.get(key)
        if candidate.keyword is None:
            candidate.keyword = side.scores.get(key)
    for candidate in pool.turns():
        conversation, number = turn_of(candidate)
        answer = (conversation, number + 1)
        payload = known.payloads.get(answer)
        if (
            payload is not None
            and answer in cosines
            and pool.turn(*answer) is None
            and is_question(candidate.item.content)
        ):
            cosine = cosines[answer]
            keyword = side.scores.get(answer)
            pool.add(payload_item(payload, cosine), "tier3", cosine=cosine, keyword=keyword)
    for candidate in pool.turns():
        candidate.question_before = question_before(candidate, pool, known, cosines)


__all__ = ["KeywordSide", "complete"]
