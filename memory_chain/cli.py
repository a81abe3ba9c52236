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
def reindex(
    user: Annotated[str | None, typer.Option(help="Only this user's conversations.")] = None,
    conversation: Annotated[str | None, typer.Option(help="Only this conversation.")] = None,
) -> None:
    """Rebuild tier 3 (vectors) from tier 2 (SQL): everything, one user or one conversation."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from memory_chain.services import open_services

    settings = _settings()
    services = open_services(settings)
    try:
        if services.vectors is None:
            raise typer.BadParameter("tier 3 is disabled (MEMORY_CHAIN_MEMORY_TIER3_ENABLED)")
        scope = conversation or (f"user {user}" if user else "every conversation")
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        ) as bar:
            task = bar.add_task(f"embedding {scope}", total=None)
            done = services.vectors.indexer.reindex(
                user_id=user,
                conversation_id=conversation,
                progress=lambda finished, total: bar.update(task, completed=finished, total=total),
            )
        typer.echo(f"reindexed {done} turns into {services.vectors.backend}")
    finally:
        services.close()


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
