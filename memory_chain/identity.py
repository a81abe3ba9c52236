"""Who the caller is: the one rule every door of memory_chain decides the user by.

Every way into memory asks :func:`identify`: the HTTP routes, LangServe's ``/memory``, the
MCP endpoint ``/mcp`` (through :mod:`memory_chain.api.deps`), and the in-process doors (the
agent middleware, the LangGraph store, ``memory-chain mcp`` over stdio). It takes the
settings and what the caller presents (a :class:`Caller`) and returns the user id, or raises:

* **No keys configured** (``api_keys`` and ``proxy_api_keys`` empty: single-tenant, local).
  The server trusts whoever reaches it: the user a LangServe config names, else the user
  header (``X-OpenWebUI-User-Id`` or ``X-User-Id``), else ``default_user_id``. Keep such a
  server on a trusted address (127.0.0.1, a private network).
* **An ``api_keys`` key** is its user, whatever the headers say (headers cannot impersonate;
  a front end may forward them anyway and they are ignored). A request that names another
  user in its body (LangServe's ``configurable.user_id``) is refused (403), not silently
  served as the key's user.
* **A ``proxy_api_keys`` key** belongs to a front end that serves many users with one key
  (Open WebUI). The user header names the user, inside the key's namespace:
  ``<namespace>:<id>``. Without the header the request is refused (403): Open WebUI sends it
  only with ``ENABLE_FORWARD_USER_INFO_HEADERS=True``, and serving every account as one user
  would put each account's facts and turns into the others' prompts. Only when
  ``proxy_shared_user`` is set does a request without the header act as ``<namespace>``,
  one user shared by every account of that front end.
* **No key, or an unknown one**, where keys are configured: 401.
* **In-process doors** (:meth:`Caller.in_process`) hold the stores themselves, so no key is
  asked: the user the code names, else ``default_user_id``, checked as every user id is
  (:func:`~memory_chain.schemas.validate_id`, 422 over HTTP).

The user ids of the three kinds never meet (:func:`check_reserved_names`, run when the
settings are read): a direct user or ``default_user_id`` can be neither a proxy's namespace
nor inside one (``<namespace>:...``), and namespaces hold no ``:``.

This module imports nothing of FastAPI: headers are any case-insensitive mapping (Starlette's
``Headers``), so every door can use it.

Example:
    >>> from memory_chain.config import MemorySettings
    >>> settings = MemorySettings(proxy_api_keys={"k-webui": "webui"})
    >>> identify(settings, Caller(key="k-webui", header_users=("u-1",)))
    'webui:u-1'
    >>> identify(settings, Caller.in_process("ana"))
    'ana'
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from memory_chain.errors import AuthenticationError, IdentityRefusedError, InvalidInputError
from memory_chain.schemas import validate_id

#: Headers naming the user, as a front end forwards them (lower case, as HTTP compares them).
USER_HEADERS = ("x-openwebui-user-id", "x-user-id")
#: The environment variable of ``proxy_shared_user`` (named in refusals).
SHARED_USER_ENV = "MEMORY_CHAIN_PROXY_SHARED_USER"

MISSING_KEY = "missing or unknown API key: send 'Authorization: Bearer <key>'"
NO_USER_HEADER = (
    "this proxy key serves many users, and the request names none: send the user's id in the "
    "X-OpenWebUI-User-Id (or X-User-Id) header. In Open WebUI set "
    "ENABLE_FORWARD_USER_INFO_HEADERS=True (and leave FORWARD_USER_INFO_HEADER_JWT_SECRET "
    "unset), so that each account keeps its own memory; only if every user of this front end "
    f"may share one memory, set {SHARED_USER_ENV}=true on memory_chain"
)


class IdentitySettings(Protocol):
    """The settings who the caller is depends on.

    :class:`~memory_chain.config.MemorySettings` has them; this module does not import it,
    since the settings check their names here (:func:`check_reserved_names`).
    """

    @property
    def api_keys(self) -> Mapping[str, str]:
        """API key -> user id."""
        ...

    @property
    def proxy_api_keys(self) -> Mapping[str, str]:
        """API key -> namespace of a front end's users."""
        ...

    @property
    def proxy_shared_user(self) -> bool:
        """Whether a proxy request without a user header acts as the namespace."""
        ...

    @property
    def default_user_id(self) -> str:
        """The user of keyless and in-process callers that name none."""
        ...

    @property
    def keys_required(self) -> bool:
        """Whether requests must present an API key."""
        ...


@dataclass(frozen=True, slots=True)
class Caller:
    """What a request presents to say who it is.

    Attributes:
        key: The API key it presents (HTTP doors), or ``None``.
        header_users: The non-empty values of its user headers (:data:`USER_HEADERS`).
        named_user: A user it names itself: LangServe's ``configurable.user_id`` over HTTP,
            the user an in-process caller's code names. ``None``: none named.
        holds_stores: Whether the caller is code holding the stores itself (an in-process
            door): there is no key to check.
    """

    key: str | None = None
    header_users: tuple[str, ...] = ()
    named_user: object = None
    holds_stores: bool = False

    @classmethod
    def from_headers(cls, headers: Mapping[str, str], *, named_user: object = None) -> Caller:
        """The caller of an HTTP request, from its headers.

        Args:
            headers: The request's headers, looked up by lower-case name (Starlette's
                ``Headers`` compares names without case).
            named_user: A user the request names in its body (LangServe's configurable).
        """
        found = (headers.get(name) for name in USER_HEADERS)
        return cls(
            key=presented_key(headers),
            header_users=tuple(value for value in found if value),
            named_user=named_user,
        )

    @classmethod
    def in_process(cls, user: object) -> Caller:
        """Code that holds the stores, acting as ``user`` (``None``: ``default_user_id``)."""
        return cls(named_user=user, holds_stores=True)


