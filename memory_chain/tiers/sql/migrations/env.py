"""Alembic environment: runs on the connection that memory_chain.tiers.sql.migrate passes in."""

from alembic import context
from sqlalchemy import Connection

from memory_chain.tiers.sql.models import Base

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError(
        "run migrations through `memory-chain migrate` or memory_chain.tiers.sql.migrate"
    )
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
