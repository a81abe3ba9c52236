"""The FastAPI application factory.

Building the app does no I/O: settings are read, the database migrated and the stores opened
when the app starts (its lifespan), and closed when it stops.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from langchain_core.runnables.config import run_in_executor

from memory_chain import __version__
from memory_chain.api import conversations, langserve_routes, metrics, openai_compat, user_memory
from memory_chain.api.deps import ServicesDep, get_services, resolve_user
from memory_chain.api.errors import BodySizeLimit, install_error_handlers
from memory_chain.api.web_guard import WebGuard
from memory_chain.config import MemorySettings
from memory_chain.integrations.mcp_http import StreamableHTTPDoor
from memory_chain.services import Services, open_services
from memory_chain.web_policy import WebPolicy

logger = logging.getLogger(__name__)

#: The memory browser's files (served at /ui/).
UI_DIR = Path(__file__).resolve().parent.parent / "ui"


def _halt_on_signals(services: Services) -> Callable[[], None]:
    """Stop starting background work as soon as SIGTERM or SIGINT arrives.

    The server (uvicorn) handles these signals by draining open requests first and running
    the shutdown only then; meanwhile consolidation would go on summarizing range after range.
    The handler it installed is wrapped, so that :meth:`Services.halt` runs on the signal
    (it only sets flags), and is put back by the returned function.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # a test client runs the app in a thread: no signals there
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handle(sig: int, frame: FrameType | None) -> None:
        services.halt()
        handler = previous[signal.Signals(sig)]
        if callable(handler):
            handler(sig, frame)
        else:  # the default action, or ignoring it: as before
            signal.signal(sig, handler)
            signal.raise_signal(sig)

    for sig in previous:
        signal.signal(sig, handle)

    def restore() -> None:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is handle:
                signal.signal(sig, handler)

    return restore


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
        web["policy"] = WebPolicy.from_settings(resolved)
        logger.log(
            logging.WARNING if web["policy"].any_host else logging.INFO,
            "memory_chain: %s",
            web["policy"].describe(),
        )
        services = await run_in_executor(
            None, lambda: open_services(resolved, background=True, llm=True)
        )
        app.state.services = services
        if services.chain is not None:
            chat.bind_target(services.chain)
        retriever.bind_target(langserve_routes.retriever_target(services.manager))
        mcp_door.bind(services)
        limits["max_bytes"] = services.settings.max_request_bytes
        logger.info(
            "memory_chain %s: tier 2 at %s, tier 3 %s",
            __version__,
            services.engine.url.render_as_string(),
            services.vectors.backend if services.vectors else "disabled",
        )
        restore = _halt_on_signals(services)
        try:
            yield
        finally:
            restore()
            await run_in_executor(None, services.close)

    app = FastAPI(
        title="memory_chain",
        version=__version__,
        description="Persistent three-tier conversation memory for LangChain chat apps.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    known = settings or MemorySettings.model_construct()  # the defaults until it starts
    limits = {"max_bytes": known.max_request_bytes}
    app.add_middleware(BodySizeLimit, max_bytes=lambda: limits["max_bytes"])
    # In front of every route (the API, /mcp, /ui, LangServe, /health, /metrics): requests
    # for another host name or from another site's page never reach one.
    web = {"policy": WebPolicy.from_settings(known)}
    app.add_middleware(WebGuard, policy=lambda: web["policy"])
    # Outermost, so that requests refused by the guard or the size limit are timed too.
    app.add_middleware(metrics.RequestMetrics)
    app.include_router(conversations.router)
    app.include_router(openai_compat.router)
    app.include_router(user_memory.router)
    app.include_router(metrics.router)
    # The memory browser: static files over the API above (no build step).
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
    chat = langserve_routes.chat_stand_in()
    retriever = langserve_routes.retriever_stand_in()
    langserve_routes.mount(app, chat, retriever)
    # MCP clients over streamable HTTP, each request as the user its key names. A plain
    # Starlette route: MCP's JSON-RPC endpoint has its own schema, not OpenAPI's.
    mcp_door = StreamableHTTPDoor(
        authenticate=lambda request: resolve_user(request, get_services(request))
    )
    app.router.routes.append(mcp_door.route("/mcp"))

    @app.get("/health", tags=["service"])
    def health(services: ServicesDep) -> dict[str, Any]:
        """Whether the service runs, and what each tier runs on."""
        return {"status": "ok", "version": __version__, **services.health()}

    return app
