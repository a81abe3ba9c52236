"""memory_chain's MCP server as streamable HTTP, one endpoint in an ASGI app (``/mcp``).

:class:`StreamableHTTPDoor` is a plain ASGI app: the server mounts it as a route and binds
it to the opened services when it starts. Each request is authenticated first (the server
passes its API-key check), then served by MCP's own streamable HTTP transport, stateless
and answering in JSON: no session outlives its request, so any replica can answer any
request and nothing is kept per client. MCP's own guard against DNS rebinding checks
``Host`` and ``Origin`` as the server's web guard does, from the same settings
(:func:`transport_security`).

The transport runs in the request's own task: a session manager is made for the request,
and its task group is entered and left there (about a tenth of a millisecond). Running
one manager for the whole app would hold a task group open across the app's lifespan, which
is entered in one task and left in another under test clients, and so fails.

The user the request acts as reaches the tools through a context variable, set for the
request's task and copied into every task and worker thread the transport starts from it.

Example:
    >>> door = StreamableHTTPDoor(authenticate=lambda request: "ana")  # doctest: +SKIP
    >>> app.router.routes.append(door.route("/mcp"))  # doctest: +SKIP
    >>> door.bind(services)  # at start-up  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecuritySettings,
)
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

from memory_chain.integrations.mcp import build_mcp_server, protocol_server
from memory_chain.services import Services
from memory_chain.web_policy import WebPolicy

#: The user of the request being served.
_caller: ContextVar[str] = ContextVar("memory_chain_mcp_caller")


def current_caller() -> str:
    """The user of the MCP request being served.

    Raises:
        LookupError: Outside a request served by a :class:`StreamableHTTPDoor`.
    """
    return _caller.get()


class StreamableHTTPDoor:
    """An ASGI app serving memory over MCP's streamable HTTP, as each request's user.

    Creating one does no I/O; :meth:`bind` builds the MCP server once the services are
    open. Until then it answers 503.

    Args:
        authenticate: The user a request acts as
            (:func:`~memory_chain.api.deps.resolve_user`); raises an error the app answers
            (401, 403, 422) to refuse the request.
    """

    def __init__(self, authenticate: Callable[[Request], str]) -> None:
        self.authenticate = authenticate
        self._server: Server[Any, Any] | None = None
        self._max_body_bytes = DEFAULT_MAX_REQUEST_BODY_SIZE
        self._security = TransportSecuritySettings()  # trusts nothing until bound

    def route(self, path: str) -> Route:
        """A route serving this door at ``path``.

        ``POST`` only: with no session kept, there is no stream to ``GET`` and no session to
        ``DELETE``.
        """
        return _SelfNamingRoute(path, self, methods=["POST"])

    def bind(self, services: Services) -> None:
        """Serve the memory of these services (the server calls it at start-up)."""
        self._server = protocol_server(build_mcp_server(services, user=current_caller))
        self._max_body_bytes = services.settings.max_request_bytes
        self._security = transport_security(WebPolicy.from_settings(services.settings))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate the request, then answer it with MCP's transport as its user."""
        server = self._server
        if server is None:
            response = JSONResponse({"detail": "the server is starting: retry"}, 503)
            await response(scope, receive, send)
            return
        user = self.authenticate(Request(scope, receive))
        manager = StreamableHTTPSessionManager(
            app=server,
            json_response=True,
            stateless=True,
            security_settings=self._security,
            max_request_body_size=self._max_body_bytes,
        )
        token = _caller.set(user)
        try:
            async with manager.run():
                await manager.handle_request(scope, receive, send)
        finally:
            _caller.reset(token)


def transport_security(policy: WebPolicy) -> TransportSecuritySettings:
    """MCP's own DNS-rebinding guard, trusting what the server's web guard trusts.

    The server checks every request first (:mod:`memory_chain.api.web_guard`); MCP's guard
    is the second wall, for this door wherever it is mounted. Its lists are exact strings
    or ``name:*`` (any port), so a trusted name without a port is listed both ways, and
    its pages' origins under both schemes: whatever the server's guard lets through, MCP's
    lets through too, and a well-formed name the server refuses MCP refuses (it compares as
    sent: the stricter of the two on unusual spellings such as upper case).
    ``*`` in ``trusted_hosts`` turns MCP's guard off (the server's still checks ``Origin``).
    """
    if policy.any_host:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts: list[str] = []
    origins = list(policy.origins)
    for host in policy.hosts:
        spellings = [host.name, f"{host.name}:*"] if host.port is None else [str(host)]
        hosts.extend(spellings)
        origins.extend(f"{scheme}://{name}" for scheme in ("http", "https") for name in spellings)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class _SelfNamingRoute(Route):
    """A route that records itself in the scope, as FastAPI's own routes do.

    The server's request metrics label a request by ``scope["route"].path``.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """Match as a route does, and name the route in the child scope."""
        match, child_scope = super().matches(scope)
        if match is not Match.NONE:
            child_scope["route"] = self
        return match, child_scope
