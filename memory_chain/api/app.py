"""The FastAPI application factory.

Building the app does no I/O: settings are read, the database migrated and the stores opened
when the app starts (its lifespan), and closed when it stops.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from langchain_core.runnables.config import run_in_executor

from memory_chain import __version__
from memory_chain.api.errors import install_error_handlers
from memory_chain.config import MemorySettings
from memory_chain.services import Services, open_services
from memory_chain.tiers.sql.outbox import EmbeddingOutbox

logger = logging.getLogger(__name__)


def get_services(request: Request) -> Services:
    """FastAPI dependency: the running app's services."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def _tier3_health(services: Services) -> dict[str, Any]:
    vectors = services.vectors
    if vectors is None:
        return {"enabled": False}
    worker = vectors.worker
    return {
        "enabled": True,
        "backend": vectors.backend,
        "available": worker is not None and worker.index_open and worker.last_error is None,
        "last_error": worker.last_error if worker else None,
        "queued_turns": EmbeddingOutbox(services.store).count(),
        "embedding_model": getattr(vectors.embeddings, "model_name", None),
    }


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
        services = await run_in_executor(
            None, lambda: open_services(resolved, background=True, llm=True)
        )
        app.state.services = services
        logger.info(
            "memory_chain %s: tier 2 at %s, tier 3 %s",
            __version__,
            services.engine.url.render_as_string(),
            services.vectors.backend if services.vectors else "disabled",
        )
        try:
            yield
        finally:
            await run_in_executor(None, services.close)

    app = FastAPI(
        title="memory_chain",
        version=__version__,
        description="Persistent three-tier conversation memory for LangChain chat apps.",
        lifespan=lifespan,
    )
    install_error_handlers(app)

    @app.get("/health", tags=["service"])
    async def health(services: ServicesDep) -> dict[str, Any]:
        """Whether the service runs, and what each tier runs on."""
        tier3 = await run_in_executor(None, _tier3_health, services)
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
            "tier3": tier3,
            "llm": {
                "provider": services.models.provider if services.models else "none",
                "base_url": services.models.base_url if services.models else None,
                "detail": services.models.detail if services.models else None,
            },
        }

    return app
