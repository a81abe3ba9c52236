"""Which browsers' requests may reach memory: the names the server answers to, and the pages.

A browser sends with each request the name it asked for (``Host``) and, on every request but
a same-origin ``GET``, the origin of the page that made it (``Origin``). Two attacks use the
browser of the server's own user to reach a server that listens on 127.0.0.1 only:

- **DNS rebinding.** A page at ``http://attacker.example:8000/`` has its name re-resolved to
  127.0.0.1: for the browser the page and the server are then one origin, so the page may
  read every answer (an export) and send anything (``DELETE /v1/users/me``). Its requests
  still say ``Host: attacker.example:8000``: the server answers the names it is served under
  only (:meth:`WebPolicy.host_allowed`).
- **Cross-origin requests.** A page of another origin (another site, or another port of
  localhost) sends a request; the browser hides the answer but sends the request. Its
  ``Origin`` names the page: the server answers its own pages and the origins an operator
  listed only (:meth:`WebPolicy.origin_allowed`). A request without ``Origin`` that the
  browser marks as another site's (``Sec-Fetch-Site``) is refused too, unless it is the
  user opening a page (:func:`refused_without_origin`).

Clients that are not browsers (Open WebUI's server, the openai SDK, ``RemoteRunnable``,
curl) send the name they connect to and no ``Origin``: they pass when that name is trusted.

Pure functions and one frozen value, with no web framework: the settings check their
entries with :func:`host_entry` and :func:`origin_entry`, the ASGI middleware
(:mod:`memory_chain.api.web_guard`) and MCP's own transport guard
(:mod:`memory_chain.integrations.mcp_http`) decide from one :class:`WebPolicy`.

Example:
    >>> policy = WebPolicy.build(["api"], ["http://localhost:3000"], server_host="0.0.0.0")
    >>> policy.host_allowed("api:8000"), policy.host_allowed("attacker.example:8000")
    (True, False)
    >>> policy.origin_allowed("http://api:8000", "api:8000")
    'own'
    >>> policy.origin_allowed("http://localhost:3000", "localhost:8000")
    'listed'
    >>> policy.origin_allowed("http://localhost:5173", "localhost:8000") is None
    True
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

#: The names of this machine's loopback interface, trusted whatever the settings say.
LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
#: A ``trusted_hosts`` entry that answers to every name (no host check: unsafe).
ANY_HOST: Final = "*"
#: Settings that change what is trusted, as environment variables (named in every refusal).
HOSTS_SETTING: Final = "MEMORY_CHAIN_TRUSTED_HOSTS"
ORIGINS_SETTING: Final = "MEMORY_CHAIN_ALLOWED_ORIGINS"
#: Bind addresses that mean every interface: they name no host.
_WILDCARD_BINDS: Final = frozenset({"", "0.0.0.0", "::", "[::]"})  # noqa: S104 (compared)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")

#: How an accepted ``Origin`` relates to the server: its own page, or a listed one.
OriginVerdict = Literal["own", "listed"]


class WebSettings(Protocol):
    """The settings the policy is built from.

    :class:`~memory_chain.config.MemorySettings` has them; this module does not import it,
    since the settings check their entries here (:func:`host_entry`, :func:`origin_entry`).
    """

    @property
    def server_host(self) -> str:
        """The address the server binds."""
        ...

    @property
    def trusted_hosts(self) -> list[str]:
        """Host names the server answers to besides the loopback names."""
        ...

    @property
    def allowed_origins(self) -> list[str]:
        """Origins of other sites' pages that may call the API."""
        ...


@dataclass(frozen=True)
class Authority:
    """A host name (lower case, an IPv6 address in brackets) and its port, if one was given."""

    name: str
    port: int | None = None

    def __str__(self) -> str:
        return self.name if self.port is None else f"{self.name}:{self.port}"


@dataclass(frozen=True)
class Origin:
    """A web origin: scheme, host name and port (the scheme's default port when omitted)."""

    scheme: str
    name: str
    port: int | None

    def __str__(self) -> str:
        """The origin as browsers serialize it (``http://localhost:3000``, no default port)."""
        shown = self.port is not None and self.port != _DEFAULT_PORTS.get(self.scheme)
        return f"{self.scheme}://{self.name}" + (f":{self.port}" if shown else "")


