"""The one rule that decides who the user is (``memory_chain.identity``), door by door.

Pure: settings and what a caller presents in, a user id or a refusal out. The HTTP doors on a
real server are in ``tests/api/test_identity_doors.py``; the in-process doors in
``tests/integrations/test_identity_in_process.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_chain.config import MemorySettings
from memory_chain.errors import AuthenticationError, IdentityRefusedError, InvalidInputError
from memory_chain.identity import (
    Caller,
    authenticate,
    identify,
    match_key,
    presented_key,
    user_named,
)

KEYS = {"api_keys": {"key-ana": "ana"}, "proxy_api_keys": {"key-webui": "webui"}}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in list(__import__("os").environ):
        if name.startswith("MEMORY_CHAIN_"):
            monkeypatch.delenv(name)


def _keyed(**extra: object) -> MemorySettings:
    return MemorySettings(**KEYS, **extra)  # type: ignore[arg-type]


def _http(**headers: str) -> Caller:
    return Caller.from_headers({name.replace("_", "-").lower(): v for name, v in headers.items()})


def test_without_keys_the_local_caller_says_who_it_is() -> None:
    settings = MemorySettings()
    assert identify(settings, _http()) == "default"
    assert identify(settings, _http(x_user_id="ana")) == "ana"
    assert identify(settings, _http(x_openwebui_user_id="ana")) == "ana"
    # LangServe's configurable.user_id names the user, over the header.
    assert identify(settings, Caller.from_headers({"x-user-id": "ana"}, named_user="bo")) == "bo"
    # A key is not asked for, and not looked at.
    assert identify(settings, _http(authorization="Bearer whatever")) == "default"
    with pytest.raises(InvalidInputError, match="invalid user id in the user header"):
        identify(settings, _http(x_user_id="../etc"))


def test_a_direct_key_is_its_user_whatever_the_headers_say() -> None:
    settings = _keyed()
    assert identify(settings, _http(authorization="Bearer key-ana")) == "ana"
    assert identify(settings, _http(x_api_key="key-ana")) == "ana"
    for header in ("x_user_id", "x_openwebui_user_id"):
        caller = _http(authorization="Bearer key-ana", **{header: "bob"})
        assert identify(settings, caller) == "ana"
    # A malformed header the key ignores is no error either.
    assert identify(settings, _http(authorization="Bearer key-ana", x_user_id="a b")) == "ana"


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer wrong"}, {"authorization": "key-ana"}, {"x-user-id": "ana"}],
    ids=["none", "unknown", "no-scheme", "header-only"],
)
def test_without_a_known_key_is_401(headers: dict[str, str]) -> None:
    with pytest.raises(AuthenticationError, match="missing or unknown API key"):
        identify(_keyed(), Caller.from_headers(headers))


def test_a_proxy_key_acts_as_the_forwarded_user_in_its_namespace() -> None:
    settings = _keyed()
    caller = _http(authorization="Bearer key-webui", x_openwebui_user_id="u-1")
    assert identify(settings, caller) == "webui:u-1"
    assert identify(settings, _http(authorization="Bearer key-webui", x_user_id="u-1")) == (
        "webui:u-1"
    )
    # The proxy's "ana" is webui:ana, never the direct user ana.
    assert identify(settings, _http(authorization="Bearer key-webui", x_user_id="ana")) == (
        "webui:ana"
    )
    same = _http(authorization="Bearer key-webui", x_user_id="u-1", x_openwebui_user_id="u-1")
    assert identify(settings, same) == "webui:u-1"


def test_a_proxy_key_without_a_user_header_is_refused_naming_the_settings() -> None:
    for caller in (_http(authorization="Bearer key-webui"), _http(x_api_key="key-webui")):
        with pytest.raises(IdentityRefusedError) as refused:
            identify(_keyed(), caller)
        message = str(refused.value)
        assert "ENABLE_FORWARD_USER_INFO_HEADERS=True" in message
        assert "MEMORY_CHAIN_PROXY_SHARED_USER=true" in message
    # An empty header names no one.
    with pytest.raises(IdentityRefusedError):
        identify(_keyed(), _http(authorization="Bearer key-webui", x_openwebui_user_id=""))


def test_proxy_shared_user_lets_header_less_requests_share_the_namespace() -> None:
    settings = _keyed(proxy_shared_user=True)
    assert identify(settings, _http(authorization="Bearer key-webui")) == "webui"
    caller = _http(authorization="Bearer key-webui", x_openwebui_user_id="u-1")
    assert identify(settings, caller) == "webui:u-1"  # a forwarded user is still their own


def test_user_headers_that_disagree_are_refused() -> None:
    caller = _http(authorization="Bearer key-webui", x_user_id="u-1", x_openwebui_user_id="u-2")
    with pytest.raises(InvalidInputError, match="name different users"):
        identify(_keyed(), caller)
    with pytest.raises(InvalidInputError, match="name different users"):
        identify(MemorySettings(), _http(x_user_id="u-1", x_openwebui_user_id="u-2"))


def test_a_namespaced_id_too_long_is_422() -> None:
    caller = _http(authorization="Bearer key-webui", x_user_id="u" * 125)
    with pytest.raises(InvalidInputError, match="too long once namespaced"):
        identify(_keyed(), caller)


def test_with_keys_a_named_user_must_be_the_keys_own() -> None:
    settings = _keyed()
    ana = Caller.from_headers({"authorization": "Bearer key-ana"}, named_user="ana")
    assert identify(settings, ana) == "ana"
    for claimed in ("bob", "webui:u-1", "webui"):
        caller = Caller.from_headers({"authorization": "Bearer key-ana"}, named_user=claimed)
        with pytest.raises(IdentityRefusedError, match=f"as 'ana'.*names the user '{claimed}'"):
            identify(settings, caller)
    proxied = {"authorization": "Bearer key-webui", "x-openwebui-user-id": "u-1"}
    assert identify(settings, Caller.from_headers(proxied, named_user="webui:u-1")) == "webui:u-1"
    with pytest.raises(IdentityRefusedError):
        identify(settings, Caller.from_headers(proxied, named_user="webui:u-2"))
    with pytest.raises(InvalidInputError):  # malformed: 422 before anything is compared
        identify(settings, Caller.from_headers({"authorization": "Bearer key-ana"}, named_user=7))
    # The key is checked first: no key, no hint about users.
    with pytest.raises(AuthenticationError):
        identify(settings, Caller.from_headers({}, named_user="ana"))


@pytest.mark.parametrize("bad", [42, "a b", "x" * 129, "ana\x00", "../etc", ""])
def test_in_process_callers_are_checked_as_every_user_id(bad: object) -> None:
    settings = _keyed()
    with pytest.raises(InvalidInputError, match="invalid user id") as by_identify:
        identify(settings, Caller.in_process(bad))
    with pytest.raises(InvalidInputError) as by_user_named:
        user_named(bad, "default")
    assert str(by_identify.value) == str(by_user_named.value)


def test_in_process_callers_need_no_key() -> None:
    settings = _keyed()
    assert identify(settings, Caller.in_process("webui:u-1")) == "webui:u-1"
    assert identify(settings, Caller.in_process(None)) == "default"
    assert identify(MemorySettings(default_user_id="me"), Caller.in_process(None)) == "me"
    with pytest.raises(InvalidInputError):
        user_named(None, None)  # a door without a default must be told the user


def test_authenticate_checks_the_key_only() -> None:
    settings = _keyed()
    authenticate(settings, "key-ana")
    authenticate(settings, "key-webui")  # no user header needed: no one's memory is read
    for key in (None, "wrong"):
        with pytest.raises(AuthenticationError):
            authenticate(settings, key)
    authenticate(MemorySettings(), None)


def test_presented_key_and_match_key() -> None:
    assert presented_key({"authorization": "Bearer  k1 "}) == "k1"
    assert presented_key({"authorization": "bearer k1"}) == "k1"
    assert presented_key({"authorization": "Basic abc", "x-api-key": "k2"}) == "k2"
    assert presented_key({"x-api-key": ""}) is None
    assert presented_key({}) is None
    assert match_key("k1", {"k1": "ana", "k2": "bob"}) == "ana"
    assert match_key("k", {"k1": "ana"}) is None
