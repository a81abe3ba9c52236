"""Building the SQLAlchemy engine of tier 2.

SQLite gets WAL, a busy timeout, foreign keys and explicit transaction control: pysqlite's own
implicit ``BEGIN`` is switched off so that write transactions can start with ``BEGIN
IMMEDIATE`` (taking the write lock up front, so a read-then-write transaction never fails on
a stale snapshot). Creating the engine opens no connection; the first query does.

Example:
    >>> from memory_chain.tiers.sql.engine import create_sql_engine
    >>> engine = create_sql_engine("sqlite:////tmp/mc-example.db")
    >>> engine.dialect.name
    'sqlite'
"""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url

#: Execution option that makes a SQLite transaction start with ``BEGIN IMMEDIATE``.
SQLITE_IMMEDIATE = "memory_chain_sqlite_immediate"


def _sqlite_pragmas(synchronous: str, busy_timeout_ms: int) -> list[str]:
    return [
        "PRAGMA journal_mode=WAL",
        f"PRAGMA synchronous={synchronous}",
        f"PRAGMA busy_timeout={busy_timeout_ms}",
        "PRAGMA foreign_keys=ON",
    ]


def create_sql_engine(
    url: str | URL,
    *,
    sqlite_synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    busy_timeout_s: float = 30.0,
    pool_size: int = 10,
    **kwargs: Any,
) -> Engine:
    """Create the engine for tier 2.

    Args:
        url: SQLAlchemy URL; ``postgresql://`` URLs use psycopg 3.
        sqlite_synchronous: SQLite's ``synchronous`` pragma in WAL mode.
        busy_timeout_s: How long a SQLite writer waits for the lock before failing.
        pool_size: Connections kept open (the pool can grow by as many again).
        **kwargs: Passed to :func:`sqlalchemy.create_engine`.

    Returns:
        A configured engine; no connection is opened yet.
    """
    sa_url = make_url(url)
    if sa_url.drivername in {"postgresql", "postgres"}:
        sa_url = sa_url.set(drivername="postgresql+psycopg")
    if sa_url.get_backend_name() != "sqlite":
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(sa_url, pool_size=pool_size, max_overflow=pool_size, **kwargs)

    if sa_url.database in (None, "", ":memory:"):
        raise ValueError(
            "an in-memory SQLite database cannot be shared between connections: "
            "use a file path (a temporary folder works for tests)"
        )
    connect_args = kwargs.pop("connect_args", {})
    connect_args.setdefault("check_same_thread", False)
    connect_args.setdefault("timeout", busy_timeout_s)
    engine = create_engine(
        sa_url,
        connect_args=connect_args,
        pool_size=pool_size,
        max_overflow=pool_size,
        **kwargs,
    )
    pragmas = _sqlite_pragmas(sqlite_synchronous, int(busy_timeout_s * 1000))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite; the "begin" hook below issues BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(SQLITE_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def writer(engine: Engine) -> Engine:
    """An engine sharing ``engine``'s pool whose transactions take the write lock at once."""
    if engine.dialect.name == "sqlite":
        return engine.execution_options(**{SQLITE_IMMEDIATE: True})
    return engine
