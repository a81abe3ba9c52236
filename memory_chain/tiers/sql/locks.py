"""Locks that hold across processes: one replica at a time does a piece of work.

Two kinds. :func:`try_lock` skips work another replica is doing; :func:`lock_transaction`
waits, so that the transactions changing one thing (a user's facts) run one at a time across
replicas, each reading what the one before it wrote.

On PostgreSQL a skipping lock is a session advisory lock (``pg_try_advisory_lock``) on a connection
kept for as long as the work runs: no table, no lease to expire, and a replica that dies
loses its connection and so its locks at once. The lock is taken with *try*: work that
another replica is doing is skipped, not waited for (that replica does it).

On SQLite there is one process per database (the embedded vector index allows one process
per data folder as well), so the lock is always granted: the callers' thread locks order the
work within the process. A waiting lock is a transaction advisory lock
(``pg_advisory_xact_lock``), released when the transaction ends (commit, rollback, or the
connection dropped); on SQLite it is not needed: a write transaction takes the database's
write lock up front (``BEGIN IMMEDIATE``), so writers are serialized already.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Iterator

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from memory_chain.tiers.sql.rows import storage_errors

logger = logging.getLogger(__name__)

_TRY = text("SELECT pg_try_advisory_lock(hashtextextended(:name, 0))")
_UNLOCK = text("SELECT pg_advisory_unlock(hashtextextended(:name, 0))")
_WAIT = text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))")


def lock_transaction(conn: Connection, names: Collection[str]) -> None:
    """Wait for the locks ``names`` and hold them until ``conn``'s transaction ends.

    Taken in sorted order, so that two transactions wanting several never wait on each
    other. A no-op on SQLite, whose write transactions are serialized already.
    """
    if conn.dialect.name != "postgresql":
        return
    for name in sorted(set(names)):
        conn.execute(_WAIT, {"name": name})


@contextlib.contextmanager
def try_lock(engine: Engine, name: str) -> Iterator[bool]:
    """Hold the lock ``name`` for the ``with`` block if no other process holds it.

    Yields:
        True when this process holds the lock for the block; False when another one does
        (the block should then skip the work).

    Raises:
        StorageError: If the database cannot be reached to take the lock.
    """
    if engine.dialect.name != "postgresql":
        yield True
        return
    with storage_errors():
        conn = engine.connect()
    try:
        with storage_errors():
            held = bool(conn.execute(_TRY, {"name": name}).scalar())
            # End the transaction at once: an open one would hold back VACUUM for as long
            # as the work runs. A session lock outlives it.
            conn.commit()
        if not held:
            yield False
            return
        try:
            yield True
        finally:
            try:
                conn.execute(_UNLOCK, {"name": name})
                conn.commit()
            except DBAPIError as exc:
                # The session is gone, and its locks with it; never reuse the connection.
                logger.warning("could not release lock %s (%s): connection dropped", name, exc)
                conn.invalidate()
    finally:
        conn.close()
