"""The tier-2 database: one owner for the engine, its transactions and its SQL dialect.

Every tier-2 object that writes (the store, the embedding outbox, the tier-3 task queue, the
import of whole conversations) runs its transactions here, so that there is one rule for
them: a write transaction takes the write lock up front (``BEGIN IMMEDIATE`` on SQLite,
:func:`~memory_chain.tiers.sql.engine.writer`), and on SQLite this process's writers queue on
a thread lock instead of polling the database's busy handler (SQLite has one writer at a
time). The dialect's ``INSERT ... ON CONFLICT`` is chosen here too. The role is that of
langchain-postgres's ``PGEngine``: the stores take the database, they do not run it.

Example:
    >>> from memory_chain.tiers.sql.database import Database
    >>> from memory_chain.tiers.sql.engine import create_sql_engine
    >>> database = Database(create_sql_engine("sqlite:////tmp/mc-database-example.db"))
    >>> database.dialect
    'sqlite'
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Iterator
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from memory_chain.tiers.sql.engine import writer
from memory_chain.tiers.sql.locks import lock_transaction, try_lock
from memory_chain.tiers.sql.rows import storage_errors

T = TypeVar("T")


def dialect_insert(dialect: str) -> Any:
    """The ``insert`` of a dialect, the one with ``on_conflict_do_nothing``."""
    return pg_insert if dialect == "postgresql" else sqlite_insert


class Database:
    """The engine of tier 2, with how to read, write and lock through it.

    Creating one opens no connection.

    Args:
        engine: From :func:`memory_chain.tiers.sql.engine.create_sql_engine`.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect: str = engine.dialect.name
        self._writer = writer(engine)
        self._write_lock: threading.Lock | None = (
            threading.Lock() if self.dialect == "sqlite" else None
        )

    def write(self, work: Callable[[Connection], T], *, locks: Collection[str] = ()) -> T:
        """Run ``work(conn)`` in one write transaction and return what it returns.

        Args:
            work: What the transaction does.
            locks: Names of locks to hold for the whole transaction, taken before ``work``
                runs (:func:`~.locks.lock_transaction`): the transactions naming one lock
                run one at a time across processes, each seeing what the one before it
                committed (on PostgreSQL, whose transactions see one another's commits as
                they read, READ COMMITTED, a read-then-write needs it). On SQLite writers are
                serialized already.

        Raises:
            StorageError: If the database fails (nothing of ``work`` is committed).
        """
        with storage_errors():
            if self._write_lock is None:
                with self._writer.begin() as conn:
                    lock_transaction(conn, locks)
                    return work(conn)
            with self._write_lock, self._writer.begin() as conn:
                return work(conn)

    @contextlib.contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection for reads, with driver errors mapped to ``StorageError``."""
        with storage_errors(), self.engine.connect() as conn:
            yield conn

    def read(self, statement: Any) -> list[Any]:
        """Every row of one statement."""
        with self.connect() as conn:
            return list(conn.execute(statement).all())

    def insert(self, table: Any) -> Any:
        """``INSERT`` into ``table`` in this database's dialect (it has ``ON CONFLICT``)."""
        return dialect_insert(self.dialect)(table)

    def try_lock(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """A lock across processes, for work one replica at a time does (see :mod:`.locks`).

        ``with database.try_lock("consolidation:c1") as held:`` holds it for the block when
        ``held`` is True; False means another process holds it. Always held on SQLite.
        """
        return try_lock(self.engine, name)
