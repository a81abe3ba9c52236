"""How memory is searched: the depths, the mode and the fusion weights of one search.

:class:`RetrievalSettings` are a server's defaults (a frozen value); each search takes its
mode and its ``limit`` per call and derives the settings it runs with
(:meth:`RetrievalSettings.for_call`), so that nothing shared changes while searches run in
other threads.

Example:
    >>> settings = RetrievalSettings().for_call(mode="keyword", limit=200)
    >>> settings.mode, settings.keyword_alone_k
    ('keyword', 200)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from memory_chain.errors import InvalidInputError
from memory_chain.retrieval.fusion import FusionWeights

RetrievalMode = Literal["hybrid", "dense", "keyword"]

MODES: tuple[RetrievalMode, ...] = get_args(RetrievalMode)


def checked_mode(mode: object) -> RetrievalMode:
    """A retrieval mode, checked.

    Raises:
        InvalidInputError: If ``mode`` is not ``"hybrid"``, ``"dense"`` or ``"keyword"``.
    """
    for known in MODES:
        if mode == known:
            return known
    raise InvalidInputError(f"unknown retrieval mode {mode!r}: use one of {', '.join(MODES)}")


@dataclass(frozen=True)
class RetrievalSettings:
    """How memory is searched.

    Attributes:
        keyword_k: Keyword candidates (turns) next to semantic search. Shallow lists
            suffice (measured: 20, 30 and 100 give the same recall) because a semantic
            candidate gets its keyword score whatever its keyword rank (``keyword_scored``).
        keyword_alone_k: Keyword candidates when keyword search answers alone (the
            ``"keyword"`` mode, or tier 3 off).
        keyword_scored: How many of the best keyword matches keep their score (those past
            ``keyword_k`` are not candidates, but a turn semantic search finds gets its
            keyword score from them: a turn both searches find in their second hundred
            otherwise counts as found by one).
        keyword_floor: Of those past ``keyword_k``, only the ones scoring at least this share
            of the best are read: a lower score adds under ``keyword`` times this share to a
            fused score (measured: 0.1 changes no held-out figure and halves the rows read).
        summary_k: Keyword candidates among range summaries.
        semantic_k: Semantic candidates (20, 30 and 50 give the same held-out recall, within
            0.2 points).
        window_k: Semantic candidates inside each dated time window of the query.
        common_share: Query words found in at least this share of the searched turns are
            left out of the query that is embedded (see
            :func:`~memory_chain.retrieval.candidates.dense_query`).
        common_min_rows: Only scopes of at least this many turns have common words.
        max_items: Items in a chat's memory context.
        scope: Chat context from the ``"user"``'s conversations or only the
            ``"conversation"``.
        mode: ``"hybrid"`` fuses keyword and semantic search; ``"keyword"`` and ``"dense"``
            use one of them (a search may ask for another, :meth:`for_call`).
        weights: The fusion's numbers.
        parallel: Run keyword search in a worker thread while the query is embedded.
    """

    keyword_k: int = 30
    keyword_alone_k: int = 100
    keyword_scored: int = 1000
    keyword_floor: float = 0.1
    summary_k: int = 5
    semantic_k: int = 20
    window_k: int = 20
    common_share: float = 0.3
    common_min_rows: int = 50
    max_items: int = 40
    scope: Literal["user", "conversation"] = "user"
    mode: RetrievalMode = "hybrid"
    weights: FusionWeights = field(default_factory=FusionWeights)
    parallel: bool = True

    def for_call(
        self, *, mode: RetrievalMode | None = None, limit: int | None = None
    ) -> RetrievalSettings:
        """The settings of one search: its own mode, and candidate lists ``limit`` deep.

        Each source's list of turn candidates is at least ``limit`` long, so that a search
        returns ``limit`` items whenever the user's memory holds that many, in every mode
        (fusion then ranks them; items both sources find count once).

        Args:
            mode: The search's mode (``None``: :attr:`mode`).
            limit: The items the search returns (``None``: the depths as set).

        Raises:
            InvalidInputError: On an unknown mode.
        """
        mode = self.mode if mode is None else checked_mode(mode)
        depth = limit or 0
        return replace(
            self,
            mode=mode,
            keyword_k=max(self.keyword_k, depth),
            keyword_alone_k=max(self.keyword_alone_k, depth),
            keyword_scored=max(self.keyword_scored, depth),
            semantic_k=max(self.semantic_k, depth),
        )


__all__ = ["MODES", "RetrievalMode", "RetrievalSettings", "checked_mode"]
