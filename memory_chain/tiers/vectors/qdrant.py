"""The tier-3 backend for a Qdrant server or cluster, through qdrant-client.

The same class also runs on qdrant-client's local modes (``QdrantClient(":memory:")`` and
``QdrantClient(path=...)``), which tests use. Local mode differs in ways handled here: it has no
payload indexes (creating one only warns, so they are skipped), and it is not thread-safe (its
calls are serialized by a lock; remote clients are not locked).

Scores are cosine similarities, higher is more similar. Upserts and deletes wait for the server
to apply them (``wait=True``), so they are durable on return as far as the server's WAL is.
The payload indexes and the filters are in :mod:`.qdrant_payload`; the client's errors become
ours in :mod:`.qdrant_errors`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from memory_chain.errors import InvalidInputError, VectorStoreError
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
    hits_from_engine,
    paged,
    point_from_engine,
    users_payloads,
)
from memory_chain.tiers.vectors.qdrant_errors import client_errors
from memory_chain.tiers.vectors.qdrant_payload import PAYLOAD_INDEXES, to_filter

logger = logging.getLogger(__name__)

#: Points per request: keeps a request far below the server's 32 MB default body limit.
_UPSERT_BATCH = 256


class QdrantIndex:
    """Tier-3 vectors in one Qdrant collection.

    Args:
        client: A ready client (server URL, cluster, ``":memory:"`` or ``path=...``); this
            index owns it from now on and closes it in :meth:`close`.
        collection: Name of the collection.
        dimension: Length of every vector.

    Raises:
        InvalidInputError: If ``dimension`` is not positive or ``collection`` is empty.

    Example:
        >>> from qdrant_client import QdrantClient
        >>> index = QdrantIndex(QdrantClient(":memory:"), dimension=384)
        >>> index.open()
        >>> index.count()
        0
        >>> index.close()
    """

    def __init__(
        self,
        client: QdrantClient,
        collection: str = "conversation_memory",
        dimension: int = 384,
    ) -> None:
        check_dimension(dimension)
        if not collection:
            raise InvalidInputError("collection must be a non-empty name")
        self.client = client
        self.collection = collection
        self.dimension = dimension
        options = client.init_options
        self._local = options.get("location") == ":memory:" or options.get("path") is not None
        self._where = str(
            options.get("path")
            or options.get("url")
            or options.get("location")
            or options.get("host")
            or "localhost"
        )
        self._guard: contextlib.AbstractContextManager[object] = (
            threading.Lock() if self._local else contextlib.nullcontext()
        )
        self._closed = False

    @classmethod
    def from_url(
        cls,
        url: str,
        api_key: str | None = None,
        *,
        collection: str = "conversation_memory",
        dimension: int = 384,
        timeout: int | None = None,
    ) -> QdrantIndex:
        """An index on the server at ``url``; builds the client without connecting.

        Args:
            url: Server URL, e.g. ``http://localhost:6333``.
            api_key: API key (Qdrant Cloud), or None.
            collection: Name of the collection.
            dimension: Length of every vector.
            timeout: Seconds per request; qdrant-client's default when None.

        Returns:
            An index whose :meth:`open` is the first call to reach the server.
        """
        # check_compatibility would query the server version from a thread right away.
        client = QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)
        return cls(client, collection=collection, dimension=dimension)

    def __repr__(self) -> str:
        return f"QdrantIndex({self._where!r}, {self.collection!r}, dimension={self.dimension})"

    def open(self) -> None:
        """Create the collection and its payload indexes if missing; idempotent.

        Raises:
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If the collection exists with another vector size or distance.
        """
        with self._errors("open"):
            if not self.client.collection_exists(self.collection):
                self._create_collection()
            info = self.client.get_collection(self.collection)
        self._check_vectors(info.config.params.vectors)
        if self._local:
            logger.debug("qdrant-client local mode has no payload indexes: skipped")
            return
        for field, schema in PAYLOAD_INDEXES.items():
            if field not in info.payload_schema:
                with self._errors("create payload indexes in"):
                    self.client.create_payload_index(
                        self.collection, field, field_schema=schema, wait=True
                    )

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or overwrite points by id; returns once the server has applied them.

        Raises:
            InvalidInputError: If an id is not a UUID or a vector has the wrong length.
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If the server rejects the points.
        """
        structs = [
            models.PointStruct(
                id=check_point_id(p.id),
                vector=self._check_vector(p.vector),
                payload=p.payload.to_dict(),
            )
            for p in points
        ]
        for start in range(0, len(structs), _UPSERT_BATCH):
            with self._errors("upsert into"):
                self.client.upsert(
                    self.collection, points=structs[start : start + _UPSERT_BATCH], wait=True
                )

    def search(self, vector: Sequence[float], where: VectorFilter, k: int) -> list[VectorHit]:
        """The ``k`` points most similar to ``vector`` among those ``where`` selects.

        Raises:
            InvalidInputError: If ``where.user_id`` is None, ``k`` is negative or the vector
                has the wrong length.
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If the search fails.
        """
        check_search(where, k)
        query = self._check_vector(vector)
        if k == 0:
            return []
        selector = to_filter(where)
        with self._errors("search"):
            found = self.client.query_points(
                self.collection,
                query=query,
                query_filter=selector,
                limit=k,
                with_payload=True,
                with_vectors=False,
            ).points
        return hits_from_engine(found)

    def delete(self, where: VectorFilter) -> None:
        """Remove the points ``where`` selects (``VectorFilter(None)`` removes all).

        Raises:
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If the delete fails.
        """
        selector = models.FilterSelector(filter=to_filter(where) or models.Filter())
        with self._errors("delete from"):
            self.client.delete(self.collection, points_selector=selector, wait=True)

    def count(self, where: VectorFilter | None = None) -> int:
        """Exact number of points ``where`` selects (all when ``None``).

        Raises:
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If the count fails.
        """
        selector = to_filter(where)
        with self._errors("count"):
            return self.client.count(self.collection, count_filter=selector, exact=True).count

    def scroll(self, where: VectorFilter | None = None) -> Iterator[VectorPoint]:
        """Every point ``where`` selects, with its (normalized) vector, page by page.

        Raises:
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If a page cannot be read.
        """
        return self._pages(to_filter(where))

    def _pages(self, selector: models.Filter | None) -> Iterator[VectorPoint]:
        def read_page(
            offset: models.ExtendedPointId | None,
        ) -> tuple[list[VectorPoint], models.ExtendedPointId | None]:
            with self._errors("scroll"):
                records, after = self.client.scroll(
                    self.collection,
                    scroll_filter=selector,
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=True,
                    with_vectors=True,
                )
            return [point_from_engine(record) for record in records], after

        return paged(read_page)

    def drop(self) -> None:
        """Delete the collection (:meth:`open` creates it again); a missing one is fine.

        Raises:
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If the server refuses.
        """
        with self._errors("drop"):
            try:
                self.client.delete_collection(self.collection)
            except UnexpectedResponse as exc:
                if exc.status_code != 404:
                    raise
        logger.info("dropped Qdrant collection %s at %s", self.collection, self._where)

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[TurnPayload]:
        """The payloads of the points with these ids among ``user_id``'s.

        Raises:
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If the points cannot be read.
        """
        if not ids:
            return []
        with self._errors("read from"):
            records = self.client.retrieve(
                self.collection, ids=list(ids), with_payload=True, with_vectors=False
            )
        return users_payloads(user_id, records)

    def scores(self, vector: Sequence[float], user_id: str, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of ``vector`` with each point of ``ids`` among ``user_id``'s.

        Raises:
            InvalidInputError: If the vector has the wrong length or an id is not a UUID.
            VectorStoreUnavailableError: If the server cannot be reached.
            VectorStoreError: If the search fails.
        """
        query = self._check_vector(vector)
        if not ids:
            return {}
        selector = to_filter(VectorFilter(user_id=user_id, ids=tuple(ids)))
        with self._errors("search"):
            found = self.client.query_points(
                self.collection,
                query=query,
                query_filter=selector,
                limit=len(ids),
                with_payload=False,
                with_vectors=False,
            ).points
        return {str(hit.id): float(hit.score) for hit in found}

    def flush(self) -> None:
        """Nothing to do: upserts wait for the server's write-ahead log (``wait=True``)."""

    def close(self) -> None:
        """Close the client and its connections; idempotent."""
        if self._closed:
            return
        try:
            with self._errors("close"):
                self.client.close()
        finally:
            self._closed = True

    def _create_collection(self) -> None:
        try:
            self.client.create_collection(
                self.collection,
                vectors_config=models.VectorParams(
                    size=self.dimension, distance=models.Distance.COSINE
                ),
            )
        except UnexpectedResponse as exc:
            # Another replica created it between our check and our create.
            if exc.status_code != 409:
                raise
        except ValueError as exc:  # local mode's "already exists"
            if "already exists" not in str(exc):
                raise

    def _check_vectors(self, config: models.VectorParams | dict[str, Any] | None) -> None:
        if not isinstance(config, models.VectorParams):
            raise VectorStoreError(
                f"collection {self.collection!r} at {self._where} has no single unnamed vector "
                f"({config!r}): it was created by something else; use another collection name"
            )
        if config.size != self.dimension or config.distance != models.Distance.COSINE:
            raise VectorStoreError(
                f"collection {self.collection!r} at {self._where} holds {config.size}-d "
                f"{config.distance.value} vectors, this index needs {self.dimension}-d Cosine: "
                "use the embedding model it was built with, another collection name, or drop "
                "it and run `memory-chain reindex`"
            )

    def _check_vector(self, vector: Sequence[float]) -> list[float]:
        return check_vector(vector, self.dimension, f"collection {self.collection!r}")

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Serialize local-mode calls and map client errors to ours (:mod:`.qdrant_errors`)."""
        if self._closed:
            raise VectorStoreError(f"{self!r} is closed: build a new one to {action} again")
        with client_errors(self._where, self.collection, action), self._guard:
            yield