def parse_authority(value: str) -> Authority | None:
    """A ``Host`` header (``name``, ``name:port``, ``[v6]:port``), or ``None`` if malformed.

    Names are compared in lower case; IPv6 addresses in their compressed form, in brackets.
    """
    text = value.strip().lower()
    if text.startswith("["):
        address, bracket, rest = text[1:].partition("]")
        try:
            name = f"[{ipaddress.IPv6Address(address).compressed}]" if bracket else ""
        except ValueError:
            return None
    else:
        name, _, port_text = text.partition(":")
        rest = text[len(name) :]
        if not _NAME.fullmatch(name) or ":" in port_text:
            return None
    if not name:
        return None
    if not rest or rest == ":":
        return Authority(name)
    port_text = rest[1:]
    if not rest.startswith(":") or not port_text.isascii() or not port_text.isdigit():
        return None
    port = int(port_text)
    return Authority(name, port) if 0 < port < 65_536 else None


def parse_origin(value: str) -> Origin | None:
    """An ``Origin`` header (``scheme://host[:port]``), or ``None`` (``null``, malformed)."""
    scheme, separator, rest = value.strip().partition("://")
    scheme = scheme.lower()
    if not separator or not _SCHEME.fullmatch(scheme):
        return None
    authority = parse_authority(rest)
    if authority is None:
        return None
    port = authority.port if authority.port is not None else _DEFAULT_PORTS.get(scheme)
    return Origin(scheme, authority.name, port)


def host_entry(value: str) -> str:
    """A ``trusted_hosts`` entry in its normal form (``name``, ``name:port``, ``[v6]``, ``*``).

    Raises:
        ValueError: Saying what to write instead, when ``value`` is not a host name.
    """
    text = value.strip()
    if text == ANY_HOST:
        return ANY_HOST
    if "://" in text:
        netloc = text.split("://", 1)[1].split("/", 1)[0]
        raise ValueError(
            f"trusted_hosts: {value!r} is a URL: give the host name only ({netloc!r}); the "
            "origins of web pages allowed to call the server go in allowed_origins"
        )
    with contextlib.suppress(ValueError):  # an IPv6 address, unbracketed
        text = f"[{ipaddress.IPv6Address(text).compressed}]"
    authority = parse_authority(text)
    if authority is None:
        raise ValueError(
            f"trusted_hosts: {value!r} is not a host name: give a name or an address, with "
            "':port' to trust one port only (e.g. memory.example.com, api:8000, [fd00::1])"
        )
    return str(authority)


def origin_entry(value: str) -> str:
    """An ``allowed_origins`` entry in its normal form (``scheme://host[:port]``).

    Raises:
        ValueError: Saying what to write instead, for a wildcard, ``null`` or a non-origin.
    """
    text = value.strip().rstrip("/")
    if text == "*":
        raise ValueError(
            "allowed_origins: '*' would let every web page read and change memory: list each "
            "page's origin (scheme://host[:port], e.g. http://localhost:3000)"
        )
    if text.lower() == "null":
        raise ValueError(
            "allowed_origins: 'null' is the origin of sandboxed frames and local files, which "
            "any page can create: it cannot be allowed"
        )
    origin = parse_origin(text)
    if origin is None:
        raise ValueError(
            f"allowed_origins: {value!r} is not a web origin: give scheme://host[:port] as the "
            "browser shows it, without a path (e.g. http://localhost:3000)"
        )
    return str(origin)


def unique(values: Iterable[str]) -> list[str]:
    """``values`` without repeats, in their order."""
    return list(dict.fromkeys(values))


def refused_without_origin(
    method: str, site: str | None, mode: str | None, dest: str | None
) -> bool:
    """Whether a request without ``Origin`` is another site's page loading from the server.

    Browsers mark each request with ``Sec-Fetch-Site``; without ``Origin``, one of another
    site (or of another port of the same host: ``same-site``) is a page embedding the server
    (an image, a script, a frame: the answer may leak through side channels, and a framed
    memory browser could be clicked through) or the user following a link. A link opens a
    page (a top-level ``GET`` of a document) and is let through; everything else is refused.
    Requests without the header (other clients, older browsers) are not browsers' page loads
    that this could tell apart, and pass (the ``Host`` check still applies to them).
    """
    if site not in ("cross-site", "same-site"):
        return False
    opens_a_page = method in ("GET", "HEAD") and mode == "navigate" and dest == "document"
    return not opens_a_page


