"""The pgvector backend's collections: rows of ``vector_collections``, each with its HNSW index.

The tables and the ``vector`` extension are the migrations'
(:mod:`memory_chain.tiers.sql.vector_tables`); a collection is a row naming its dimension,
and its points are the rows of ``vector_points`` under its name. Each dimension has its own
partial HNSW index over ``embedding::vector(<dimension>)``: the migration builds the default
model's, and :func:`register_collection` the others, the first time an index of that
dimension opens.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, text

from memory_chain.errors import VectorStoreError
from memory_chain.tiers.sql.vector_tables import create_hnsw_index_sql, hnsw_index_name

logger = logging.getLogger(__name__)


def register_collection(conn: Connection, collection: str, dimension: int, where: str) -> None:
    """Register ``collection`` (and its dimension's HNSW index) if missing; idempotent.

    Args:
        conn: A connection in a transaction on the database.
        collection: The collection's name.
        dimension: The length of its vectors.
        where: The database, as error messages name it (no password).

    Raises:
        VectorStoreError: If the tables are missing (pgvector was not installed when the
            database was migrated) or the collection holds vectors of another dimension.
    """
    if conn.execute(text("SELECT to_regclass('vector_points')")).scalar() is None:
        raise VectorStoreError(
            f"the database {where} has no vector tables: pgvector was not "
            "available when it was migrated. Install pgvector on the server (the "
            "pgvector/pgvector images have it), then run `memory-chain migrate`"
        )
    conn.execute(
        text(
            "INSERT INTO vector_collections (name, dimension) VALUES (:c, :d) "
            "ON CONFLICT (name) DO NOTHING"
        ),
        {"c": collection, "d": dimension},
    )
    stored = conn.execute(
        text("SELECT dimension FROM vector_collections WHERE name = :c"),
        {"c": collection},
    ).scalar_one()
    if stored != dimension:
        raise VectorStoreError(
            f"collection {collection!r} at {where} holds {stored}-d vectors, "
            f"this index needs {dimension}-d: use the embedding model it was "
            "built with, another collection name, or drop it and run "
            "`memory-chain reindex`"
        )
    ensure_hnsw(conn, dimension)


def ensure_hnsw(conn: Connection, dimension: int) -> None:
    """Create the HNSW index of this dimension unless a migration already did."""
    name = hnsw_index_name(dimension)
    if conn.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None:
        return
    # Replicas opening at once would race on the index name: serialize them.
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('memory_chain_hnsw'))"))
    conn.execute(text(create_hnsw_index_sql(dimension)))
    logger.info("created the HNSW index %s for %d-d vectors", name, dimension)


def drop_collection(conn: Connection, collection: str) -> None:
    """Delete ``collection``'s points and its row (:func:`register_collection` adds it again)."""
    conn.execute(text("DELETE FROM vector_points WHERE collection = :c"), {"c": collection})
    conn.execute(text("DELETE FROM vector_collections WHERE name = :c"), {"c": collection})
