"""The FastAPI application factory.

Building the app does no I/O: settings are read, the database migrated and the stores opened
when the app starts (its lifespan), and closed when it stops.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from langchain_core.runnables.config import run_in_executor
from sqlalchemy import Engine

from memory_chain import __version__
from memory_chain.api.errors import install_error_handlers
from memory_chain.config import MemorySettings
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.migrate import current_revision

logger = logging.getLogger(__name__)


@dataclass
class Services:
    """What the routes use; built once at start-up."""

    settings: MemorySettings
    engine: Engine
    store: SQLStore
    buffer: TurnBuffer
    schema_revision: str | None


def open_services(settings: MemorySettings) -> Services:
    """Migrate the database and open the stores."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_sql_engine(settings.sql_url, sqlite_synchronous=settings.sqlite_synchronous)
    upgrade(engine)
    return Services(
        schema_revision=current_revision(engine),
        settings=settings,
        engine=engine,
        store=SQLStore(engine, max_message_chars=settings.max_message_chars),
        buffer=TurnBuffer(
            max_turns=settings.memory_tier1_max_turns,
            max_conversations=settings.memory_tier1_max_conversations,
        ),
    )


def get_services(request: Request) -> Services:
    """FastAPI dependency: the running app's services."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def create_app(settings: MemorySettings | None = None) -> FastAPI:
    """Build the memory_chain API.

    Args:
        settings: Settings to use; read from the environment at start-up when ``None``.

    Returns:
        The FastAPI app (run it with uvicorn).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        resolved = settings or MemorySettings()
        services = await run_in_executor(None, open_services, resolved)
        app.state.services = services
        logger.info(
            "memory_chain %s: tier 2 at %s", __version__, services.engine.url.render_as_string()
        )
        try:
            yield
        finally:
            services.engine.dispose()

    app = FastAPI(
        title="memory_chain",
        version=__version__,
        description="Persistent three-tier conversation memory for LangChain chat apps.",
        lifespan=lifespan,
    )
    install_error_handlers(app)

    @app.get("/health", tags=["service"])
    async def health(services: ServicesDep) -> dict[str, Any]:
        """Whether the service runs, and what it runs on."""
        return {
            "status": "ok",
            "version": __version__,
            "tier1": {
                "conversations": len(services.buffer),
                "max_conversations": services.buffer.max_conversations,
                "max_turns": services.buffer.max_turns,
            },
            "tier2": {
                "dialect": services.engine.dialect.name,
                "schema_revision": services.schema_revision,
            },
        }

    return app
