"""The embedded tier-3 backend: one qdrant-edge shard in a folder, no server.

qdrant-edge-py runs Qdrant's segment code in process. It is beta and its API drifts between
releases, so every ``qdrant_edge`` type stays inside this module and :mod:`.edge_engine`
(which imports it, and holds the shard's settings, the filters and the error mapping). Facts
this module relies on (measured with 0.9.0):

- The shard is created with ``indexing_threshold=0``, so it never builds HNSW: every search
  here is filtered by user at least, and filtered exact search over keyword payload indexes is
  sub-millisecond. ``optimize()`` is never called (a default one builds HNSW for minutes while
  holding the GIL).
- Every engine call holds the GIL for its whole duration. Upserts are therefore sent in
  batches of :data:`_UPSERT_BATCH` points, which bounds each hold to ~15 ms.
- Searches run in a pool of one thread by default (``search_threads``): its hand-offs cost
  more than parallel segment reads save on filtered searches.
- Concurrent queries and updates from several threads are safe in the engine; the lock here
  only orders :meth:`EdgeIndex.open`, :meth:`EdgeIndex.close` and :meth:`EdgeIndex.drop`.
- The write-ahead log is written through memory maps with no ``fsync`` per update: an
  acknowledged upsert survives ``kill -9`` of the process, but an OS crash or power loss can
  lose updates since the last :meth:`EdgeIndex.flush` (``close`` flushes). A flush costs
  ~16 ms, so it is opt-in per upsert (``flush_on_upsert``); tier 2 stays the source of truth
  and ``memory-chain reindex`` rebuilds tier 3 from it.
- One process per folder: a second process gets a bare ``Exception`` mentioning
  ``WouldBlock``, mapped to :class:`~memory_chain.errors.VectorStoreUnavailableError`
  (:func:`~.edge_engine.engine_errors`).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from memory_chain.errors import InvalidInputError, VectorStoreError
from memory_chain.tiers.vectors.edge_engine import (
    engine_errors,
    ensure_payload_indexes,
    held_elsewhere,
    qe,
    shard_config,
    to_filter,
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
    hits_from_engine,
    paged,
    point_from_engine,
    users_payloads,
)

logger = logging.getLogger(__name__)

#: Points per engine call: 1,000 384-d points take ~15 ms, during which the GIL is held.
_UPSERT_BATCH = 1000


class EdgeIndex:
    """Tier-3 vectors in an embedded qdrant-edge shard stored in ``path / collection``.

    Scores are cosine similarities, higher is more similar. Vectors are stored normalized
    (cosine distance), so :meth:`scroll` returns unit vectors.

    Args:
        path: Folder holding the collection folders.
        collection: Name of the collection, used as the shard's folder name.
        dimension: Length of every vector.
        flush_on_upsert: Flush to disk after every upsert (~16 ms each), so acknowledged
            upserts also survive an OS crash or power loss, not only a killed process.
        search_threads: Threads of the engine's search pool (``None``: one per core). One
            searches in the calling thread's time: the pool's hand-offs cost more than they
            save on filtered searches (measured on 2 cores, 100,000 points: top-5 in one
            user p50 0.41-0.44 ms with one thread, 0.43-0.56 with the default), spin on
            cores the embedding and keyword search need, and requests already search in
            parallel threads.

    Raises:
        InvalidInputError: If ``dimension`` is not positive or ``collection`` is not a plain
            folder name.

    Example:
        >>> from pathlib import Path
        >>> index = EdgeIndex(Path("data/vectors"), dimension=384)  # no I/O yet
        >>> index.open()
        >>> index.count()
        0
        >>> index.close()
    """

    def __init__(
        self,
        path: Path,
        collection: str = "conversation_memory",
        dimension: int = 384,
        *,
        flush_on_upsert: bool = False,
        search_threads: int | None = 1,
    ) -> None:
        check_dimension(dimension)
        if not collection or Path(collection).name != collection or collection in {".", ".."}:
            raise InvalidInputError(
                f"collection {collection!r} must be a plain folder name (no path separators)"
            )
        self.path = Path(path)
        self.collection = collection
        self.dimension = dimension
        self.folder = self.path / collection
        self._flush_on_upsert = flush_on_upsert
        self._search_threads = search_threads
        self._shard: qe.EdgeShard | None = None
        self._lifecycle = threading.Lock()

    def __repr__(self) -> str:
        return f"EdgeIndex({str(self.folder)!r}, dimension={self.dimension})"

    def open(self) -> None:
        """Create the shard folder if missing, or load it; idempotent.

        Raises:
            VectorStoreUnavailableError: If another process holds the folder.
            VectorStoreError: If the shard cannot be created or loaded, for instance because
                it was created with another dimension.
        """
        with self._lifecycle:
            if self._shard is not None:
                return
            with self._errors("open"):
                config = shard_config(self.dimension, self._search_threads)
                if self.folder.is_dir() and any(self.folder.iterdir()):
                    # Passing the config checks the stored vectors against it and persists
                    # indexing_threshold=0 on shards created with other settings.
                    shard = qe.EdgeShard.load(str(self.folder), config)
                else:
                    shard = qe.EdgeShard.create(str(self.folder), config)
                try:
                    ensure_payload_indexes(shard)
                except BaseException:
                    shard.close()
                    raise
            self._shard = shard
            logger.info("opened vector index %s", self.folder)

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or overwrite points by id; durable against a killed process on return.

        Raises:
            InvalidInputError: If an id is not a UUID or a vector has the wrong length.
            VectorStoreError: If the engine rejects the points or the index is not open.
        """
        engine_points = [
            qe.Point(check_point_id(p.id), self._check_vector(p.vector), p.payload.to_dict())
            for p in points
        ]
        if not engine_points:
            return
        shard = self._ready()
        with self._errors("upsert"):
            for start in range(0, len(engine_points), _UPSERT_BATCH):
                batch = engine_points[start : start + _UPSERT_BATCH]
                shard.update(qe.UpdateOperation.upsert_points(batch))
            if self._flush_on_upsert:
                shard.flush()

    def search(self, vector: Sequence[float], where: VectorFilter, k: int) -> list[VectorHit]:
        """The ``k`` points most similar to ``vector`` among those ``where`` selects (exact).

        Raises:
            InvalidInputError: If ``where.user_id`` is None, ``k`` is negative or the vector
                has the wrong length.
            VectorStoreError: If the engine fails or the index is not open.
        """
        check_search(where, k)
        query = self._check_vector(vector)
        if k == 0:
            return []
        request = qe.QueryRequest(
            limit=k,
            query=qe.Query.Nearest(query),
            filter=to_filter(where),
            with_payload=True,
            with_vector=False,
            params=qe.SearchParams(exact=True),
        )
        shard = self._ready()
        with self._errors("search"):
            found = shard.query(request)
        return hits_from_engine(found)

    def delete(self, where: VectorFilter) -> None:
        """Remove the points ``where`` selects (``VectorFilter(None)`` removes all).

        Raises:
            VectorStoreError: If the engine fails or the index is not open.
        """
        selector = to_filter(where) or qe.Filter()
        shard = self._ready()
        with self._errors("delete"):
            shard.update(qe.UpdateOperation.delete_points_by_filter(selector))
            if self._flush_on_upsert:
                shard.flush()

    def count(self, where: VectorFilter | None = None) -> int:
        """Exact number of points ``where`` selects (all when ``None``).

        Raises:
            VectorStoreError: If the engine fails or the index is not open.
        """
        request = qe.CountRequest(exact=True, filter=to_filter(where))
        shard = self._ready()
        with self._errors("count"):
            return shard.count(request)

    def scroll(self, where: VectorFilter | None = None) -> Iterator[VectorPoint]:
        """Every point ``where`` selects, with its (normalized) vector, page by page.

        Raises:
            VectorStoreError: If the engine fails or the index is not open.
        """
        selector = to_filter(where)
        shard = self._ready()
        return self._pages(shard, selector)

    def _pages(self, shard: qe.EdgeShard, selector: qe.Filter | None) -> Iterator[VectorPoint]:
        def read_page(
            offset: uuid.UUID | str | int | None,
        ) -> tuple[list[VectorPoint], uuid.UUID | str | int | None]:
            request = qe.ScrollRequest(
                offset=offset,
                limit=SCROLL_PAGE,
                filter=selector,
                with_payload=True,
                with_vector=True,
            )
            with self._errors("scroll"):
                records, after = shard.scroll(request)
            return [point_from_engine(record) for record in records], after

        return paged(read_page)

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[TurnPayload]:
        """The payloads of the points with these ids among ``user_id``'s.

        Raises:
            VectorStoreError: If the engine fails or the index is not open.
        """
        if not ids:
            return []
        shard = self._ready()
        with self._errors("read"):
            records = shard.retrieve(list(ids), True, False)
        return users_payloads(user_id, records)

    def scores(self, vector: Sequence[float], user_id: str, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of ``vector`` with each point of ``ids`` among ``user_id``'s.

        Raises:
            InvalidInputError: If the vector has the wrong length or an id is not a UUID.
            VectorStoreError: If the engine fails or the index is not open.
        """
        query = self._check_vector(vector)
        if not ids:
            return {}
        request = qe.QueryRequest(
            limit=len(ids),
            query=qe.Query.Nearest(query),
            filter=to_filter(VectorFilter(user_id=user_id, ids=tuple(ids))),
            with_payload=False,
            with_vector=False,
            params=qe.SearchParams(exact=True),
        )
        shard = self._ready()
        with self._errors("search"):
            found = shard.query(request)
        return {str(hit.id): float(hit.score) for hit in found}

    def flush(self) -> None:
        """Write every acknowledged update to disk, so it survives an OS crash too.

        Raises:
            VectorStoreError: If the engine fails or the index is not open.
        """
        shard = self._ready()
        with self._errors("flush"):
            shard.flush()

    def drop(self) -> None:
        """Close the index and delete its folder (:meth:`open` creates it again).

        Raises:
            VectorStoreUnavailableError: If another process holds the folder.
            VectorStoreError: If the folder cannot be removed.
        """
        with self._lifecycle:
            shard, self._shard = self._shard, None
            with self._errors("drop"):
                if shard is not None:
                    shard.close()
                elif self.folder.is_dir():
                    self._check_not_held()
                if self.folder.exists():
                    shutil.rmtree(self.folder)
        logger.info("dropped vector index %s", self.folder)

    def close(self) -> None:
        """Flush and release the folder; idempotent."""
        with self._lifecycle:
            shard, self._shard = self._shard, None
            if shard is None:
                return
            with self._errors("close"):
                shard.close()

    def _check_not_held(self) -> None:
        """Fail if another process holds the folder, before deleting files under it."""
        try:
            probe = qe.EdgeShard.load(str(self.folder))
        except Exception as exc:
            if held_elsewhere(exc):
                raise
            # A damaged shard is what one drops: let rmtree remove it.
            logger.warning("dropping unreadable vector index %s: %s", self.folder, exc)
            return
        probe.close()

    def _ready(self) -> qe.EdgeShard:
        shard = self._shard
        if shard is None:
            raise VectorStoreError(f"the vector index {self.folder} is not open: call open()")
        return shard

    def _check_vector(self, vector: Sequence[float]) -> list[float]:
        return check_vector(vector, self.dimension, f"the index {self.folder}")

    def _errors(self, action: str) -> contextlib.AbstractContextManager[None]:
        """Map the engine's errors to ours (:func:`~.edge_engine.engine_errors`)."""
        return engine_errors(self.folder, action)
