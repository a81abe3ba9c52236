"""The small interface every tier-3 vector backend implements, and the types it speaks.

Backends (:mod:`.edge` for the embedded default, :mod:`.pgvector` for PostgreSQL with
pgvector, :mod:`.qdrant` for a Qdrant server, cluster or qdrant-client's local/in-memory modes)
keep their own types behind this interface, so the rest of memory_chain never imports a
vector engine.

Points carry a flat payload (``conversation_id``, ``user_id``, ``turn_number``, ``role``,
``content``, ``timestamp``, ``tokens``, ``summary``, ``tags``). Scores are cosine
similarities: **higher is more similar** (1.0 for the same direction).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from memory_chain.errors import InvalidInputError, VectorStoreError
from memory_chain.schemas import as_utc

#: Namespace of point ids; ``point_id`` must never change, or reindexing would duplicate.
POINT_NAMESPACE = uuid.UUID("5b0f3a52-3c1e-4d55-9d36-6f0a39c0e3b1")


@functools.lru_cache(maxsize=65536)
def point_id(user_id: str, conversation_id: str, turn_number: int) -> str:
    """The deterministic id of a turn's point: embedding a turn twice overwrites one point.

    Conversation ids are each user's own (two users may both have a "notes"), so the owner is
    part of the id. Cached: retrieval asks for the ids of a hundred neighbouring turns per
    query.
    """
    return str(uuid.uuid5(POINT_NAMESPACE, f"{user_id}/{conversation_id}\x1f{turn_number}"))


def chunk_point_id(user_id: str, conversation_id: str, turn_number: int, chunk: int) -> str:
    """The id of a long turn's ``chunk``-th part (chunk 0 is the turn's own point)."""
    if chunk == 0:
        return point_id(user_id, conversation_id, turn_number)
    key = f"{user_id}/{conversation_id}\x1f{turn_number}\x1f{chunk}"
    return str(uuid.uuid5(POINT_NAMESPACE, key))


@dataclass(frozen=True, slots=True)
class TurnPayload:
    """The tier-3 payload of one turn: flat fields, so that filters can use payload indexes."""

    conversation_id: str
    user_id: str
    turn_number: int
    role: str
    content: str
    timestamp: datetime
    tokens: int | None = None
    summary: str | None = None
    tags: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready payload; ``timestamp`` as RFC 3339 in UTC (naive values taken as UTC)."""
        return {
            "conversation_id": self.conversation_id,
            "user_id": self.user_id,
            "turn_number": self.turn_number,
            "role": self.role,
            "content": self.content,
            "timestamp": as_utc(self.timestamp).isoformat(),
            "tokens": self.tokens,
            "summary": self.summary,
            "tags": list(self.tags),
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> TurnPayload:
        """Inverse of :meth:`to_dict`."""
        return cls(
            conversation_id=payload["conversation_id"],
            user_id=payload["user_id"],
            turn_number=int(payload["turn_number"]),
            role=payload["role"],
            content=payload["content"],
            timestamp=datetime.fromisoformat(payload["timestamp"]),
            tokens=payload.get("tokens"),
            summary=payload.get("summary"),
            tags=tuple(payload.get("tags") or ()),
        )


@dataclass(frozen=True, slots=True)
class VectorPoint:
    """A point to store: ``id`` is :func:`point_id` of the payload's turn."""

    id: str
    vector: Sequence[float]
    payload: TurnPayload


@dataclass(frozen=True, slots=True)
class VectorHit:
    """A search result; ``score`` is cosine similarity, higher is more similar."""

    id: str
    score: float
    payload: TurnPayload


@dataclass(frozen=True, slots=True)
class VectorFilter:
    """Which points a search, count or delete applies to.

    ``user_id`` is required for searches: tier 3 never searches across users. ``roles`` is a
    tuple of role names (an empty tuple matches nothing); ``since`` and ``until`` are
    inclusive, naive values are taken as UTC; ``ids`` keeps only these point ids (ids of
    points that do not exist are ignored; an empty tuple matches nothing); ``tags`` keeps the
    points with any of these tags (an empty tuple matches nothing).
    """

    user_id: str | None
    conversation_id: str | None = None
    roles: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None
    ids: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Match:
    """A payload condition: ``key`` equals one of ``values``."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HasIds:
    """A point condition: its id is one of ``ids``."""

    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A payload condition: ``key`` (a timestamp) within ``gte..lte``, in UTC, inclusive."""

    key: str
    gte: datetime | None
    lte: datetime | None


Condition = Match | TimeRange | HasIds


def filter_conditions(where: VectorFilter | None) -> list[Condition]:
    """The conditions a filter stands for, in engine-neutral form (all must hold)."""
    if where is None:
        return []
    conditions: list[Condition] = []
    if where.user_id is not None:
        conditions.append(Match("user_id", (where.user_id,)))
    if where.conversation_id is not None:
        conditions.append(Match("conversation_id", (where.conversation_id,)))
    if where.roles is not None:
        if isinstance(where.roles, str):
            raise InvalidInputError("roles must be a sequence of role names, not one string")
        conditions.append(Match("role", tuple(where.roles)))
    if where.since is not None or where.until is not None:
        conditions.append(
            TimeRange(
                "timestamp",
                as_utc(where.since) if where.since else None,
                as_utc(where.until) if where.until else None,
            )
        )
    if where.tags is not None:
        if isinstance(where.tags, str):
            raise InvalidInputError("tags must be a sequence of tag names, not one string")
        conditions.append(Match("tags", tuple(where.tags)))
    if where.ids is not None:
        if isinstance(where.ids, str):
            raise InvalidInputError("ids must be a sequence of point ids, not one string")
        conditions.append(HasIds(tuple(check_point_id(value) for value in where.ids)))
    return conditions


def check_point_id(value: str) -> str:
    """Check that a point id is a UUID string (as :func:`point_id` makes)."""
    if not isinstance(value, str) or not _is_uuid(value):
        raise InvalidInputError(
            f"point id {value!r} is not a UUID: build ids with "
            "point_id(user_id, conversation_id, turn)"
        )
    return value


@functools.lru_cache(maxsize=65536)
def _is_uuid(value: str) -> bool:
    # Cached like point_id: retrieval checks the same ids on every query.
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def check_dimension(dimension: int) -> None:
    """Check an index's vector size, as every backend's constructor does first."""
    if dimension < 1:
        raise InvalidInputError(f"dimension must be positive, got {dimension}")


def check_vector(vector: Sequence[float], dimension: int, where: str) -> list[float]:
    """The vector as floats, if it has ``dimension`` components."""
    values = [float(x) for x in vector]
    if len(values) != dimension:
        raise InvalidInputError(
            f"vector has {len(values)} dimensions, {where} expects {dimension}: embed with the "
            "model the index was created for"
        )
    return values


def check_search(where: VectorFilter, k: int) -> None:
    """Check a search's scope and size, as every backend does before it searches.

    Raises:
        InvalidInputError: If ``where`` names no user (tier-3 searches are always one
            user's) or ``k`` is negative.
    """
    if where.user_id is None:
        raise InvalidInputError(
            "tier-3 searches are scoped to one user: pass VectorFilter(user_id=...)"
        )
    if k < 0:
        raise InvalidInputError(f"k must not be negative, got {k}")


#: Points read per page by every backend's ``scroll``.
SCROLL_PAGE = 256


def paged(read_page: Callable[[Any], tuple[list[VectorPoint], Any]]) -> Iterator[VectorPoint]:
    """Every point of a scroll, one page at a time, read lazily.

    Args:
        read_page: Reads the page at an offset (``None``: the first; otherwise what the
            previous page returned, the backend's own type), and returns its points and the
            next page's offset (``None`` after the last page).
    """
    offset: Any = None
    while True:
        points, offset = read_page(offset)
        yield from points
        if offset is None:
            return


def point_from_engine(record: Any) -> VectorPoint:
    """A Qdrant record (``.id``, ``.vector``, ``.payload``) as a :class:`VectorPoint`."""
    return VectorPoint(
        id=str(record.id),
        vector=vector_from_engine(record.id, record.vector),
        payload=payload_from_engine(record.id, record.payload),
    )


def hits_from_engine(found: Iterable[Any]) -> list[VectorHit]:
    """Qdrant's scored points (``.id``, ``.score``, ``.payload``) as :class:`VectorHit`s."""
    return [
        VectorHit(
            id=str(hit.id), score=float(hit.score), payload=payload_from_engine(hit.id, hit.payload)
        )
        for hit in found
    ]


def payload_from_engine(point: object, payload: dict[str, Any] | None) -> TurnPayload:
    """A stored payload as a :class:`TurnPayload`, or a clear error if it is not one."""
    try:
        return TurnPayload.from_dict(payload or {})
    except (KeyError, TypeError, ValueError) as exc:
        raise VectorStoreError(
            f"point {point} has no valid turn payload ({exc!r}): was the collection written "
            "by something other than memory_chain? Use another collection name"
        ) from exc


def users_payloads(user_id: str, records: Iterable[Any]) -> list[TurnPayload]:
    """The payloads of engine records (``.id``, ``.payload``) that are ``user_id``'s."""
    payloads = [payload_from_engine(record.id, record.payload) for record in records]
    return [payload for payload in payloads if payload.user_id == user_id]


def vector_from_engine(point: object, vector: object) -> list[float]:
    """A stored point's single dense vector."""
    if isinstance(vector, list) and all(isinstance(x, float | int) for x in vector):
        return [float(x) for x in vector]
    raise VectorStoreError(f"point {point} has no single dense vector: got {type(vector)}")


@runtime_checkable
class VectorIndex(Protocol):
    """One collection of turn vectors.

    Implementations do no I/O in their constructor; :meth:`open` creates or loads the
    collection (with payload indexes on ``conversation_id``, ``user_id``, ``role`` and
    ``timestamp``). Every method may raise :class:`memory_chain.errors.VectorStoreError`
    (or its subclass ``VectorStoreUnavailableError`` when the engine cannot be reached).
    """

    dimension: int

    def open(self) -> None:
        """Create the collection if missing, or load it; idempotent."""
        ...

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or overwrite points by id; on return they survive a killed process."""
        ...

    def search(self, vector: Sequence[float], where: VectorFilter, k: int) -> list[VectorHit]:
        """The ``k`` points most similar to ``vector`` among those ``where`` selects."""
        ...

    def delete(self, where: VectorFilter) -> None:
        """Remove the points ``where`` selects (``VectorFilter(None)`` removes all)."""
        ...

    def count(self, where: VectorFilter | None = None) -> int:
        """Exact number of points ``where`` selects (all when ``None``)."""
        ...

    def scroll(self, where: VectorFilter | None = None) -> Iterator[VectorPoint]:
        """Every point ``where`` selects, with its (normalized) vector, in no set order."""
        ...

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[TurnPayload]:
        """The payloads of the points with these ids among ``user_id``'s, in no set order.

        Ids of points that do not exist, or are another user's, are left out.
        """
        ...

    def scores(self, vector: Sequence[float], user_id: str, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of ``vector`` with each point of ``ids`` among ``user_id``'s, by id.

        A search without payloads: the cheapest way to score known points (ids of points that
        do not exist, or are another user's, are left out).
        """
        ...

    def flush(self) -> None:
        """Make every acknowledged upsert survive an OS crash or power loss too."""
        ...

    def drop(self) -> None:
        """Remove the whole collection (``open`` creates it again)."""
        ...

    def close(self) -> None:
        """Release files and connections; idempotent."""
        ...