@dataclass(frozen=True)
class WebPolicy:
    """The host names the server answers to, and the other origins whose pages may call it.

    Build it with :meth:`build` or :meth:`from_settings`.

    Attributes:
        hosts: Trusted names; one without a port matches every port.
        any_host: Every name is trusted (``trusted_hosts`` holds ``*``).
        origins: Listed origins of other pages (normal form), which get CORS.
    """

    hosts: tuple[Authority, ...]
    any_host: bool
    origins: tuple[str, ...]

    @classmethod
    def build(
        cls, trusted_hosts: Sequence[str], allowed_origins: Sequence[str], server_host: str
    ) -> WebPolicy:
        """The policy of these settings' values.

        Args:
            trusted_hosts: Names to answer to besides the loopback names (``*``: every name).
            allowed_origins: Origins of other pages allowed to call the server.
            server_host: The address the server binds; trusted unless it is a wildcard
                (``0.0.0.0``, ``::``), which names no host.
        """
        names = list(LOOPBACK_NAMES)
        if server_host.strip() not in _WILDCARD_BINDS:
            with contextlib.suppress(ValueError):  # not an address uvicorn could bind either
                names.append(host_entry(server_host))
        names.extend(host_entry(host) for host in trusted_hosts)
        any_host = ANY_HOST in names
        hosts: list[Authority] = []
        for name in unique(names):
            authority = parse_authority(name)
            if authority is not None:
                hosts.append(authority)
        return cls(
            hosts=tuple(hosts),
            any_host=any_host,
            origins=tuple(unique(origin_entry(origin) for origin in allowed_origins)),
        )

    @classmethod
    def from_settings(cls, settings: WebSettings) -> WebPolicy:
        """The policy of ``trusted_hosts``, ``allowed_origins`` and ``server_host``."""
        return cls.build(settings.trusted_hosts, settings.allowed_origins, settings.server_host)

    def host_allowed(self, host: str | None) -> bool:
        """Whether the server answers a request whose ``Host`` header is ``host``."""
        if self.any_host:
            return True
        authority = parse_authority(host) if host else None
        if authority is None:
            return False
        return any(
            trusted.name == authority.name and trusted.port in (None, authority.port)
            for trusted in self.hosts
        )

    def origin_allowed(self, origin: str, host: str | None) -> OriginVerdict | None:
        """How a request's ``Origin`` relates to the server, or ``None`` if it is refused.

        ``"own"``: a page of the server itself, the scheme, name and port the request was
        sent to (a trusted ``Host``; the port is compared, not the scheme's default port,
        so a proxy that terminates TLS keeps its pages); ``"listed"``: in ``origins``.
        """
        parsed = parse_origin(origin)
        if parsed is None:
            return None
        if str(parsed) in self.origins:
            return "listed"
        target = parse_authority(host) if host else None
        if target is None or parsed.scheme not in _DEFAULT_PORTS or not self.host_allowed(host):
            return None
        port = target.port if target.port is not None else _DEFAULT_PORTS[parsed.scheme]
        if parsed.name == target.name and parsed.port == port:
            return "own"
        return None

    def describe(self) -> str:
        """One line for the log: what is trusted, and the settings that change it."""
        if self.any_host:
            hosts = "every host name ('*' in trusted_hosts: no protection from DNS rebinding)"
        else:
            hosts = ", ".join(str(host) for host in self.hosts)
            hosts = f"the host names {hosts} (a name without a port: any port)"
        origins = ", ".join(self.origins) if self.origins else "none"
        return (
            f"answering to {hosts}; browser pages of the server's own origin, and of other "
            f"origins listed: {origins}. Change with {HOSTS_SETTING} and {ORIGINS_SETTING}."
        )
