"""The candidates of one query: what the sources found, and the bookkeeping fusion needs.

:class:`Candidates` is what :meth:`MemorySearch.gather
<memory_chain.retrieval.search.MemorySearch.gather>` returns: every item a source found,
once, with its keyword score and cosine, ready to be ranked under any fusion weights.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memory_chain.retrieval.fusion import Candidate, FusionWeights, is_question, item_key, rank
from memory_chain.retrieval.timeframes import TimeWindow
from memory_chain.schemas import KeywordHit, MemoryItem
from memory_chain.tiers.vectors.index import TurnPayload, VectorFilter, VectorHit

if TYPE_CHECKING:
    from memory_chain.tiers.vectors.tier import Tier3

TurnKey = tuple[str, int]


@dataclass
class Candidates:
    """What the sources found for one query, before fusion (see :meth:`MemorySearch.gather`).

    Attributes:
        items: The candidates, keyword hits first.
        windows: The time windows the query names.
        asks_when: Whether the query asks when something happened.
        keyword: Whether keyword search answered.
        semantic: Whether semantic search answered.
        degraded: What failed, in words.
        vector: The query as semantic search embedded it (``None`` if it did not run).
    """

    items: list[Candidate]
    windows: list[TimeWindow]
    keyword: bool
    semantic: bool
    degraded: list[str] = field(default_factory=list)
    asks_when: bool = False
    vector: list[float] | None = None

    def rank(self, weights: FusionWeights, limit: int) -> list[MemoryItem]:
        """The best ``limit`` items under ``weights``."""
        return rank(
            self.items,
            weights=weights,
            limit=limit,
            windows=self.windows,
            asks_when=self.asks_when,
            keyword=self.keyword,
            semantic=self.semantic,
        )


_WORD = re.compile(r"\w+", re.UNICODE)


def dense_query(query: str, common: Collection[str]) -> str:
    """``query`` without the words in ``common`` (lower-case), for semantic search.

    An embedding cannot discount a word the way BM25's IDF does: a word found in most of the
    searched turns (a name that opens every message, a topic the user always talks about)
    makes every turn that mentions it look similar. Leaving such words out lets the words
    that tell the turns apart decide. The whole query when nothing would be left.
    """
    if not common:
        return query
    kept = _WORD.sub(lambda m: "" if m.group(0).lower() in common else m.group(0), query)
    kept = " ".join(kept.split())
    return kept if _WORD.search(kept) else query


def keyword_item(hit: KeywordHit) -> MemoryItem:
    """A tier-2 keyword hit as a memory item (score set by fusion)."""
    return MemoryItem(
        tier="tier2",
        kind=hit.kind,
        conversation_id=hit.conversation_id,
        content=hit.text,
        timestamp=hit.timestamp,
        score=hit.score,
        turn_number=hit.turn_number,
        role=hit.role,
        turn_range=hit.turn_range,
    )


def vector_item(hit: VectorHit) -> MemoryItem:
    """A tier-3 hit as a memory item."""
    return payload_item(hit.payload, hit.score)


def payload_item(payload: TurnPayload, score: float) -> MemoryItem:
    """A tier-3 payload as a memory item."""
    return MemoryItem(
        tier="tier3",
        kind="turn",
        conversation_id=payload.conversation_id,
        content=payload.content,
        timestamp=payload.timestamp,
        score=score,
        turn_number=payload.turn_number,
        role=payload.role,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class Scope:
    """Whose turns a query searches: one user's, or one conversation of theirs.

    Archived conversations are searched only with ``include_archived`` (or when named);
    with ``tags``, only items with any of these tags.
    """

    user_id: str
    conversation_id: str | None
    include_archived: bool = False
    tags: tuple[str, ...] | None = None

    def where(self, **conditions: Any) -> VectorFilter:
        """A vector filter of this scope and ``conditions``."""
        return VectorFilter(
            user_id=self.user_id, conversation_id=self.conversation_id, tags=self.tags, **conditions
        )


class Pool:
    """The candidates of one query, one per item, in the order they were first found."""

    def __init__(self, exclude: Collection[TurnKey]) -> None:
        self.items: list[Candidate] = []
        self._by_key: dict[tuple[Any, ...], Candidate] = {}
        self._excluded = {("turn", conversation, turn) for conversation, turn in exclude}

    def add(
        self,
        item: MemoryItem,
        source: str,
        *,
        keyword: float | None = None,
        cosine: float | None = None,
    ) -> None:
        """Count ``item`` as found by ``source`` (left out if it is an excluded turn)."""
        key = item_key(item)
        if key in self._excluded:
            return
        candidate = self._by_key.get(key)
        if candidate is None:
            candidate = self._by_key[key] = Candidate(item)
            self.items.append(candidate)
        if source not in candidate.sources:
            candidate.sources.append(source)
        if keyword is not None:
            candidate.keyword = keyword
        if cosine is not None and candidate.cosine is None:
            candidate.cosine = cosine

    def turns(self) -> list[Candidate]:
        """The candidates that are turns."""
        return [c for c in self.items if c.item.kind == "turn" and c.item.turn_number]

    def turn(self, conversation_id: str, number: int) -> Candidate | None:
        """The candidate of one turn, if it is one."""
        return self._by_key.get(("turn", conversation_id, number))


def turn_of(candidate: Candidate) -> TurnKey:
    """(conversation, turn number) of a turn candidate."""
    number = candidate.item.turn_number
    assert number is not None
    return candidate.item.conversation_id, number


@dataclass
class KnownTurns:
    """Payloads of neighbouring turns read from tier 3 by id (their text, for fusion).

    Reading by id needs no query vector, so the neighbours of the keyword hits are read in the
    keyword worker thread while the query is being embedded.

    Attributes:
        asked: The turns asked for, found or not (none is asked for twice).
        payloads: Those found.
    """

    asked: set[TurnKey] = field(default_factory=set)
    payloads: dict[TurnKey, TurnPayload] = field(default_factory=dict)

    def read(self, tier3: Tier3, user_id: str, turns: Collection[TurnKey]) -> None:
        """Read the turns of ``turns`` not asked for yet.

        Raises:
            VectorStoreError: If tier 3 cannot be read.
        """
        new = set(turns) - self.asked
        if new:
            self.payloads.update(tier3.payloads(user_id, new))
            self.asked |= new


def keyword_neighbours(hits: Sequence[KeywordHit]) -> set[TurnKey]:
    """The turns next to these keyword hits whose text fusion may need.

    The turn before each turn hit (a question it may answer) and, after a question, the turn
    after it (its answer); the hits themselves are left out (their text is known).
    """
    found = {(hit.conversation_id, hit.turn_number) for hit in hits if hit.kind == "turn"}
    wanted: set[TurnKey] = set()
    for hit in hits:
        number = hit.turn_number
        if hit.kind != "turn" or not number:
            continue
        if number > 1:
            wanted.add((hit.conversation_id, number - 1))
        if is_question(hit.text):
            wanted.add((hit.conversation_id, number + 1))
    return wanted - found


def wanted_neighbours(pool: Pool) -> set[TurnKey]:
    """Turns whose cosine fusion needs and semantic search did not give."""
    wanted: set[TurnKey] = set()
    for candidate in pool.turns():
        conversation, number = turn_of(candidate)
        if candidate.cosine is None:
            wanted.add((conversation, number))
        if number > 1 and pool.turn(conversation, number - 1) is None:
            wanted.add((conversation, number - 1))
        if is_question(candidate.item.content) and pool.turn(conversation, number + 1) is None:
            wanted.add((conversation, number + 1))
    return wanted


def question_before(
    candidate: Candidate, pool: Pool, known: KnownTurns, cosines: dict[TurnKey, float]
) -> float | None:
    """The cosine of the turn before ``candidate`` when that turn is a question."""
    conversation, number = turn_of(candidate)
    key = (conversation, number - 1)
    before = pool.turn(*key)
    if before is not None and before.cosine is not None:
        text, cosine = before.item.content, before.cosine
    elif key in known.payloads and key in cosines:
        text, cosine = known.payloads[key].content, cosines[key]
    else:
        return None
    return cosine if is_question(text) else None
