"""The serving commands: ``memory-chain serve`` (the API server) and ``mcp`` (stdio MCP)."""

from __future__ import annotations

import signal
from typing import Annotated

import typer

from memory_chain.cli.console import fail, load_settings


def serve(
    host: Annotated[str | None, typer.Option(help="Interface to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
) -> None:
    """Run the API server (settings from MEMORY_CHAIN_* variables or .env)."""
    import uvicorn

    from memory_chain.api import create_app

    settings = load_settings()
    if host:  # the address bound is trusted as a host name (see trusted_hosts)
        settings = settings.model_copy(update={"server_host": host})
    uvicorn.run(
        create_app(settings),
        host=settings.server_host,
        port=port or settings.server_port,
        log_level=settings.log_level.lower(),
        # Open requests get the grace period; the app's shutdown then gets what is left of it.
        timeout_graceful_shutdown=max(int(settings.shutdown_grace_seconds), 1),
    )


def mcp(
    user: Annotated[
        str | None, typer.Option(help="Whose memory to serve (default: default_user_id).")
    ] = None,
) -> None:
    """Serve one user's memory to an MCP client over standard input and output (docs/cli.md)."""
    import anyio

    from memory_chain.errors import InvalidInputError, MemoryChainError
    from memory_chain.identity import Caller, identify
    from memory_chain.integrations.mcp import build_mcp_server
    from memory_chain.integrations.mcp_stdio import protocol_stdout, serve_stdio
    from memory_chain.services import open_services

    settings = load_settings()
    try:
        # In process: this command holds the stores, so no key is asked.
        owner = identify(settings, Caller.in_process(user or None))
    except InvalidInputError as exc:
        raise typer.BadParameter(str(exc), param_hint="--user") from exc
    # SIGTERM (from a client that gave up waiting for the exit, or a process manager) stops
    # the server as Ctrl-C does, so that the stores are closed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # Standard output carries the protocol alone, from before the stores open (a library
    # printing there would break the client's stream); everything else goes to stderr.
    with protocol_stdout() as out:
        try:
            services = open_services(settings)
        except MemoryChainError as exc:
            fail(exc)
        try:
            anyio.run(serve_stdio, build_mcp_server(services, user=owner), out)
        finally:
            services.close()
