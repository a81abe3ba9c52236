"""The ``memory-chain`` command."""

from __future__ import annotations

import json
import logging
from typing import Annotated

import typer

from memory_chain.config import MemorySettings

app = typer.Typer(help="Persistent three-tier conversation memory.", no_args_is_help=True)


def _settings() -> MemorySettings:
    settings = MemorySettings()
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return settings


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
) -> None:
    """Run the API server (settings from MEMORY_CHAIN_* variables or .env)."""
    import uvicorn

    from memory_chain.api import create_app

    settings = _settings()
    uvicorn.run(
        create_app(settings),
        host=host or settings.server_host,
        port=port or settings.server_port,
        log_level=settings.log_level.lower(),
    )


@app.command()
def migrate() -> None:
    """Create or upgrade the tier-2 database schema."""
    from memory_chain.tiers.sql import create_sql_engine, upgrade
    from memory_chain.tiers.sql.migrate import current_revision

    settings = _settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_sql_engine(settings.sql_url)
    upgrade(engine)
    typer.echo(f"schema at revision {current_revision(engine)}: {engine.url.render_as_string()}")


@app.command()
def stats() -> None:
    """Print counts of conversations, turns and summaries as JSON."""
    from sqlalchemy import func, select

    from memory_chain.tiers.sql import check_schema, create_sql_engine
    from memory_chain.tiers.sql.models import conversations, summaries, turns

    settings = _settings()
    engine = create_sql_engine(settings.sql_url)
    check_schema(engine)
    with engine.connect() as conn:
        counts = {
            table.name: conn.execute(select(func.count()).select_from(table)).scalar_one()
            for table in (conversations, turns, summaries)
        }
    typer.echo(json.dumps({"database": engine.url.render_as_string(), **counts}, indent=2))
