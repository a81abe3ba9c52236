"""SQL text and value conversions of the pgvector backend (:mod:`.pgvector`).

Filters become ``WHERE`` clauses with bound parameters (no value is ever spliced into SQL),
vectors travel in pgvector's text form, and rows come back as :class:`TurnPayload`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_chain.errors import VectorStoreError
from memory_chain.schemas import as_utc
from memory_chain.tiers.vectors.index import (
    HasIds,
    Match,
    TimeRange,
    TurnPayload,
    VectorFilter,
    filter_conditions,
)

#: Payload keys a filter matches on, and their columns.
MATCH_COLUMNS = {"user_id": "user_id", "conversation_id": "conversation_id", "role": "role"}
#: The payload columns every read returns.
COLUMNS = (
    "id, user_id, conversation_id, turn_number, role, content, timestamp, tokens, summary, tags"
)


def vector_literal(values: Sequence[float]) -> str:
    """The text form of a vector in pgvector: ``[x1,x2,...]``.

    Nine significant digits: pgvector stores single-precision floats, which they round-trip
    exactly, and ``%`` formatting is three times faster than ``repr`` per component.
    """
    return _format(len(values)) % tuple(values)


@functools.lru_cache(maxsize=8)
def _format(dimension: int) -> str:
    return "[" + ",".join(["%.9g"] * dimension) + "]"


def parse_vector(value: object) -> list[float]:
    """A stored vector (pgvector's text form, as psycopg returns an unknown type) as floats."""
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        return [float(x) for x in value[1:-1].split(",")] if len(value) > 2 else []
    raise VectorStoreError(f"a stored vector is not a pgvector value: {value!r:.60}")


def unit_vector(values: list[float]) -> list[float]:
    """``values`` scaled to length 1 (a zero vector stays as it is)."""
    array = np.asarray(values, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return (array / norm).tolist() if norm > 0 else values


def where_sql(collection: str, where: VectorFilter | None) -> tuple[str, dict[str, Any]]:
    """The WHERE clause (and its parameters) of a filter within this collection."""
    parts = ["collection = :c"]
    params: dict[str, Any] = {"c": collection}
    for number, condition in enumerate(filter_conditions(where)):
        name = f"p{number}"
        if isinstance(condition, Match) and condition.key == "tags":
            # A point has several tags: any of the wanted ones matches (array overlap).
            parts.append(f"tags && CAST(:{name} AS text[])")
            params[name] = list(condition.values)
        elif isinstance(condition, Match):
            column = MATCH_COLUMNS[condition.key]
            if len(condition.values) == 1:
                parts.append(f"{column} = :{name}")
                params[name] = condition.values[0]
            else:
                parts.append(f"{column} = ANY(:{name})")
                params[name] = list(condition.values)
        elif isinstance(condition, HasIds):
            parts.append(f"id = ANY(CAST(:{name} AS uuid[]))")
            params[name] = list(condition.ids)
        elif isinstance(condition, TimeRange):
            if condition.gte is not None:
                parts.append(f"timestamp >= :{name}_gte")
                params[f"{name}_gte"] = condition.gte
            if condition.lte is not None:
                parts.append(f"timestamp <= :{name}_lte")
                params[f"{name}_lte"] = condition.lte
    return " AND ".join(parts), params


def payload_from_row(row: Any) -> TurnPayload:
    """A ``vector_points`` row (its :data:`COLUMNS`) as the turn payload."""
    return TurnPayload(
        conversation_id=row.conversation_id,
        user_id=row.user_id,
        turn_number=row.turn_number,
        role=row.role,
        content=row.content,
        timestamp=as_utc(row.timestamp),
        tokens=row.tokens,
        summary=row.summary,
        tags=tuple(row.tags or ()),
    )
