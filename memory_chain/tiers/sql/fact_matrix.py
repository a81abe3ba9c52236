"""Each user's current fact vectors, kept in memory and checked against the database per read.

A chat turn ranks the user's current facts by the cosine of the message (one matrix product)
and reads the best few whole. Reading every current fact's id and vector for that (1.5 KB a
fact with a 384-d model) made a turn's cost grow with the profile; so each process keeps,
per user, a :class:`FactMatrix`: the current facts' ids, newest first, their vectors as one
float32 matrix, and the facts themselves (read with the vectors by a chat turn, or one by
one as they are shown after an add), so that a turn reads no fact while they stay the
database's. :class:`FactMatrices` holds them, the least
recently used going past a size in bytes.

A cached matrix is used only while it is the database's: every transaction that inserts,
updates or deletes a fact of the user replaces the user's version in ``fact_versions``
(triggers on ``facts``, migration 0015, whoever writes: this process, another replica, an
import, a purge), and each read first reads that one row by its key. A
change committed anywhere is seen at the next read, as the replicas promise (a client reads
its writes on any replica). The version is read before the facts: a matrix read after a
later commit is cached under the older version and read again next time, never the reverse.
A user with no version row (no facts, or the row not yet made) is read each time, not cached.

A process that adds a fact knows what changed: it stores the matrix as it is after its own
change, under the version its transaction wrote (:meth:`FactMatrix.changed`: the facts the
change touched are read again when shown), so that n adds do not read the user's vectors n
times. Should the transaction roll back, that version is
never the database's, and the next read reads the facts again.

Example:
    >>> matrices = FactMatrices(max_bytes=64 * 2**20)
    >>> with database.connect() as conn:  # doctest: +SKIP
    ...     matrix = matrices.get(conn, "ana")
    >>> best = matrix.ranked(query_vector, limit=64)  # doctest: +SKIP
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import Connection, select

from memory_chain import metrics
from memory_chain.facts.model import Fact
from memory_chain.schemas import as_utc
from memory_chain.tiers.sql.fact_writes import FACT_COLUMNS, fact_from_row
from memory_chain.tiers.sql.models import fact_versions, facts

#: Bytes a cached fact costs besides its vector: its id and place in the order, and the
#: fact itself once a read has shown it (a one-line fact's objects take about 800).
_FACT_BYTES = 1_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

#: A fact's place: newest first (``valid_from`` descending), then by id, as SQL orders them.
Place = tuple[int, str]
#: A fact as a matrix takes it: its id, when it started to hold, its stored vector.
Entry = tuple[str, datetime, bytes | None]


def place(fact_id: str, valid_from: datetime) -> Place:
    """Where a fact goes in a matrix's order (ascending: newest first, then by id)."""
    return (-((as_utc(valid_from) - _EPOCH) // _MICROSECOND), fact_id)


@dataclass(frozen=True, slots=True)
class FactMatrix:
    """A user's current facts as one read saw them (see the module docstring).

    Attributes:
        version: The user's fact version it holds (``None``: no row).
        ids: The current facts' ids, newest first (``valid_from``, then id).
        places: Each fact's :func:`place`, in the same order (ascending).
        vectors: One row per fact (float32, normalized); zeros for a fact without a vector
            of the common size, which is not scored.
        scored: Whether each fact has its vector in :attr:`vectors`.
        shown: The facts reads have shown whole, by id, as they are at :attr:`version`
            (filled as they are read: a fact's row is the same while the version is).
    """

    version: str | None
    ids: tuple[str, ...]
    places: tuple[Place, ...]
    vectors: np.ndarray
    scored: np.ndarray
    shown: dict[str, Fact] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, version: str | None, entries: Sequence[Entry]) -> FactMatrix:
        """A matrix of these facts (any order), with their stored vectors.

        Vectors of another size than most (stored by an earlier embedding model) are left
        out: the query cannot be compared with them.
        """
        ordered = sorted(entries, key=lambda entry: place(entry[0], entry[1]))
        sizes = Counter(len(blob) for _, _, blob in ordered if blob)
        size = sizes.most_common(1)[0][0] if sizes else 0
        vectors = np.zeros((len(ordered), size // 4), dtype="<f4")
        scored = np.zeros(len(ordered), dtype=bool)
        for row, (_, _, blob) in enumerate(ordered):
            if blob and len(blob) == size:
                vectors[row] = np.frombuffer(blob, dtype="<f4")
                scored[row] = True
        return cls(
            version,
            tuple(fact_id for fact_id, _, _ in ordered),
            tuple(place(fact_id, since) for fact_id, since, _ in ordered),
            vectors,
            scored,
        )

    @property
    def nbytes(self) -> int:
        """About what the matrix holds in memory."""
        return int(self.vectors.nbytes + self.scored.nbytes) + _FACT_BYTES * len(self.ids)

    def scores(self, query: np.ndarray | None) -> np.ndarray | None:
        """The cosine of ``query`` with every fact's vector, or ``None`` if none compares."""
        if query is None or not self.scored.any() or self.vectors.shape[1] != query.shape[0]:
            return None
        scores: np.ndarray = self.vectors @ query
        return scores

    def ranked(
        self, query: np.ndarray | None, limit: int | None = None
    ) -> list[tuple[int, float | None]]:
        """The best ``limit`` facts for ``query``: positions in :attr:`ids`, with their scores.

        The most similar first, of equal scores the newer; the facts without a vector follow
        the scored ones, newest first, unscored (``None``). Without ``query`` (or none of the
        vectors' size): newest first. The work in Python is ``limit``'s, not the profile's.
        """
        count = len(self.ids) if limit is None else min(limit, len(self.ids))
        scores = self.scores(query)
        if scores is None:
            return [(position, None) for position in range(count)]
        rows = np.flatnonzero(self.scored)
        best = rows[np.argsort(-scores[rows], kind="stable")[:count]]  # newest first on ties
        found: list[tuple[int, float | None]] = [(int(p), float(scores[p])) for p in best]
        if len(found) < count:
            rest = np.flatnonzero(~self.scored)[: count - len(found)]
            found += [(int(position), None) for position in rest]
        return found

    def similar(self, vector: np.ndarray | None, at_least: float) -> str | None:
        """The id of the fact most similar to ``vector`` if its cosine is ``at_least``."""
        scores = self.scores(vector)
        if scores is None:
            return None
        scores = np.where(self.scored, scores, -np.inf)
        best = int(np.argmax(scores))
        return self.ids[best] if scores[best] >= at_least else None

    def changed(
        self,
        version: str | None,
        *,
        removed: Sequence[str] = (),
        added: Sequence[Entry] = (),
        touched: Sequence[str] = (),
    ) -> FactMatrix:
        """The matrix after a change: ``removed`` retired, ``added`` made current.

        The facts shown so far are kept, but those of ``removed`` and ``touched`` (a fact
        the change filled in, or gave a key): they are read again when next shown.
        """
        ids, places = list(self.ids), list(self.places)
        vectors, scored = self.vectors, self.scored
        for fact_id in removed:
            if fact_id in ids:
                row = ids.index(fact_id)
                del ids[row], places[row]
                vectors, scored = np.delete(vectors, row, axis=0), np.delete(scored, row)
        for fact_id, since, blob in added:
            size = vectors.shape[1] * 4
            if blob and not size and not scored.any():
                size = len(blob)  # the first vector: its size is the matrix's
                vectors = np.zeros((len(ids), size // 4), dtype="<f4")
            fits = bool(blob) and len(blob or b"") == size
            vector = np.frombuffer(blob, dtype="<f4") if fits and blob else 0.0
            key = place(fact_id, since)
            row = bisect.bisect_left(places, key)
            ids.insert(row, fact_id)
            places.insert(row, key)
            vectors = np.insert(vectors, row, vector, axis=0)
            scored = np.insert(scored, row, fits)
        gone = {*removed, *touched}
        shown = {fact_id: fact for fact_id, fact in self.shown.items() if fact_id not in gone}
        return FactMatrix(version, tuple(ids), tuple(places), vectors, scored, shown)


def read_version(conn: Connection, user_id: str) -> str | None:
    """The user's fact version (one row, by its key), or ``None`` when there is none."""
    statement = select(fact_versions.c.version).where(fact_versions.c.user_id == user_id)
    version: str | None = conn.execute(statement).scalar()
    return version


def read_matrix(
    conn: Connection, user_id: str, version: str | None, *, whole: bool = False
) -> FactMatrix:
    """The user's current facts' ids, dates and vectors, read whole (linear in the profile).

    With ``whole``, the facts themselves too (what a chat turn shows), so that no turn reads
    them again while the version stays.
    """
    columns = (
        [*FACT_COLUMNS, facts.c.embedding]
        if whole
        else [facts.c.id, facts.c.valid_from, facts.c.embedding]
    )
    rows = conn.execute(
        select(*columns).where(facts.c.user_id == user_id, facts.c.status == "current")
    ).all()
    matrix = FactMatrix.of(version, [(row.id, row.valid_from, row.embedding) for row in rows])
    if whole:
        matrix.shown.update((row.id, fact_from_row(row)) for row in rows)
    return matrix


class FactMatrices:
    """Each user's :class:`FactMatrix`, checked against the database at every read.

    Thread-safe; creating one does no I/O.

    Args:
        max_bytes: Most bytes the matrices take together; the least recently used users'
            go first (a user's is read again when next needed).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, FactMatrix] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, conn: Connection, user_id: str, *, whole: bool = False) -> FactMatrix:
        """The user's current facts as the database has them now.

        One read of the user's version; the facts themselves only when they changed since
        this process last knew them (or it never did, or forgot them): their vectors, and
        with ``whole`` (a chat turn's read) every fact too.
        """
        version = read_version(conn, user_id)
        if version is not None:
            with self._lock:
                cached = self._entries.get(user_id)
                if cached is not None and cached.version == version:
                    self._entries.move_to_end(user_id)
                    metrics.FACT_MATRIX_LOOKUPS.labels("hit").inc()
                    return cached
        metrics.FACT_MATRIX_LOOKUPS.labels("miss").inc()
        matrix = read_matrix(conn, user_id, version, whole=whole)
        self.keep(user_id, matrix)
        return matrix

    def keep(self, user_id: str, matrix: FactMatrix) -> None:
        """Cache ``matrix`` as the user's (not without a version, nor past the cache's size)."""
        if matrix.version is None or matrix.nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(user_id, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._entries[user_id] = matrix
            self._bytes += matrix.nbytes
            while self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes

    def __len__(self) -> int:
        """Users whose matrix is cached."""
        with self._lock:
            return len(self._entries)

    @property
    def nbytes(self) -> int:
        """About what the cached matrices take."""
        with self._lock:
            return self._bytes

    def clear(self) -> None:
        """Forget every cached matrix."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