def identify(settings: IdentitySettings, caller: Caller) -> str:
    """The user a caller acts as (see the module docstring for the rules).

    Args:
        settings: The keys, namespaces and default user.
        caller: What the caller presents.

    Returns:
        The user id.

    Raises:
        AuthenticationError: Keys are configured and the caller presents none, or an
            unknown one (401).
        IdentityRefusedError: A proxy key without a user header (unless
            ``proxy_shared_user``), or a named user other than the key's (403).
        InvalidInputError: A malformed user id, or user headers that disagree (422).
    """
    if caller.holds_stores:
        return user_named(caller.named_user, settings.default_user_id)
    if not settings.keys_required:
        # Single-tenant: the local caller is trusted to say who it is.
        if caller.named_user is not None:
            return validate_id(caller.named_user, "user id")
        return _header_user(caller) or settings.default_user_id
    user = _keyed_user(settings, caller)
    if caller.named_user is not None and caller.named_user != user:
        validate_id(caller.named_user, "user id")
        raise IdentityRefusedError(
            f"this API key acts as {user!r}, and the request names the user "
            f"{caller.named_user!r}: a key decides its user; leave configurable.user_id out "
            "(or send that of the key)"
        )
    return user


def user_named(user: object, default: str | None) -> str:
    """The user of an in-process door: the one its code names, else ``default``; checked.

    The branch of :func:`identify` for :meth:`Caller.in_process`, for doors that hold the
    default user rather than the settings (the agent middleware), or have none (the store's
    namespaces always name their user).

    Raises:
        InvalidInputError: If the user is not a well-formed user id (a non-string included:
            ``42`` is refused, not turned into ``"42"``), or none is named and there is no
            default.
    """
    return validate_id(default if user is None else user, "user id")


def authenticate(settings: IdentitySettings, key: str | None) -> None:
    """Check the key of a request that reads no one's memory (the model list).

    Raises:
        AuthenticationError: Keys are configured and ``key`` is none of them.
    """
    if not settings.keys_required:
        return
    if key is None or match_key(key, {**settings.api_keys, **settings.proxy_api_keys}) is None:
        raise AuthenticationError(MISSING_KEY)


def _keyed_user(settings: IdentitySettings, caller: Caller) -> str:
    """The user of a key; headers only name a proxy key's user."""
    if caller.key is not None:
        user = match_key(caller.key, settings.api_keys)
        if user is not None:
            return user
        namespace = match_key(caller.key, settings.proxy_api_keys)
        if namespace is not None:
            return _proxied_user(settings, namespace, caller)
    raise AuthenticationError(MISSING_KEY)


def _proxied_user(settings: IdentitySettings, namespace: str, caller: Caller) -> str:
    forwarded = _header_user(caller)
    if forwarded is None:
        if settings.proxy_shared_user:
            return namespace
        raise IdentityRefusedError(NO_USER_HEADER)
    try:
        return validate_id(f"{namespace}:{forwarded}", "user id")
    except InvalidInputError as exc:
        raise InvalidInputError(f"the user header's id is too long once namespaced: {exc}") from exc


def _header_user(caller: Caller) -> str | None:
    """The user the headers name, checked; ``None`` without one.

    Two headers naming different users are refused rather than one picked: a front end that
    passed a client's own ``X-User-Id`` through next to the user it forwards would otherwise
    let the client choose.
    """
    values = set(caller.header_users)
    if not values:
        return None
    if len(values) > 1:
        raise InvalidInputError(
            "the X-OpenWebUI-User-Id and X-User-Id headers name different users: send one"
        )
    (value,) = values
    return validate_id(value, "user id in the user header")


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The API key of a request: ``Authorization: Bearer <key>``, else ``X-API-Key``."""
    authorization = headers.get("authorization") or ""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key") or None


def match_key(presented: str, keys: Mapping[str, str]) -> str | None:
    """The value of the key equal to ``presented``, or ``None``.

    Every key is compared, each in constant time, so the answer's timing tells nothing of
    which key (or how much of one) matched.
    """
    found = None
    for key, value in keys.items():
        if hmac.compare_digest(presented.encode(), key.encode()):
            found = value
    return found


def check_reserved_names(
    api_keys: Mapping[str, str], proxy_api_keys: Mapping[str, str], default_user_id: str
) -> None:
    """Refuse settings under which two kinds of caller could act as one user.

    The user ids are split three ways: direct users (``api_keys``) and ``default_user_id``
    (the local, in-process and keyless user); a proxy's namespace ``<ns>`` (its shared user
    under ``proxy_shared_user``); and the proxy's users ``<ns>:<id>``. A direct user named
    ``ns`` would be the proxy's shared user, one named ``ns:x`` would be the proxy's user
    ``x``; the default user likewise (``memory-chain mcp`` or the agent middleware would
    then serve a proxy user's memory). Several keys may map to one user or one namespace
    (a key being rotated).

    Raises:
        ValueError: Naming the two settings that collide and what to rename.
    """
    validate_id(default_user_id, "default_user_id")
    for namespace in set(proxy_api_keys.values()):
        if ":" in namespace:
            raise ValueError(f"proxy_api_keys namespace {namespace!r} contains ':'")
        owners = [("api_keys user", user) for user in api_keys.values()]
        owners.append(("default_user_id", default_user_id))
        for setting, user in owners:
            if user == namespace:
                raise ValueError(
                    f"{setting} {user!r} is also a proxy_api_keys namespace: the proxy's shared "
                    "user would be that user; rename one"
                )
            if user.startswith(f"{namespace}:"):
                raise ValueError(
                    f"{setting} {user!r} is in the proxy namespace {namespace!r}: that proxy's "
                    "users could then act as it; rename one"
                )
