"""The pgvector tables of tier 3 in the tier-2 database (PostgreSQL only).

``vector_collections`` names each collection and its dimension; ``vector_points`` holds one
row per point: the turn payload in ordinary columns (B-tree indexes serve the user and
conversation filters) and the unit vector in a ``vector`` column. Each dimension gets a
partial HNSW index over ``embedding::vector(d)`` (pgvector indexes one dimension per index);
the migration creates the one of the default model (384), :class:`PgVectorIndex
<memory_chain.tiers.vectors.pgvector.PgVectorIndex>` the others when it opens.

Migration 0008 creates them when the server has pgvector. A database migrated while the
server had none gets them from :func:`ensure_vector_tables`, which :func:`upgrade
<memory_chain.tiers.sql.migrate.upgrade>` runs after the migrations: install pgvector, run
``memory-chain migrate`` again. This module is therefore the tables' current shape: a later
migration that changes them changes :func:`create_vector_tables` as well.

``CREATE EXTENSION vector`` needs a superuser (or, with pgvector marked trusted, the
database owner); where the migrating role may not, an administrator runs it once and
migrations then find the extension installed.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

logger = logging.getLogger(__name__)

#: The dimension whose HNSW index the migration builds (all-MiniLM-L6-v2, the default model).
DEFAULT_DIMENSION = 384


def hnsw_index_name(dimension: int) -> str:
    """The name of the HNSW index over the points of one dimension."""
    return f"ix_vector_points_hnsw_{dimension}"


def create_hnsw_index_sql(dimension: int) -> str:
    """DDL of the HNSW index for ``dimension``-d points (a partial expression index).

    One table holds collections of any dimension, and pgvector indexes only vectors of one
    dimension, so each dimension gets its own partial index over ``embedding::vector(d)``.
    The vectors are unit length, so the inner product ranks like the cosine.
    """
    if dimension < 1:
        raise ValueError(f"dimension must be positive, got {dimension}")
    return (
        f"CREATE INDEX IF NOT EXISTS {hnsw_index_name(dimension)} ON vector_points "
        f"USING hnsw ((embedding::vector({dimension})) vector_ip_ops) "
        f"WHERE vector_dims(embedding) = {dimension}"
    )


def _extension_ready(conn: Connection) -> bool:
    """Whether ``vector`` is installed in this database, installing it if the server has it."""
    if conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first():
        return True
    available = conn.execute(
        text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).first()
    if available is None:
        logger.warning(
            "PostgreSQL has no pgvector: the pgvector tables of tier 3 are not created (the "
            "embedded and Qdrant backends do not need them). Install pgvector and run "
            "`memory-chain migrate` again to use vector_backend=pgvector"
        )
        return False
    try:
        with conn.begin_nested():
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    except DBAPIError as exc:
        logger.warning(
            "cannot create the vector extension (%s): ask an administrator to run "
            "`CREATE EXTENSION vector;` in this database, then run `memory-chain migrate`",
            str(exc.orig).strip(),
        )
        return False
    return True


def create_vector_tables(conn: Connection) -> bool:
    """Create the extension and the tables (idempotent); False if pgvector is not there."""
    if conn.dialect.name != "postgresql" or not _extension_ready(conn):
        return False
    conn.execute(
        text(
            "CREATE TABLE IF NOT EXISTS vector_collections ("
            "name text PRIMARY KEY, "
            "dimension integer NOT NULL CHECK (dimension > 0), "
            "created_at timestamptz NOT NULL DEFAULT now())"
        )
    )
    conn.execute(
        text(
            "CREATE TABLE IF NOT EXISTS vector_points ("
            "collection text NOT NULL REFERENCES vector_collections (name) ON DELETE CASCADE, "
            "id uuid NOT NULL, "
            "user_id text NOT NULL, "
            "conversation_id text NOT NULL, "
            "turn_number integer NOT NULL, "
            "role text NOT NULL, "
            "content text NOT NULL, "
            "timestamp timestamptz NOT NULL, "
            "tokens integer, "
            "summary text, "
            "tags text[] NOT NULL DEFAULT '{}', "
            "embedding vector NOT NULL, "
            "PRIMARY KEY (collection, id))"
        )
    )
    # The filters every search carries (by user, by user and conversation) and the deletes
    # by conversation: ordinary B-tree indexes.
    conn.execute(
        text(
            "CREATE INDEX IF NOT EXISTS ix_vector_points_user "
            "ON vector_points (collection, user_id, conversation_id)"
        )
    )
    conn.execute(
        text(
            "CREATE INDEX IF NOT EXISTS ix_vector_points_conversation "
            "ON vector_points (collection, conversation_id)"
        )
    )
    conn.execute(text(create_hnsw_index_sql(DEFAULT_DIMENSION)))
    return True


def drop_vector_tables(conn: Connection) -> None:
    """Drop the tables (the extension stays: other schemas may use it)."""
    if conn.dialect.name != "postgresql":
        return
    conn.execute(text("DROP TABLE IF EXISTS vector_points"))
    conn.execute(text("DROP TABLE IF EXISTS vector_collections"))


def ensure_vector_tables(conn: Connection) -> None:
    """Create the tables if they are missing and the server has pgvector by now."""
    if conn.dialect.name != "postgresql":
        return
    if conn.execute(text("SELECT to_regclass('vector_points')")).scalar() is not None:
        return
    if conn.execute(text("SELECT to_regclass('alembic_version')")).scalar() is None:
        return  # not migrated at all: the migrations create them
    if create_vector_tables(conn):
        logger.info("created the pgvector tables of tier 3")
