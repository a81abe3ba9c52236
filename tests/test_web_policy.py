"""Which host names and pages are trusted: the settings, the policy, and MCP's guard agreeing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp.server.transport_security import TransportSecurityMiddleware
from pydantic import ValidationError
from starlette.requests import Request

from memory_chain.config import MemorySettings
from memory_chain.integrations.mcp_http import transport_security
from memory_chain.web_policy import (
    Authority,
    WebPolicy,
    parse_authority,
    parse_origin,
    refused_without_origin,
)

#: Host headers, with whether the policy of :data:`POLICY` answers them.
HOSTS = [
    ("localhost", True),
    ("localhost:8000", True),
    ("127.0.0.1:8000", True),
    ("[::1]:8000", True),
    ("memory.example.com", True),
    ("memory.example.com:8443", True),
    ("api:8000", True),
    ("api:8001", False),  # trusted on one port only
    ("attacker.example", False),
    ("attacker.example:8000", False),
    ("localhost.attacker.example", False),
    ("127.0.0.1.nip.io:8000", False),
    ("127.0.0.2:8000", False),
    ("0.0.0.0:8000", False),  # the wildcard bind names no host
    ("", False),
    ("localhost:http", False),
    ("local host", False),
]
#: (Origin, Host, verdict) under :data:`POLICY`.
ORIGINS = [
    ("http://localhost:8000", "localhost:8000", "own"),
    ("http://127.0.0.1:8000", "127.0.0.1:8000", "own"),
    ("http://[::1]:8000", "[::1]:8000", "own"),
    ("https://memory.example.com", "memory.example.com", "own"),  # TLS ended by a proxy
    ("http://memory.example.com", "memory.example.com", "own"),
    ("http://localhost:3000", "localhost:8000", "listed"),
    ("chrome-extension://abcdefgh", "localhost:8000", "listed"),
    ("http://localhost:5173", "localhost:8000", None),  # another port of the same host
    ("http://127.0.0.1:8000", "localhost:8000", None),  # another name of the same host
    ("https://localhost:8000", "localhost:8000", "own"),
    ("https://memory.example.com:8443", "memory.example.com", None),
    ("http://attacker.example", "localhost:8000", None),
    ("http://attacker.example:8000", "attacker.example:8000", None),  # rebinding
    ("null", "localhost:8000", None),
    ("file://", "localhost:8000", None),
    ("http://localhost:8000/ui/", "localhost:8000", None),
]
POLICY = WebPolicy.build(
    ["memory.example.com", "api:8000"],
    ["http://localhost:3000", "chrome-extension://abcdefgh"],
    server_host="0.0.0.0",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.delenv("MEMORY_CHAIN_TRUSTED_HOSTS", raising=False)
    monkeypatch.delenv("MEMORY_CHAIN_ALLOWED_ORIGINS", raising=False)


@pytest.mark.parametrize(("host", "allowed"), HOSTS)
def test_hosts(host: str, allowed: bool) -> None:
    assert POLICY.host_allowed(host) is allowed


@pytest.mark.parametrize(("origin", "host", "verdict"), ORIGINS)
def test_origins(origin: str, host: str, verdict: str | None) -> None:
    assert POLICY.origin_allowed(origin, host) == verdict


def test_defaults_trust_the_loopback_names_and_the_bound_address() -> None:
    default = WebPolicy.from_settings(MemorySettings())
    assert default.hosts == (Authority("localhost"), Authority("127.0.0.1"), Authority("[::1]"))
    assert default.origins == ()
    assert not default.host_allowed("attacker.example")
    bound = WebPolicy.from_settings(MemorySettings(server_host="192.168.1.20"))
    assert bound.host_allowed("192.168.1.20:8000")
    for wildcard in ("0.0.0.0", "::"):
        assert WebPolicy.from_settings(MemorySettings(server_host=wildcard)).hosts == default.hosts
    assert WebPolicy.build([], [], server_host="fd00::1").host_allowed("[fd00::1]:8000")


def test_a_star_answers_every_name_and_says_it_is_unsafe() -> None:
    policy = WebPolicy.from_settings(MemorySettings(trusted_hosts=["*"]))
    assert policy.any_host
    assert policy.host_allowed("attacker.example:8000")
    assert policy.host_allowed(None)
    assert "no protection from DNS rebinding" in policy.describe()
    # Pages are still checked: another origin than the request's own is refused.
    assert policy.origin_allowed("http://evil.example", "attacker.example:8000") is None


def test_settings_take_json_or_commas_and_normalize(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_CHAIN_TRUSTED_HOSTS", " API , Memory.Example.com:8443,::1,api")
    monkeypatch.setenv(
        "MEMORY_CHAIN_ALLOWED_ORIGINS", '["HTTP://LocalHost:3000/", "https://x.example:443"]'
    )
    settings = MemorySettings()
    assert settings.trusted_hosts == ["api", "memory.example.com:8443", "[::1]"]
    assert settings.allowed_origins == ["http://localhost:3000", "https://x.example"]
    monkeypatch.setenv("MEMORY_CHAIN_TRUSTED_HOSTS", '["api"]')
    monkeypatch.setenv("MEMORY_CHAIN_ALLOWED_ORIGINS", "")
    settings = MemorySettings()
    assert (settings.trusted_hosts, settings.allowed_origins) == (["api"], [])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("trusted_hosts", ["http://api:8000"], "give the host name only ('api:8000')"),
        ("trusted_hosts", ["api/v1"], "is not a host name"),
        ("trusted_hosts", ["api:99999"], "is not a host name"),
        ("allowed_origins", ["*"], "list each page's origin"),
        ("allowed_origins", ["null"], "cannot be allowed"),
        ("allowed_origins", ["localhost:3000"], "is not a web origin"),
        ("allowed_origins", ["http://localhost:3000/ui"], "without a path"),
    ],
)
def test_bad_entries_say_what_to_write(field: str, value: list[str], message: str) -> None:
    with pytest.raises(ValidationError, match=f"{field}.*{re.escape(message)}"):
        MemorySettings(**{field: value})


def test_parsing() -> None:
    assert parse_authority("LocalHost:8000") == Authority("localhost", 8000)
    assert parse_authority("[0:0::1]:80") == Authority("[::1]", 80)
    assert parse_authority("localhost:") == Authority("localhost")
    for bad in ("[::1", "[nope]:80", "a:b:c", "name:0", "name:-1", "na me", ".", "x:\uff18\uff10"):
        assert parse_authority(bad) is None, bad
    origin = parse_origin("https://Example.com:443")
    assert origin is not None
    assert (str(origin), origin.port) == ("https://example.com", 443)
    assert parse_origin("null") is None


@pytest.mark.parametrize(
    ("method", "site", "mode", "dest", "refused"),
    [
        ("GET", "cross-site", "navigate", "document", False),  # the user follows a link
        ("GET", "same-site", "navigate", "document", False),
        ("GET", "cross-site", "navigate", "iframe", True),  # framed by another site
        ("GET", "cross-site", "no-cors", "image", True),
        ("GET", "same-site", "no-cors", "script", True),
        ("POST", "cross-site", "navigate", "document", True),
        ("GET", "same-origin", "cors", "empty", False),
        ("GET", "none", "navigate", "document", False),  # typed in the address bar
        ("DELETE", None, None, None, False),  # not a browser: the Host check applies
    ],
)
def test_requests_without_origin(
    method: str, site: str | None, mode: str | None, dest: str | None, refused: bool
) -> None:
    assert refused_without_origin(method, site, mode, dest) is refused


def _request(host: str, origin: str | None) -> Request:
    headers = [(b"host", host.encode()), (b"content-type", b"application/json")]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return Request({"type": "http", "method": "POST", "path": "/mcp", "headers": headers})


@pytest.mark.parametrize("policy", [POLICY, WebPolicy.from_settings(MemorySettings())])
async def test_mcp_guard_agrees_with_the_web_guard(policy: WebPolicy) -> None:
    mcp_guard = TransportSecurityMiddleware(transport_security(policy))
    assert mcp_guard.settings.enable_dns_rebinding_protection
    for host, _ in HOSTS:
        for origin in [None, *(origin for origin, _, _ in ORIGINS)]:
            ours = policy.host_allowed(host) and (
                origin is None or policy.origin_allowed(origin, host) is not None
            )
            refused = await mcp_guard.validate_request(_request(host, origin), is_post=True)
            if ours:  # what the server lets through, MCP lets through
                assert refused is None, (host, origin, bytes(refused.body))
            elif parse_authority(host) and not policy.host_allowed(host):  # a foreign name
                assert refused is not None, (host, origin)
                assert refused.status_code == 421


def test_a_star_turns_mcps_guard_off_too() -> None:
    policy = WebPolicy.build(["*"], [], server_host="127.0.0.1")
    assert not transport_security(policy).enable_dns_rebinding_protection
