"""Who the user is, at every HTTP door of a real server: a proxy key never falls back to a
user shared by all of its users.

``memory-chain serve`` processes on uvicorn, with the fake Ollama and SQLite, configured as an
admin deploys Open WebUI behind memory_chain: a proxy key (``key-webui``, namespace
``webui``) and a direct key (``key-ana``). Open WebUI forwards its user's id only with
``ENABLE_FORWARD_USER_INFO_HEADERS=True`` (off by default): without it, every request carries
the proxy key and no user (what ``open_webui/utils/headers.py`` of Open WebUI 0.12.4 sends,
replayed here). Every door that reads or changes memory (REST, the OpenAI-compatible chat,
LangServe, MCP) answers 403 naming that setting, and nothing reaches the model or the stores;
with the header the request acts as ``webui:<id>``; with ``proxy_shared_user=true`` a
header-less request acts as ``webui``. With keys, LangServe's ``configurable.user_id`` cannot
name someone other than the key's user.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_chain.local_llm.model import MODEL_NAME
from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

TIMEOUT = 60.0
PROXY = {"Authorization": "Bearer key-webui"}
ANA = {"Authorization": "Bearer key-ana"}
KEYS = {"api_keys": {"key-ana": "ana"}, "proxy_api_keys": {"key-webui": "webui"}}
#: A chat as Open WebUI sends it (its connection's headers are the key and the content type).
OPEN_WEBUI_CHAT = {
    "model": MODEL_NAME,
    "messages": [{"role": "user", "content": "My blood type is AB-."}],
    "stream": True,
}
MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def _invoke(text: str = "My blood type is AB-.", **configurable: str) -> dict[str, Any]:
    return {
        "input": {"input": text},
        "config": {"configurable": {"conversation_id": "health", **configurable}},
    }


#: Every door onto a user's memory, with a body it accepts.
DOORS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/me", None),
    ("GET", "/v1/conversations", None),
    ("POST", "/v1/conversations/health/turns", {"turns": [{"role": "user", "content": "AB-"}]}),
    ("GET", "/v1/facts", None),
    ("POST", "/v1/facts", {"text": "My blood type is AB-."}),
    ("GET", "/v1/users/me/export", None),
    ("GET", "/v1/users/me/status", None),
    ("DELETE", "/v1/users/me", None),
    ("POST", "/v1/chat/completions", OPEN_WEBUI_CHAT),
    ("POST", "/memory/invoke", _invoke()),
    ("POST", "/memory/batch", {"inputs": [{"input": "hi"}], "config": _invoke()["config"]}),
    ("POST", "/memory/stream", _invoke()),
    ("POST", "/memory/stream_log", _invoke()),
    ("POST", "/memory/stream_events", _invoke()),
    ("POST", "/memory/retriever/invoke", {"input": "blood type"}),
    ("POST", "/mcp", MCP_INITIALIZE),
]


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeOllama]:
    fake = FakeOllama().start()
    yield fake
    fake.stop()


def _start(
    tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeOllama, **settings: object
) -> RunningServer:
    data_dir = tmp_path_factory.mktemp("identity") / "data"
    env = server_env(data_dir, fake_llm.url, memory_tier3_enabled="false", **settings)
    return RunningServer(data_dir, env).start()


@pytest.fixture(scope="module")
def strict(
    tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeOllama
) -> Iterator[RunningServer]:
    """Keys as an admin sets them for Open WebUI; proxy_shared_user left at its default."""
    server = _start(tmp_path_factory, fake_llm, **KEYS)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeOllama
) -> Iterator[RunningServer]:
    """The same keys, with proxy_shared_user=true."""
    server = _start(tmp_path_factory, fake_llm, proxy_shared_user="true", **KEYS)
    yield server
    server.stop()


def _owners(server: RunningServer) -> set[str]:
    """Every user with a conversation, a fact or a store item in the server's database."""
    with sqlite3.connect(server.data_dir / "memory.db") as db:
        rows = db.execute(
            "SELECT user_id FROM conversations UNION SELECT user_id FROM facts "
            "UNION SELECT user_id FROM store_items"
        ).fetchall()
    return {user for (user,) in rows}


