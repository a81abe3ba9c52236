"""Where an evaluation keeps its conversations: a temporary SQLite file or PostgreSQL database.

An evaluation never writes into the configured stores. By default its tiers live in a
temporary folder (SQLite and the embedded vector index); given a PostgreSQL server, they live
in a scratch database created on it for the run (tier 2 and, with pgvector, tier 3: the
scale-out configuration), dropped afterwards whatever happens.

Example:
    >>> server = "postgresql://me@db/postgres"
    >>> with scratch_settings(MemorySettings(), server) as settings:  # doctest: +SKIP
    ...     settings.vector_store
    'pgvector'
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from memory_chain.config import MemorySettings
from memory_chain.errors import InvalidInputError, StorageError


def backend_name(postgres_url: str | None) -> str:
    """How the reports name the stores an evaluation runs on."""
    return "sqlite + embedded vectors" if postgres_url is None else "postgresql + pgvector"


def _server_url(postgres_url: str) -> str:
    url = make_url(postgres_url)
    if url.get_backend_name() != "postgresql":
        raise InvalidInputError(
            f"--postgres-url takes a PostgreSQL URL (postgresql+psycopg://user:pw@host/db), "
            f"got a {url.get_backend_name()} one"
        )
    return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


@contextmanager
def scratch_database(postgres_url: str) -> Iterator[str]:
    """A new, empty database on the server of ``postgres_url``, dropped on exit.

    Args:
        postgres_url: A SQLAlchemy URL of any database of the server (only used to connect).

    Yields:
        The URL of the new database.

    Raises:
        InvalidInputError: If the URL is not a PostgreSQL one.
        StorageError: If the database cannot be created (the role needs ``CREATEDB``) or
            the server lacks pgvector.
    """
    server = _server_url(postgres_url)
    name = f"memory_chain_eval_{os.getpid()}_{secrets.token_hex(4)}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        try:
            with admin.connect() as connection:
                vector = connection.execute(
                    text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
                ).first()
                if vector is None:
                    raise StorageError(
                        "the PostgreSQL server has no pgvector extension, which the "
                        "evaluation's tier 3 needs: install it (https://github.com/pgvector/"
                        "pgvector) or use a server that has it"
                    )
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        except SQLAlchemyError as exc:
            raise StorageError(
                f"cannot create the evaluation's scratch database: {exc.__class__.__name__}: "
                f"{exc.args[0] if exc.args else exc}. The evaluation creates a database for "
                "its run on that server and drops it afterwards: use a role with CREATEDB "
                "(ALTER ROLE ... CREATEDB)"
            ) from exc
        try:
            yield make_url(server).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextmanager
def scratch_settings(base: MemorySettings, postgres_url: str | None) -> Iterator[MemorySettings]:
    """``base`` with every store moved to a temporary folder, or to a scratch database.

    Everything else of ``base`` applies (the embedding model and its threads, for instance).
    Tier 3 is on: the embedded index without ``postgres_url``, pgvector with it.
    """
    with tempfile.TemporaryDirectory(prefix="memory-chain-eval-") as folder:
        scratch = {
            "data_dir": Path(folder),
            "database_url": None,
            "sqlite_database_path": None,
            "qdrant_url": None,
            "qdrant_host": None,
            "vector_backend": None,
            "memory_tier3_enabled": True,
        }
        if postgres_url is None:
            yield base.model_copy(update=scratch)
            return
        with scratch_database(postgres_url) as url:
            yield base.model_copy(
                update={**scratch, "database_url": url, "vector_backend": "pgvector"}
            )


def analyze(engine: Engine) -> None:
    """Give PostgreSQL's planner the statistics of the freshly filled tables.

    On a running server autovacuum collects them as tables grow; right after a bulk load
    nothing has yet, and the planner guesses (tens of thousands of rows for a table of a
    few thousand), which makes it scan where an index would do. SQLite needs nothing.
    """
    if engine.dialect.name == "postgresql":
        with engine.begin() as connection:
            connection.execute(text("ANALYZE"))
