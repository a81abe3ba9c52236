"""The tier-3 backend on PostgreSQL with pgvector: one database holds every tier.

Points live in ``vector_points`` (one row per point, the payload in ordinary columns, the
vector in a ``vector`` column), collections in ``vector_collections`` (name and dimension);
the Alembic migrations create both tables and the ``vector`` extension. Several replicas
share them like they share tier 2: no process owns a folder, and an upsert is durable when it
returns (the transaction is committed).

A search is exact where the user's (or conversation's) points are few enough
(:data:`~.pgvector_search.EXACT_LIMIT`), through the HNSW index otherwise
(:mod:`.pgvector_search`); a collection and its dimension's HNSW index are registered by
:meth:`PgVectorIndex.open` (:mod:`.pgvector_schema`); filters become SQL in
:mod:`.pgvector_sql`.

Vectors are stored L2-normalized, so the inner product is the cosine similarity (higher is
more similar) and :meth:`PgVectorIndex.scroll` returns unit vectors, as the other backends do.

Errors: a database that cannot be reached raises
:class:`~memory_chain.errors.VectorStoreUnavailableError` (turns stay queued in tier 2);
anything else the database refuses raises :class:`~memory_chain.errors.VectorStoreError`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from memory_chain.errors import (
    InvalidInputError,
    MemoryChainError,
    VectorStoreError,
    VectorStoreUnavailableError,
)
from memory_chain.tiers.vectors.index import (
    SCROLL_PAGE,
    TurnPayload,
    VectorFilter,
    VectorHit,
    VectorPoint,
    check_dimension,
    check_point_id,
    check_search,
    check_vector,
    paged,
)
from memory_chain.tiers.vectors.pgvector_schema import drop_collection, register_collection
from memory_chain.tiers.vectors.pgvector_search import (
    EXACT_LIMIT,
    ScopeDecisions,
    exact_rows,
    hnsw_rows,
    is_selective,
)
from memory_chain.tiers.vectors.pgvector_sql import (
    COLUMNS,
    parse_vector,
    payload_from_row,
    unit_vector,
    vector_literal,
    where_sql,
)

logger = logging.getLogger(__name__)

_UPSERT_BATCH = 500


class PgVectorIndex:
    """Tier-3 vectors in PostgreSQL with pgvector (tables made by the migrations).

    Args:
        engine: A SQLAlchemy engine on the PostgreSQL database (usually tier 2's); the index
            uses it, its owner disposes of it.
        collection: Name of the collection (a row of ``vector_collections``).
        dimension: Length of every vector.
        exact_limit: Scopes with at most this many points are searched exactly.

    Raises:
        InvalidInputError: If ``dimension`` is not positive, ``collection`` is empty or the
            engine is not PostgreSQL.

    Example:
        >>> engine = create_sql_engine("postgresql://memory@db/memory")  # doctest: +SKIP
        >>> upgrade(engine)  # creates the extension and the tables  # doctest: +SKIP
        >>> index = PgVectorIndex(engine, "conversation_memory", 384)  # no I/O yet
        >>> index.open()  # doctest: +SKIP
        >>> index.count()  # doctest: +SKIP
        0
    """

    def __init__(
        self,
        engine: Engine,
        collection: str = "conversation_memory",
        dimension: int = 384,
        *,
        exact_limit: int = EXACT_LIMIT,
    ) -> None:
        check_dimension(dimension)
        if not collection:
            raise InvalidInputError("collection must be a non-empty name")
        if engine.dialect.name != "postgresql":
            raise InvalidInputError(
                f"the pgvector backend needs PostgreSQL, got {engine.dialect.name}: set "
                "database_url to a postgresql:// URL, or choose another vector_backend"
            )
        self.engine = engine
        self.collection = collection
        self.dimension = dimension
        self.exact_limit = exact_limit
        self._where = engine.url.render_as_string(hide_password=True)
        self._state = "new"  # new -> open -> closed (open() again reopens)
        self._scopes = ScopeDecisions()

    def __repr__(self) -> str:
        return f"PgVectorIndex({self._where!r}, {self.collection!r}, dimension={self.dimension})"

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Register the collection (and its HNSW index) if missing; idempotent.

        Raises:
            VectorStoreUnavailableError: If the database cannot be reached.
            VectorStoreError: If the tables are missing (pgvector was not installed when the
                database was migrated) or the collection holds vectors of another dimension.
        """
        with self._errors("open", check_open=False), self.engine.begin() as conn:
            register_collection(conn, self.collection, self.dimension, self._where)
        self._state = "open"

    def drop(self) -> None:
        """Remove the collection and its points (:meth:`open` creates it again).

        Raises:
            VectorStoreUnavailableError: If the database cannot be reached.
        """
        with self._errors("drop", check_open=False), self.engine.begin() as conn:
            drop_collection(conn, self.collection)
        self._state = "new"
        self._scopes.clear()
        logger.info("dropped vector collection %s at %s", self.collection, self._where)

    def close(self) -> None:
        """Stop using the engine (its owner disposes of it); idempotent."""
        self._state = "closed"

    def flush(self) -> None:
        """Nothing to do: every upsert is a committed transaction."""

    # -- writes -------------------------------------------------------------------------------

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or overwrite points by id; committed (durable) on return.

        Raises:
            InvalidInputError: If an id is not a UUID or a vector has the wrong length.
            VectorStoreUnavailableError: If the database cannot be reached.
            VectorStoreError: If the database refuses the points.
        """
        rows = [self._row(point) for point in points]
        if not rows:
            return
        statement = text(
            "INSERT INTO vector_points (collection, id, user_id, conversation_id, turn_number, "
            "role, content, timestamp, tokens, summary, tags, embedding) VALUES (:collection, "
            "CAST(:id AS uuid), :user_id, :conversation_id, :turn_number, :role, :content, "
            ":timestamp, :tokens, :summary, :tags, CAST(:embedding AS vector)) "
            "ON CONFLICT (collection, id) DO UPDATE SET user_id = excluded.user_id, "
            "conversation_id = excluded.conversation_id, turn_number = excluded.turn_number, "
            "role = excluded.role, content = excluded.content, timestamp = excluded.timestamp, "
            "tokens = excluded.tokens, summary = excluded.summary, tags = excluded.tags, "
            "embedding = excluded.embedding"
        )
        with self._errors("upsert into"), self.engine.begin() as conn:
            for start in range(0, len(rows), _UPSERT_BATCH):
                conn.execute(statement, rows[start : start + _UPSERT_BATCH])

    def _row(self, point: VectorPoint) -> dict[str, Any]:
        payload = point.payload
        return {
            "collection": self.collection,
            "id": check_point_id(point.id),
            "user_id": payload.user_id,
            "conversation_id": payload.conversation_id,
            "turn_number": payload.turn_number,
            "role": payload.role,
            "content": payload.content,
            "timestamp": payload.timestamp,
            "tokens": payload.tokens,
            "summary": payload.summary,
            "tags": list(payload.tags),
            "embedding": vector_literal(unit_vector(self._check_vector(point.vector))),
        }

    def delete(self, where: VectorFilter) -> None:
        """Remove the points ``where`` selects (``VectorFilter(None)`` removes all).

        Raises:
            VectorStoreUnavailableError: If the database cannot be reached.
        """
        clause, params = where_sql(self.collection, where)
        with self._errors("delete from"), self.engine.begin() as conn:
            conn.execute(text(f"DELETE FROM vector_points WHERE {clause}"), params)
        self._scopes.clear()

    # -- reads --------------------------------------------------------------------------------

    def search(self, vector: Sequence[float], where: VectorFilter, k: int) -> list[VectorHit]:
        """The ``k`` points most similar to ``vector`` among those ``where`` selects.

        Exact for selective filters, HNSW with iterative scans for large scopes (see the
        module's docstring).

        Raises:
            InvalidInputError: If ``where.user_id`` is None, ``k`` is negative or the vector
                has the wrong length.
            VectorStoreUnavailableError: If the database cannot be reached.
        """
        check_search(where, k)
        query = vector_literal(unit_vector(self._check_vector(vector)))
        if k == 0:
            return []
        clause, params = where_sql(self.collection, where)
        params.update(q=query, k=k)
        with self._errors("search"), self.engine.begin() as conn:
            if where.ids is None and not self._is_selective(conn, where):
                rows = hnsw_rows(conn, self.dimension, clause, params)
            else:
                rows = exact_rows(conn, clause, params)
        return [VectorHit(str(row.id), -float(row.distance), payload_from_row(row)) for row in rows]

    def search_mode(self, where: VectorFilter) -> str:
        """``"exact"`` or ``"hnsw"``: how :meth:`search` would serve ``where`` now."""
        with self._errors("search"), self.engine.connect() as conn:
            return "exact" if self._is_selective(conn, where) else "hnsw"

    def _is_selective(self, conn: Connection, where: VectorFilter) -> bool:
        """Whether ``where``'s scope is small enough to search exactly (cached a while)."""
        return is_selective(conn, self.collection, where, self.exact_limit, self._scopes)

    def count(self, where: VectorFilter | None = None) -> int:
        """Exact number of points ``where`` selects (all when ``None``).

        Raises:
            VectorStoreUnavailableError: If the database cannot be reached.
        """
        clause, params = where_sql(self.collection, where)
        with self._errors("count"), self.engine.connect() as conn:
            return int(
                conn.execute(
                    text(f"SELECT count(*) FROM vector_points WHERE {clause}"), params
                ).scalar_one()
            )

    def scroll(self, where: VectorFilter | None = None) -> Iterator[VectorPoint]:
        """Every point ``where`` selects, with its (unit) vector, page by page (by id).

        Raises:
            VectorStoreUnavailableError: If the database cannot be reached.
        """
        clause, params = where_sql(self.collection, where)
        self._ready("scroll")
        return self._pages(clause, params)

    def _pages(self, clause: str, params: dict[str, Any]) -> Iterator[VectorPoint]:
        def read_page(after: str | None) -> tuple[list[VectorPoint], str | None]:
            page_clause = clause if after is None else f"{clause} AND id > CAST(:after AS uuid)"
            with self._errors("scroll"), self.engine.connect() as conn:
                rows = conn.execute(
                    text(
                        f"SELECT {COLUMNS}, embedding::text AS vector FROM vector_points "
                        f"WHERE {page_clause} ORDER BY id LIMIT {SCROLL_PAGE}"
                    ),
                    {**params, "after": after},
                ).all()
            points = [
                VectorPoint(str(row.id), parse_vector(row.vector), payload_from_row(row))
                for row in rows
            ]
            # Keyset paging by id: a short page is the last.
            return points, (str(rows[-1].id) if len(rows) == SCROLL_PAGE else None)

        return paged(read_page)

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[TurnPayload]:
        """The payloads of the points with these ids among ``user_id``'s.

        Raises:
            VectorStoreUnavailableError: If the database cannot be reached.
        """
        if not ids:
            self._ready("read from")
            return []
        clause, params = where_sql(self.collection, VectorFilter(user_id=user_id, ids=tuple(ids)))
        with self._errors("read from"), self.engine.connect() as conn:
            rows = conn.execute(
                text(f"SELECT {COLUMNS} FROM vector_points WHERE {clause}"), params
            ).all()
        return [payload_from_row(row) for row in rows]

    def scores(self, vector: Sequence[float], user_id: str, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of ``vector`` with each point of ``ids`` among ``user_id``'s.

        Raises:
            InvalidInputError: If the vector has the wrong length or an id is not a UUID.
            VectorStoreUnavailableError: If the database cannot be reached.
        """
        query = vector_literal(unit_vector(self._check_vector(vector)))
        if not ids:
            return {}
        clause, params = where_sql(self.collection, VectorFilter(user_id=user_id, ids=tuple(ids)))
        with self._errors("search"), self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT id, embedding <#> CAST(:q AS vector) AS distance FROM vector_points "
                    f"WHERE {clause}"
                ),
                {**params, "q": query},
            ).all()
        return {str(row.id): -float(row.distance) for row in rows}

    # -- helpers ------------------------------------------------------------------------------

    def _check_vector(self, vector: Sequence[float]) -> list[float]:
        return check_vector(vector, self.dimension, f"collection {self.collection!r}")

    def _ready(self, action: str) -> None:
        if self._state != "open":
            raise VectorStoreError(
                f"{self!r} is {'closed' if self._state == 'closed' else 'not open'}: call "
                f"open() before you {action} it"
            )

    @contextlib.contextmanager
    def _errors(self, action: str, *, check_open: bool = True) -> Iterator[None]:
        """Refuse calls on an index that is not open; map database errors to ours."""
        if check_open:
            self._ready(action)
        try:
            yield
        except MemoryChainError:
            raise
        except (OperationalError, PoolTimeoutError) as exc:
            raise VectorStoreUnavailableError(
                f"PostgreSQL at {self._where} is unreachable ({_reason(exc)}): start it or "
                "check database_url; turns stay queued in tier 2 until it is back"
            ) from exc
        except DBAPIError as exc:
            if exc.connection_invalidated:
                raise VectorStoreUnavailableError(
                    f"PostgreSQL at {self._where} dropped the connection ({_reason(exc)})"
                ) from exc
            raise VectorStoreError(
                f"PostgreSQL at {self._where} refused to {action} collection "
                f"{self.collection!r}: {_reason(exc)}"
            ) from exc
        except SQLAlchemyError as exc:
            raise VectorStoreError(
                f"could not {action} collection {self.collection!r} at {self._where}: {exc}"
            ) from exc


def _reason(exc: SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc).strip().splitlines()[0]