def _send(
    server: RunningServer, method: str, path: str, body: dict[str, Any] | None, **headers: str
) -> httpx.Response:
    extra = MCP_ACCEPT if path == "/mcp" else {}
    return httpx.request(
        method, server.url + path, json=body, headers={**extra, **headers}, timeout=TIMEOUT
    )


@pytest.mark.parametrize(("method", "path", "body"), DOORS)
def test_a_proxy_key_without_a_user_header_is_refused_at_every_door(
    strict: RunningServer,
    fake_llm: FakeOllama,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    chats = fake_llm.chats
    response = _send(strict, method, path, body, **PROXY)
    assert response.status_code == 403, f"{response.status_code} {response.text}"
    detail = response.json()["detail"]
    assert "ENABLE_FORWARD_USER_INFO_HEADERS=True" in detail
    assert "MEMORY_CHAIN_PROXY_SHARED_USER=true" in detail
    if path == "/v1/chat/completions":  # OpenAI's error shape, which Open WebUI shows
        assert response.json()["error"]["type"] == "permission_error"
        assert response.json()["error"]["message"] == detail
    # Nothing reached the model, and nothing was stored for anyone.
    assert fake_llm.chats == chats
    assert "webui" not in _owners(strict)


def test_what_holds_no_ones_memory_needs_a_key_but_no_user(strict: RunningServer) -> None:
    # LangServe's schemas.
    for path in ("/memory/input_schema", "/memory/config_schema"):
        schema = httpx.get(f"{strict.url}{path}", headers=PROXY, timeout=TIMEOUT)
        assert schema.status_code == 200, schema.text
        assert httpx.get(f"{strict.url}{path}", timeout=TIMEOUT).status_code == 401
    # Open WebUI lists the models without a user (at start-up): the list is no one's memory.
    listed = httpx.get(f"{strict.url}/v1/models", headers=PROXY, timeout=TIMEOUT)
    assert listed.status_code == 200, listed.text
    assert MODEL_NAME in [card["id"] for card in listed.json()["data"]]
    card = httpx.get(f"{strict.url}/v1/models/{MODEL_NAME}", headers=PROXY, timeout=TIMEOUT)
    assert card.status_code == 200, card.text
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        refused = httpx.get(f"{strict.url}/v1/models", headers=headers, timeout=TIMEOUT)
        assert refused.status_code == 401, refused.text
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"]["type"] == "authentication_error"


def test_with_the_user_header_the_proxy_acts_as_that_user_in_its_namespace(
    strict: RunningServer,
) -> None:
    for header in ("X-OpenWebUI-User-Id", "X-User-Id"):
        me = httpx.get(f"{strict.url}/v1/me", headers={**PROXY, header: "u-1"}, timeout=TIMEOUT)
        assert me.status_code == 200, me.text
        assert me.json() == {"user_id": "webui:u-1", "keys_required": True}
    # Open WebUI's chat with forwarding on: the user's and the chat's ids.
    forwarded = {**PROXY, "X-OpenWebUI-User-Id": "u-1", "X-OpenWebUI-Chat-Id": "chat-1"}
    chat = httpx.post(
        f"{strict.url}/v1/chat/completions",
        json={**OPEN_WEBUI_CHAT, "stream": False},
        headers=forwarded,
        timeout=TIMEOUT,
    )
    assert chat.status_code == 200, chat.text
    listed = httpx.get(f"{strict.url}/v1/conversations", headers=forwarded, timeout=TIMEOUT)
    assert [c["conversation_id"] for c in listed.json()] == ["chat-1"]
    assert "webui:u-1" in _owners(strict)
    assert "webui" not in _owners(strict)
    # MCP with the header: served, as that user.
    mcp = _send(strict, "POST", "/mcp", MCP_INITIALIZE, **PROXY, **{"X-User-Id": "u-1"})
    assert mcp.status_code == 200, mcp.text
    # Two headers naming two users: refused, not one picked.
    both = {**PROXY, "X-OpenWebUI-User-Id": "u-1", "X-User-Id": "u-2"}
    disagree = httpx.get(f"{strict.url}/v1/me", headers=both, timeout=TIMEOUT)
    assert disagree.status_code == 422, disagree.text
    assert "name different users" in disagree.json()["detail"]


def test_proxy_shared_user_serves_header_less_requests_as_one_shared_user(
    shared: RunningServer,
) -> None:
    me = httpx.get(f"{shared.url}/v1/me", headers=PROXY, timeout=TIMEOUT)
    assert me.status_code == 200, me.text
    assert me.json()["user_id"] == "webui"
    chat = httpx.post(
        f"{shared.url}/v1/chat/completions",
        json={**OPEN_WEBUI_CHAT, "stream": False},
        headers={**PROXY, "X-OpenWebUI-Chat-Id": "chat-shared"},
        timeout=TIMEOUT,
    )
    assert chat.status_code == 200, chat.text
    assert _owners(shared) == {"webui"}
    mcp = _send(shared, "POST", "/mcp", MCP_INITIALIZE, **PROXY)
    assert mcp.status_code == 200, mcp.text
    # A forwarded user is still their own, not the shared one.
    forwarded = {**PROXY, "X-OpenWebUI-User-Id": "u-1"}
    me = httpx.get(f"{shared.url}/v1/me", headers=forwarded, timeout=TIMEOUT)
    assert me.json()["user_id"] == "webui:u-1"
    listed = httpx.get(f"{shared.url}/v1/conversations", headers=forwarded, timeout=TIMEOUT)
    assert listed.json() == []


LANGSERVE = [
    ("invoke", _invoke),
    ("stream", _invoke),
    ("batch", lambda **c: {"inputs": [{"input": "hi"}], "config": _invoke(**c)["config"]}),
    ("retriever/invoke", lambda **c: {"input": "blood", "config": {"configurable": c}}),
]


@pytest.mark.parametrize(("endpoint", "body"), LANGSERVE, ids=[e for e, _ in LANGSERVE])
def test_with_keys_the_config_cannot_name_another_user(
    strict: RunningServer, fake_llm: FakeOllama, endpoint: str, body: Any
) -> None:
    chats = fake_llm.chats
    for headers, claimed in [
        (ANA, "bob"),
        (ANA, "webui:u-1"),
        ({**PROXY, "X-OpenWebUI-User-Id": "u-1"}, "webui:u-2"),
        ({**PROXY, "X-OpenWebUI-User-Id": "u-1"}, "ana"),
    ]:
        response = httpx.post(
            f"{strict.url}/memory/{endpoint}",
            json=body(user_id=claimed),
            headers=headers,
            timeout=TIMEOUT,
        )
        assert response.status_code == 403, f"{claimed}: {response.status_code} {response.text}"
        assert f"names the user '{claimed}'" in response.json()["detail"]
    assert fake_llm.chats == chats
    assert not {"bob", "webui:u-2"} & _owners(strict)
    # Naming the key's own user is no claim on anyone else's.
    own = httpx.post(
        f"{strict.url}/memory/{endpoint}", json=body(user_id="ana"), headers=ANA, timeout=TIMEOUT
    )
    assert own.status_code == 200, own.text


def test_a_refused_request_says_what_to_change_in_open_webui(strict: RunningServer) -> None:
    # The exact request Open WebUI makes with forwarding off, as its log would show it.
    response = httpx.post(
        f"{strict.url}/v1/chat/completions",
        json=OPEN_WEBUI_CHAT,
        headers={"Content-Type": "application/json", **PROXY},
        timeout=TIMEOUT,
    )
    assert response.status_code == 403
    assert "In Open WebUI set ENABLE_FORWARD_USER_INFO_HEADERS=True" in response.json()["detail"]


def test_settings_with_colliding_names_do_not_start(tmp_path: Path, fake_llm: FakeOllama) -> None:
    data_dir = tmp_path / "data"
    env = server_env(
        data_dir, fake_llm.url, api_keys={"key-ana": "webui"}, proxy_api_keys={"key-w": "webui"}
    )
    with pytest.raises(RuntimeError, match="also a proxy_api_keys namespace"):
        RunningServer(data_dir, env).start(timeout=60)
