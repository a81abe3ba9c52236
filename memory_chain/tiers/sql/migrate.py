"""Running tier 2's Alembic migrations from code, the CLI or the server's start-up.

Example:
    >>> from memory_chain.tiers.sql.engine import create_sql_engine
    >>> from memory_chain.tiers.sql.migrate import upgrade, current_revision
    >>> engine = create_sql_engine("sqlite:////tmp/mc-migrate-example.db")
    >>> upgrade(engine)
    >>> current_revision(engine) == head_revision()
    True
"""

from __future__ import annotations

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from memory_chain.errors import SchemaNotReadyError
from memory_chain.tiers.sql.vector_tables import ensure_vector_tables

logger = logging.getLogger(__name__)

_SCRIPTS = Path(__file__).resolve().parent / "migrations"


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    return config


def head_revision() -> str:
    """The newest migration this version of memory_chain ships."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships migrations
        raise RuntimeError("no migrations found")
    return head


def current_revision(engine: Engine) -> str | None:
    """The migration a database is at, or ``None`` for an empty database."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (the newest by default); creates the SQLite file.

    Args:
        engine: The tier-2 engine.
        revision: Target revision.
    """
    database = engine.url.database
    if engine.dialect.name == "sqlite" and database:
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    config = _config()
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            # Replicas starting together migrate one at a time (the lock ends with this
            # transaction; PostgreSQL's DDL is transactional, so the next finds it done).
            connection.execute(
                text("SELECT pg_advisory_xact_lock(hashtext('memory_chain_migrate'))")
            )
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        if revision == "head":
            # pgvector may have been installed since the database was migrated.
            ensure_vector_tables(connection)
    logger.info("tier-2 schema at revision %s (%s)", revision, engine.url.render_as_string())


def downgrade(engine: Engine, revision: str) -> None:
    """Migrate the database down to ``revision`` (``"base"`` removes every table)."""
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def check_schema(engine: Engine) -> None:
    """Raise :class:`SchemaNotReadyError` unless the database is at the newest migration."""
    current = current_revision(engine)
    head = head_revision()
    if current != head:
        raise SchemaNotReadyError(f"database at revision {current}, this version needs {head}")
