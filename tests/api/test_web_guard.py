"""Every route refuses foreign host names and foreign pages, and answers its own (in process).

The routes are read from the app (``app.routes``), so a route added later is covered without
a change here. The app runs on SQLite without an LLM (its routes answer 503 where they need
one): what is checked is who gets past the web guard, which stands before every route.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.routing import Mount

from memory_chain.api import create_app
from memory_chain.config import MemorySettings
from tests.postgres import free_port

NAME = "memory.example.com"  # the name the server is configured to be reached under
LISTED = "http://localhost:3000"  # a page of another origin, listed
BASE = "http://127.0.0.1:8000"
OWN_HOSTS = ["localhost:8000", "127.0.0.1:8000", "[::1]:8000", NAME]
FOREIGN_HOSTS = ["attacker.example", "rebind.test:8000", "localhost.attacker.example:8000"]
FOREIGN_ORIGINS = ["http://attacker.example", "http://localhost:5173", "null"]
#: Values for path parameters (the ids of existing data are filled in at run time).
SAMPLES = {"conversation_id": "trip", "fact_id": "0" * 32, "file_path": "index.html"}
#: Bodies that would change memory, were the request let through.
BODIES: dict[str, Any] = {
    "/v1/facts": {"text": "I was written by another site.", "kind": "other"},
    "/v1/facts/{fact_id}": {"text": "I was edited by another site."},
    "/v1/conversations/{conversation_id}/turns": {
        "turns": [{"role": "user", "content": "I was written by another site."}]
    },
    "/v1/chat/completions": {"model": "x", "messages": [{"role": "user", "content": "hi"}]},
    "/mcp": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
}


def _settings(tmp_path: Path, **extra: Any) -> MemorySettings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "llm_fallback": "off",
        "ollama_base_url": f"http://127.0.0.1:{free_port()}",  # no LLM there
        "memory_tier3_enabled": False,
        "trusted_hosts": [NAME],
        "allowed_origins": [LISTED],
        **extra,
    }
    return MemorySettings(**values)


def _routes() -> list[tuple[str, str]]:
    """(method, path template) of every route of the app, and the memory browser's files."""
    found: set[tuple[str, str]] = set()
    for route in iter_route_contexts(create_app(MemorySettings.model_construct()).routes):
        if isinstance(route.original_route, Mount):
            found.add(("GET", f"{route.path}/"))
        elif route.path:
            found.update((method, route.path) for method in route.methods or {"GET"})
    return sorted(found - {("HEAD", path) for _, path in found})


ROUTES = _routes()


def _path(template: str, samples: dict[str, str] = SAMPLES) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: samples.get(m[1], "x"), template)


def _serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = _settings(tmp_path_factory.mktemp("web-guard"))
    with TestClient(create_app(settings), base_url=BASE) as client:
        turns = {"turns": [{"role": "user", "content": "I take insulin every morning."}]}
        assert client.post("/v1/conversations/trip/turns", json=turns).status_code == 201
        fact = client.post("/v1/facts", json={"text": "My sister is called Ines."})
        assert fact.status_code == 201, fact.text
        yield client


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A server with some memory, for requests that are refused or only read."""
    yield from _serve(tmp_path_factory)


@pytest.fixture(scope="module")
def own_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Another, for requests that pass (and may erase its memory)."""
    yield from _serve(tmp_path_factory)


def _send(client: TestClient, method: str, template: str, **headers: str) -> Any:
    body = BODIES.get(template)
    content = json.dumps(body).encode() if body is not None else None
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        **headers,
    }
    return client.request(method, _path(template), content=content, headers=headers)


def test_every_route_family_is_covered() -> None:
    paths = {path for _, path in ROUTES}
    for family in (
        "/v1/conversations/{conversation_id}",
        "/v1/chat/completions",
        "/v1/models",
        "/v1/facts",
        "/v1/users/me",
        "/v1/users/me/export",
        "/memory/invoke",
        "/memory/playground/{file_path:path}",
        "/mcp",
        "/ui/",
        "/health",
        "/metrics",
    ):
        assert family in paths, family


@pytest.mark.parametrize(("method", "template"), ROUTES)
def test_a_foreign_host_is_refused(client: TestClient, method: str, template: str) -> None:
    for host in FOREIGN_HOSTS:
        response = _send(client, method, template, host=host)
        assert response.status_code == 421, (host, response.text)
        assert "MEMORY_CHAIN_TRUSTED_HOSTS" in response.json()["detail"]
    # DNS rebinding: the page is same-origin with the name it re-pointed.
    rebound = _send(
        client, method, template, host="rebind.test:8000", origin="http://rebind.test:8000"
    )
    assert rebound.status_code == 421
    assert not any(name.startswith("access-control-") for name in rebound.headers)


@pytest.mark.parametrize(("method", "template"), ROUTES)
def test_a_foreign_origin_is_refused(client: TestClient, method: str, template: str) -> None:
    for host in OWN_HOSTS:
        for origin in FOREIGN_ORIGINS:
            response = _send(client, method, template, host=host, origin=origin)
            assert response.status_code == 403, (host, origin, response.text)
            assert "MEMORY_CHAIN_ALLOWED_ORIGINS" in response.json()["detail"]
            assert "access-control-allow-origin" not in response.headers
    # Another site's page embedding the server (no Origin on an image or a frame).
    embedded = _send(
        client,
        method,
        template,
        **{
            "sec-fetch-site": "cross-site",
            "sec-fetch-dest": "iframe",
            "sec-fetch-mode": "navigate",
        },
    )
    assert embedded.status_code == 403, embedded.text


