"""memory_chain's MCP server over standard input and output (``memory-chain mcp``).

The MCP client starts the process and speaks JSON-RPC on its pipes, one message a line, so
standard output must carry protocol messages and nothing else: :func:`protocol_stdout` sends
everything else written there (a library's ``print``, native code writing to descriptor 1)
to standard error, with the logs. The server runs until the client closes its input.

Example:
    >>> server = build_mcp_server(services, user="ana")  # doctest: +SKIP
    >>> anyio.run(serve_stdio, server)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from io import TextIOWrapper
from typing import Any

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.stdio import stdio_server

from memory_chain.integrations.mcp import protocol_server

logger = logging.getLogger(__name__)


@contextmanager
def protocol_stdout() -> Iterator[TextIOWrapper]:
    """Standard output for the protocol alone; anything else written there goes to stderr.

    A library that prints (or native code writing to file descriptor 1) would corrupt the
    JSON-RPC stream; while this is open, descriptor 1 and ``sys.stdout`` are standard error,
    and the protocol writes to a duplicate of the original standard output.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    previous = sys.stdout
    sys.stdout = sys.stderr
    stream = TextIOWrapper(os.fdopen(os.dup(saved), "wb"), encoding="utf-8")
    try:
        yield stream
    finally:
        sys.stdout = previous
        stream.close()
        os.dup2(saved, 1)
        os.close(saved)


async def serve_stdio(server: FastMCP[Any], stdout: TextIOWrapper | None = None) -> None:
    """Serve ``server`` over standard input and output until the client closes its input.

    Args:
        server: The server (:func:`~memory_chain.integrations.mcp.build_mcp_server`).
        stdout: Where protocol messages go: a :func:`protocol_stdout` the caller opened
            already (to cover its own start-up too); by default one is opened here.
    """
    lowlevel = protocol_server(server)
    with protocol_stdout() if stdout is None else nullcontext(stdout) as out:
        logger.info("MCP on stdio: serving until the client closes standard input")
        async with stdio_server(stdout=anyio.wrap_file(out)) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
        logger.info("MCP on stdio: the client closed standard input")
