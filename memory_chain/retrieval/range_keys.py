"""Fact-augmented keys: a turn found also under what consolidation learnt from its range.

A question is often worded like what was learnt from a conversation rather than like the
turn that said it ("What is Ana's job?" against "I start at the hospital on Monday"; the
fact learnt: "Ana is a nurse"). Consolidation summarizes each range of turns and learns the
user's facts from it; a *range key* is that range's summary and facts as one text, embedded
as the turns are (Wu et al., "LongMemEval", 2025, report about 9 % more recall from keys
augmented with the facts of each session).

At search time the query's vector is compared with the range keys of the scope; each turn
of one of the best ``range_k`` ranges is a candidate (those the other searches missed are
added) and carries its range's cosine, which fusion credits with weight
:attr:`~memory_chain.retrieval.fusion.FusionWeights.range_key`
(:func:`~memory_chain.retrieval.fusion.score_candidates`). Nothing here is specific to a
benchmark: a key is whatever consolidation stored for a range.

Example:
    >>> key = RangeKey("c1", 11, 20, key_text("Ana talks about work.", ["I am a nurse."]))
    >>> key.text
    'Ana talks about work. I am a nurse.'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory_chain.retrieval.candidates import Candidates
from memory_chain.retrieval.fusion import Candidate
from memory_chain.schemas import MemoryItem

#: Ranges whose turns a query's best range keys make candidates.
DEFAULT_RANGE_K = 3


@dataclass(frozen=True, slots=True)
class RangeKey:
    """What consolidation learnt from turns ``first``..``last`` of a conversation, as text."""

    conversation_id: str
    first: int
    last: int
    text: str


def key_text(summary: str | None, facts: Sequence[str]) -> str:
    """The text of a range key: the range's summary, then its facts."""
    parts = [summary.strip()] if summary and summary.strip() else []
    return " ".join(parts + [fact.strip() for fact in facts if fact.strip()])


def credit_ranges(
    candidates: Candidates,
    hits: Sequence[tuple[RangeKey, float]],
    turns_of: Callable[[RangeKey], Sequence[tuple[MemoryItem, float | None]]],
    *,
    range_k: int = DEFAULT_RANGE_K,
) -> None:
    """Credit the turns of the best ``range_k`` ranges with their key's cosine.

    Args:
        candidates: One query's candidates (changed in place).
        hits: Range keys of the scope with the query's cosine to each, any order.
        turns_of: The turns of a range, each with the query's cosine to it (``None``:
            unknown), to add those not yet candidates.
        range_k: How many of the best ranges count.
    """
    best = sorted(hits, key=lambda hit: -hit[1])[: max(range_k, 0)]
    by_key = {c.key: c for c in candidates.items}
    for key, cosine in best:
        for item, turn_cosine in turns_of(key):
            found = by_key.get(("turn", item.conversation_id, item.turn_number))
            if found is None:
                found = by_key[("turn", item.conversation_id, item.turn_number)] = Candidate(
                    item, ["range-key"], cosine=turn_cosine
                )
                candidates.items.append(found)
            elif "range-key" not in found.sources:
                found.sources.append("range-key")
            found.range_cosine = max(found.range_cosine or 0.0, cosine)


__all__ = ["DEFAULT_RANGE_K", "RangeKey", "credit_ranges", "key_text"]
