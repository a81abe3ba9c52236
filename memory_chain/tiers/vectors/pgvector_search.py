"""How the pgvector backend finds the nearest points: exactly, or through HNSW.

Measured by ``benchmarks/bench_vectors.py`` (see docs/tier3-vectors.md):

- Every search is filtered by user at least. The filter is served by ordinary B-tree indexes
  on ``(collection, user_id, conversation_id)`` and ``(collection, conversation_id)``.
- **Exact** where the filter is selective: the rows the filter selects are read through the
  B-tree index and ranked by their inner product (a top-k sort). The ranking expression is
  written so that it cannot use the HNSW index, which keeps the planner on the filter.
- **HNSW** where it is not (a user with more than :data:`EXACT_LIMIT` points): the ranking
  uses the HNSW index over ``embedding::vector(<dimension>)`` with pgvector's iterative
  index scans (``hnsw.iterative_scan = strict_order``), which keep scanning the graph until
  ``k`` rows pass the filter instead of returning fewer.
  Which side of the limit a scope is on is counted (at most ``EXACT_LIMIT + 1`` index
  entries) and cached for a minute (:class:`ScopeDecisions`).

Vectors are stored L2-normalized, so the inner product is the cosine similarity; the
distance ``<#>`` returns is its negative.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from sqlalchemy import Connection, text

from memory_chain.tiers.vectors.index import VectorFilter
from memory_chain.tiers.vectors.pgvector_sql import COLUMNS

#: Scopes (user, or user and conversation) with at most this many points are searched
#: exactly; larger ones through HNSW. In a table of 1.14M 384-d points on 2 cores, exact
#: top-5 took 17 ms at 10k points in scope and 44 ms at 30k, HNSW 27 and 17 ms: they cross
#: in between (bench_vectors.py --pgvector, docs/tier3-vectors.md).
EXACT_LIMIT = 20_000
#: Candidates the HNSW scan keeps per step; more is slower and finds more of the true top-k.
EF_SEARCH = 100
#: How long a scope's exact/HNSW decision is reused before it is counted again.
SCOPE_TTL_SECONDS = 60.0
#: Scopes whose decision is cached (least recently used dropped first).
_SCOPE_CACHE = 4_096


def exact_rows(conn: Connection, clause: str, params: dict[str, Any]) -> list[Any]:
    """The ``:k`` rows ``clause`` selects nearest to ``:q``, ranked one by one (no index)."""
    return list(
        conn.execute(
            text(
                f"SELECT {COLUMNS}, embedding <#> CAST(:q AS vector) AS distance "
                f"FROM vector_points WHERE {clause} ORDER BY distance, id LIMIT :k"
            ),
            params,
        ).all()
    )


def hnsw_rows(conn: Connection, dimension: int, clause: str, params: dict[str, Any]) -> list[Any]:
    """The ``:k`` rows ``clause`` selects nearest to ``:q``, through the dimension's HNSW index."""
    dim = dimension
    # SET LOCAL: the scan settings end with this transaction, whatever the pool does next.
    conn.execute(text("SET LOCAL hnsw.iterative_scan = strict_order"))
    conn.execute(text(f"SET LOCAL hnsw.ef_search = {int(EF_SEARCH)}"))
    return list(
        conn.execute(
            text(
                f"SELECT {COLUMNS}, embedding::vector({dim}) <#> CAST(:q AS vector({dim})) "
                f"AS distance FROM vector_points WHERE {clause} AND "
                f"vector_dims(embedding) = {dim} ORDER BY distance LIMIT :k"
            ),
            params,
        ).all()
    )


def is_selective(
    conn: Connection,
    collection: str,
    where: VectorFilter,
    exact_limit: int,
    scopes: ScopeDecisions,
) -> bool:
    """Whether the user (and conversation) scope is small enough for an exact search."""
    if where.ids is not None:
        return True
    key = (str(where.user_id), where.conversation_id)
    cached = scopes.get(key)
    if cached is not None:
        return cached
    scope = "collection = :c AND user_id = :u"
    params: dict[str, Any] = {"c": collection, "u": where.user_id}
    if where.conversation_id is not None:
        scope += " AND conversation_id = :cid"
        params["cid"] = where.conversation_id
    # Counting stops at the limit: a large scope costs no more than a small one.
    counted = conn.execute(
        text(f"SELECT count(*) FROM (SELECT 1 FROM vector_points WHERE {scope} LIMIT :n) s"),
        {**params, "n": exact_limit + 1},
    ).scalar_one()
    selective = int(counted) <= exact_limit
    scopes.put(key, selective)
    return selective


class ScopeDecisions:
    """Whether each (user, conversation) scope is searched exactly, remembered for a while.

    Scopes grow slowly: a decision is reused for :data:`SCOPE_TTL_SECONDS`, and at most
    :data:`_SCOPE_CACHE` are kept (least recently used dropped first). Thread-safe.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[str, str | None], tuple[bool, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str | None]) -> bool | None:
        """The decision for ``key``, or None if unknown or too old."""
        with self._lock:
            cached = self._entries.get(key)
            if cached is None or time.monotonic() - cached[1] >= SCOPE_TTL_SECONDS:
                return None
            self._entries.move_to_end(key)
            return cached[0]

    def put(self, key: tuple[str, str | None], selective: bool) -> None:
        """Remember a decision."""
        with self._lock:
            self._entries[key] = (selective, time.monotonic())
            self._entries.move_to_end(key)
            while len(self._entries) > _SCOPE_CACHE:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every decision (points were deleted)."""
        with self._lock:
            self._entries.clear()