@pytest.mark.parametrize(("method", "template"), ROUTES)
def test_own_names_and_pages_pass(own_client: TestClient, method: str, template: str) -> None:
    for host in OWN_HOSTS:
        scheme = "https" if host == NAME else "http"  # a proxy ending TLS in front
        for origin in (None, f"{scheme}://{host}", LISTED):
            headers = {"host": host} | ({"origin": origin} if origin else {})
            response = _send(own_client, method, template, **headers)
            assert response.status_code not in (403, 421), (host, origin, response.text)
            listed = response.headers.get("access-control-allow-origin")
            assert listed == (LISTED if origin == LISTED else None)


def test_refused_requests_change_nothing(client: TestClient) -> None:
    before = client.get("/v1/users/me/export").text
    fact = client.get("/v1/facts").json()["facts"][0]
    samples = SAMPLES | {"fact_id": fact["id"]}
    for method, template in ROUTES:
        path = _path(template, samples)
        body = BODIES.get(template)
        content = json.dumps(body).encode() if body is not None else None
        for headers in (
            {"host": "rebind.test:8000", "origin": "http://rebind.test:8000"},
            {"host": "rebind.test:8000"},
            {"origin": "http://attacker.example"},
        ):
            headers["content-type"] = "application/json"
            refused = client.request(method, path, content=content, headers=headers)
            assert refused.status_code in (403, 421)
    assert client.get("/v1/users/me/export").text == before


def test_what_browsers_and_clients_send_works(client: TestClient) -> None:
    own = {"origin": BASE}
    added = client.post("/v1/facts", json={"text": "My cat is Miso."}, headers=own)
    assert added.status_code == 201, added.text
    assert client.get("/v1/users/me/export").status_code == 200
    assert client.get("/health").json()["status"] == "ok"
    assert client.get("/metrics").status_code == 200
    assert "memory" in client.get("/ui/").text.lower()
    assert client.get("/memory/playground/", headers={"sec-fetch-site": "none"}).status_code == 200
    linked = {
        "sec-fetch-site": "cross-site",
        "sec-fetch-mode": "navigate",
        "sec-fetch-dest": "document",
    }
    assert client.get("/ui/", headers=linked).status_code == 200  # a link from another site
    mcp = client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**own, "accept": "application/json, text/event-stream"},
    )
    assert mcp.status_code == 200, mcp.text
    assert "list_facts" in mcp.text
    # Open WebUI's server and the SDKs: the name they connect to, no Origin.
    assert client.get("/v1/models", headers={"host": NAME}).status_code == 200
    assert client.get("/v1/facts", headers={"host": "localhost"}).status_code == 200


def test_listed_origins_get_cors_and_others_none(client: TestClient) -> None:
    preflight = {
        "access-control-request-method": "DELETE",
        "access-control-request-headers": "authorization",
    }
    allowed = client.options("/v1/users/me", headers={"origin": LISTED, **preflight})
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["access-control-allow-origin"] == LISTED
    assert "DELETE" in allowed.headers["access-control-allow-methods"]
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    read = client.get("/v1/facts", headers={"origin": LISTED})
    assert read.status_code == 200
    assert read.headers["access-control-allow-origin"] == LISTED
    foreign = client.options(
        "/v1/users/me", headers={"origin": "http://localhost:5173", **preflight}
    )
    assert foreign.status_code == 403
    assert not any(name.startswith("access-control-") for name in foreign.headers)


def test_cors_is_closed_by_default_and_the_start_says_what_is_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(tmp_path, trusted_hosts=[], allowed_origins=[])
    caplog.set_level(logging.INFO, logger="memory_chain.api.app")
    with TestClient(create_app(settings), base_url=BASE) as client:
        assert client.get("/v1/facts", headers={"origin": LISTED}).status_code == 403
        assert client.get("/v1/facts", headers={"host": "testserver"}).status_code == 421
        assert client.get("/v1/facts").status_code == 200
    [line] = [
        r.getMessage() for r in caplog.records if "MEMORY_CHAIN_TRUSTED_HOSTS" in r.getMessage()
    ]
    assert "localhost, 127.0.0.1, [::1]" in line
    assert "MEMORY_CHAIN_ALLOWED_ORIGINS" in line


def test_mcps_own_guard_refuses_without_the_servers(client: TestClient) -> None:
    """/mcp mounted without the web guard in front: MCP's own check, from the same settings."""
    app: Any = client.app
    [door] = [route for route in app.router.routes if getattr(route, "path", None) == "/mcp"]
    bare = Starlette(routes=[door])
    bare.state.services = app.state.services
    mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"accept": "application/json, text/event-stream"}
    with TestClient(bare, base_url=BASE) as http:
        assert http.post("/mcp", json=mcp, headers=accept).status_code == 200
        own = {**accept, "host": NAME, "origin": f"https://{NAME}"}
        assert http.post("/mcp", json=mcp, headers=own).status_code == 200
        rebound = {**accept, "host": "rebind.test:8000", "origin": "http://rebind.test:8000"}
        assert http.post("/mcp", json=mcp, headers=rebound).status_code == 421
        foreign = {**accept, "origin": "http://attacker.example"}
        assert http.post("/mcp", json=mcp, headers=foreign).status_code == 403
