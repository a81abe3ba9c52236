"""Fusion: one score per memory item from its keyword score, its cosine and the query's time.

Keyword search (BM25) and semantic search (cosine similarity) find different things, and
each is sure of itself in different places. Rank-only fusion (reciprocal rank) throws that
confidence away: a turn both lists rank 15th outranks the one keyword search is certain of.
Here the scores themselves are combined (a convex combination, Bruch et al., "An Analysis of
Fusion Functions for Hybrid Retrieval", 2023):

    score = a * bm25 / best_bm25  +  (1 - a) * semantic  +  time * in_window
                                                       +  when * (asks when, says when)

- ``bm25 / best_bm25`` puts keyword scores on 0..1 whatever the query's length; a turn that
  keyword search did not find has 0.
- ``semantic`` is the cosine of the turn (all-MiniLM-L6-v2 cosines of related text lie
  around 0.3-0.7, the same range as the keyword part), corrected for how conversation works:
  a question is rarely what the user is looking for, its answer is. A turn whose previous
  turn asks something gets ``answer_of_question`` times that question's cosine, and a turn
  that asks something loses ``question_penalty`` of its own.
- ``in_window`` is 1 for a turn said inside a time window the query names
  (:mod:`.timeframes`), extended by ``time_slack``, or that tells of something that
  happened in it ("yesterday", said the day after; :func:`.timeframes.mentioned_windows`).
- A query that asks *when* prefers turns that say when something happened
  (:func:`.timeframes.asks_when`, :func:`.timeframes.mentions_time`), and leans on keyword
  search (``a`` is ``when_keyword`` for it): such a question names its event in the words
  the dated turn used.

Every number was chosen by leave-one-conversation-out cross-validation on LoCoMo
conversations (``memory-chain eval locomo FILE --cross-validate``): each is the value most
folds chose, and the figures held out from the tuning are in ``docs/retrieval.md``.
Summaries are ranked by their keyword score (``a * bm25 / best summary bm25``). The user's
facts are not fused: the prompt has a section of its own for them
(:meth:`memory_chain.tiers.sql.facts.FactStore.profile`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from memory_chain.retrieval.timeframes import TimeWindow, mentioned_windows, mentions_time
from memory_chain.schemas import MemoryItem


@dataclass(frozen=True, slots=True)
class FusionWeights:
    """The numbers of :mod:`.fusion` (see its docstring for what each does).

    Attributes:
        keyword: ``a``: weight of the normalized keyword score; ``1 - a`` is the semantic one.
        answer_of_question: Share of a question's cosine passed to the turn after it.
        question_penalty: Share of its own cosine a question turn loses.
        time: Bonus of a turn inside a time window the query names.
        time_slack: How far past a window's end a turn still counts as inside it.
        when: Bonus of a turn that says when something happened, for a query asking when.
        when_keyword: The keyword share (instead of ``keyword``) for a query asking when.
        range_key: Weight of the cosine of a turn's range key (its range's summary and
            facts, :mod:`.range_keys`), for turns whose range a query's key search found.
    """

    keyword: float = 0.4
    answer_of_question: float = 0.6
    question_penalty: float = 0.2
    time: float = 0.3
    time_slack: timedelta = timedelta(days=7)
    when: float = 0.15
    when_keyword: float = 0.8
    range_key: float = 0.0

    def __post_init__(self) -> None:
        for name in ("keyword", "when_keyword"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} weight must be within 0..1, got {getattr(self, name)}")
        for name in ("answer_of_question", "question_penalty", "time", "when", "range_key"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


def is_question(text: str) -> bool:
    """Whether a turn asks something (it contains a question mark)."""
    return "?" in text


@dataclass(slots=True)
class Candidate:
    """An item found by at least one source, with what fusion needs to score it.

    Attributes:
        item: The item (its ``score`` and ``sources`` are set by :func:`rank`).
        sources: Names of the searches that found it (``"tier2-turns"``, ``"tier3"``, ...).
        keyword: Its BM25 score, when keyword search found it.
        cosine: The query's cosine with its vector, when it has one.
        question_before: The cosine of the turn before it, when that turn is a question.
        mentions: When what it tells happened (:func:`.timeframes.mentioned_windows`), read
            the first time a query names a time and kept for the next rankings.
        range_cosine: The query's cosine with the key of the turn's range, when a range-key
            search found it (:mod:`.range_keys`).
    """

    item: MemoryItem
    sources: list[str] = field(default_factory=list)
    keyword: float | None = None
    cosine: float | None = None
    question_before: float | None = None
    mentions: list[TimeWindow] | None = None
    range_cosine: float | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """Identity: a turn by (conversation, turn) whichever tier found it."""
        return item_key(self.item)


def item_key(item: MemoryItem) -> tuple[Any, ...]:
    """The identity of an item: turns by (conversation, turn) whichever tier found them."""
    if item.kind == "turn" and item.turn_number is not None:
        return ("turn", item.conversation_id, item.turn_number)
    if item.kind == "summary" and item.turn_range is not None:
        return ("summary", item.conversation_id, item.turn_range[0])
    return (item.kind, item.conversation_id, item.turn_number, item.content)


def _in_window(candidate: Candidate, windows: Sequence[TimeWindow], slack: timedelta) -> bool:
    """Whether the turn was said in a window (or ``slack`` after it), or tells of one."""
    said = candidate.item.timestamp
    if any(window.contains(said, after=slack) for window in windows):
        return True
    if candidate.mentions is None:
        candidate.mentions = mentioned_windows(candidate.item.content, said)
    return any(
        window.overlaps(told.start, told.end) for window in windows for told in candidate.mentions
    )


def _semantic(candidate: Candidate, floor: float, weights: FusionWeights) -> float:
    cosine = candidate.cosine if candidate.cosine is not None else floor
    if is_question(candidate.item.content):
        cosine -= weights.question_penalty * cosine
    if candidate.question_before is not None:
        cosine += weights.answer_of_question * candidate.question_before
    return cosine


def score_candidates(
    candidates: Sequence[Candidate],
    *,
    weights: FusionWeights,
    windows: Sequence[TimeWindow] = (),
    asks_when: bool = False,
    keyword: bool = True,
    semantic: bool = True,
) -> list[float]:
    """The fused score of each candidate (higher is better), in the order given.

    Args:
        candidates: Turns and summaries found for one query.
        weights: The fusion's numbers.
        windows: Time windows the query names.
        asks_when: Whether the query asks when something happened.
        keyword: Whether keyword search ran (its part is left out when it did not).
        semantic: Whether semantic search ran.

    Returns:
        One score per candidate.
    """
    best_turn = max((c.keyword or 0.0 for c in candidates if c.item.kind == "turn"), default=0.0)
    best_summary = max(
        (c.keyword or 0.0 for c in candidates if c.item.kind == "summary"), default=0.0
    )
    # A turn not embedded yet (tier-3 queue) ranks as the least similar turn found.
    floor = min((c.cosine for c in candidates if c.cosine is not None), default=0.0)
    # A question asking when names the event in its own words ("When did you adopt Luna?"),
    # and the turn that dates it says so in those words: keyword search is the surer guide.
    share = weights.when_keyword if asks_when else weights.keyword
    a = share if semantic else 1.0
    b = (1.0 - share) if keyword else 1.0
    scores: list[float] = []
    for candidate in candidates:
        kind = candidate.item.kind
        if kind == "summary":
            scores.append(a * (candidate.keyword or 0.0) / best_summary if best_summary else 0.0)
            continue
        score = 0.0
        if keyword and best_turn > 0:
            score += a * (candidate.keyword or 0.0) / best_turn
        if semantic:
            score += b * _semantic(candidate, floor, weights)
        if windows and _in_window(candidate, windows, weights.time_slack):
            score += weights.time
        if asks_when and mentions_time(candidate.item.content):
            score += weights.when
        if candidate.range_cosine is not None:
            score += weights.range_key * candidate.range_cosine
        scores.append(score)
    return scores


def rank(
    candidates: Sequence[Candidate],
    *,
    weights: FusionWeights,
    limit: int,
    windows: Sequence[TimeWindow] = (),
    asks_when: bool = False,
    keyword: bool = True,
    semantic: bool = True,
) -> list[MemoryItem]:
    """The best ``limit`` candidates by fused score, each with its score and sources.

    Ties keep the candidates' order (keyword hits first, best first).
    """
    scores = score_candidates(
        candidates,
        weights=weights,
        windows=windows,
        asks_when=asks_when,
        keyword=keyword,
        semantic=semantic,
    )
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])[: max(limit, 0)]
    return [
        replace(candidates[i].item, score=round(scores[i], 6), sources=tuple(candidates[i].sources))
        for i in order
    ]
