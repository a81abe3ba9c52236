"""The web guard: every request's ``Host`` and ``Origin`` checked before any route sees it.

One ASGI middleware in front of every route (the API, ``/mcp``, ``/ui``, LangServe,
``/health``, ``/metrics``), deciding with :class:`~memory_chain.web_policy.WebPolicy`:

- a ``Host`` the server is not served under: **421** (DNS rebinding: a page that re-points
  its own name at this server sends that name);
- an ``Origin`` that is neither the server's own page nor listed in ``allowed_origins``:
  **403**, whatever the method (a page of another origin: the browser would hide the answer
  but still deliver the request);
- no ``Origin``, but ``Sec-Fetch-Site`` says another site's page is loading from the server
  (an image, a script, a frame; not the user following a link): **403**.

Each refusal answers ``{"detail": ...}`` naming the setting to change. Requests of listed
origins pass through Starlette's CORS middleware (their preflights are answered, their
answers readable); no other origin gets any CORS header, so CORS is closed by default.

Example:
    >>> app.add_middleware(WebGuard, policy=lambda: policy)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from memory_chain.web_policy import (
    HOSTS_SETTING,
    ORIGINS_SETTING,
    WebPolicy,
    refused_without_origin,
)

logger = logging.getLogger(__name__)

#: Answer headers a listed origin's page may read (besides CORS's safelisted ones).
EXPOSED_HEADERS = ("X-Conversation-Id", "Content-Disposition")


class WebGuard:
    """ASGI middleware: refuse requests for foreign host names and from foreign pages.

    Args:
        app: The wrapped app.
        policy: The policy in force (read per request: the app sets it when it starts).
    """

    def __init__(self, app: ASGIApp, policy: Callable[[], WebPolicy]) -> None:
        self.app = app
        self.policy = policy
        self._cors: tuple[tuple[str, ...], ASGIApp] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, through CORS for a listed origin, or refuse it."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        policy = self.policy()
        headers = Headers(scope=scope)
        host, origin = headers.get("host"), headers.get("origin")
        refusal = refusal_of(scope, headers, policy)
        if refusal is None:
            listed = origin is not None and policy.origin_allowed(origin, host) == "listed"
            await (self._with_cors(policy) if listed else self.app)(scope, receive, send)
            return
        status, detail = refusal
        logger.warning(
            "refused %s %s (Host %r, Origin %r): %d",
            scope.get("method", "WEBSOCKET"),
            scope.get("path", ""),
            host,
            origin,
            status,
        )
        if scope["type"] == "websocket":
            await WebSocketClose(code=1008)(scope, receive, send)
            return
        await JSONResponse({"detail": detail}, status_code=status)(scope, receive, send)

    def _with_cors(self, policy: WebPolicy) -> ASGIApp:
        """The app behind CORS for the policy's listed origins (built once per list)."""
        if self._cors is None or self._cors[0] != policy.origins:
            cors = CORSMiddleware(
                self.app,
                allow_origins=list(policy.origins),
                allow_methods=["*"],
                allow_headers=["*"],
                expose_headers=list(EXPOSED_HEADERS),
                max_age=600,
            )
            self._cors = (policy.origins, cors)
        return self._cors[1]


def refusal_of(scope: Scope, headers: Headers, policy: WebPolicy) -> tuple[int, str] | None:
    """The status and message refusing a request, or ``None`` when it may pass."""
    host, origin = headers.get("host"), headers.get("origin")
    if not policy.host_allowed(host):
        return 421, _foreign_host(host, policy)
    if origin is not None:
        return None if policy.origin_allowed(origin, host) else (403, _foreign_origin(origin))
    site = headers.get("sec-fetch-site")
    mode, dest = headers.get("sec-fetch-mode"), headers.get("sec-fetch-dest")
    if refused_without_origin(scope.get("method", "GET"), site, mode, dest):
        return 403, _other_site(site, dest)
    return None


def _foreign_host(host: str | None, policy: WebPolicy) -> str:
    trusted = ", ".join(str(name) for name in policy.hosts)
    if not host:
        return f"no Host header: send the name you reach the server under ({trusted})"
    return (
        f"this server does not answer to the host name {host!r}, only to {trusted} (a name "
        f"without a port: any port). If you reach it under that name, add the name to "
        f"{HOSTS_SETTING}: the check keeps web pages on other names (DNS rebinding) away "
        "from memory"
    )


def _foreign_origin(origin: str) -> str:
    return (
        f"a web page of the origin {origin!r} may not call this server: only its own pages "
        f"and the origins listed in {ORIGINS_SETTING} may. To let that page call it from a "
        f"browser, add its origin to {ORIGINS_SETTING}"
    )


def _other_site(site: str | None, dest: str | None) -> str:
    return (
        f"another site's page may not load from this server (Sec-Fetch-Site: {site}, "
        f"Sec-Fetch-Dest: {dest}): open the server's pages directly, or call it with fetch "
        f"from an origin listed in {ORIGINS_SETTING}"
    )
