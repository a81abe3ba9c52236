"""The MCP server through the real ``mcp`` client, over both transports.

Over stdio: ``memory-chain mcp --user ana`` spawned as a client spawns it, on a data folder
seeded with two users' conversations. Over streamable HTTP: ``/mcp`` of a real server
(``memory-chain serve`` on uvicorn) with two API keys. Tools are listed and called, the
resources read; one user's facts and conversations never reach the other; ``/mcp`` without a
key is refused like every route. SQLite, the embedded vector index and the real embedding
model; no LLM (the MCP server needs none).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextResourceContents
from pydantic import AnyUrl

from memory_chain.config import MemorySettings
from memory_chain.schemas import NewTurn
from memory_chain.services import open_services
from tests.postgres import free_port
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

TOOLS = {"search_memory", "remember", "list_facts", "forget"}
FLIGHT = "We fly to Lisbon on 3 May, seats 14C and 14D."
SEATS = "I prefer window seats."
UNKNOWN_FACT = "0" * 32


def _structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


def _error(result: CallToolResult) -> str:
    assert result.isError
    return " ".join(getattr(block, "text", "") for block in result.content)


async def _read_json(session: ClientSession, uri: str) -> Any:
    result = await session.read_resource(AnyUrl(uri))
    (contents,) = result.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.mimeType == "application/json"
    return json.loads(contents.text)


def _env(data_dir: Path, **settings: object) -> dict[str, str]:
    # No LLM listens there: the MCP server needs none.
    return server_env(data_dir, f"http://127.0.0.1:{free_port()}", **settings)


# -- stdio ---------------------------------------------------------------------------------


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """A data folder with a conversation of ana's and one of bob's, embedded into tier 3."""
    data_dir = tmp_path / "data"
    services = open_services(MemorySettings(data_dir=data_dir, llm_fallback="off"))
    try:
        services.manager.add_turns(
            "trip",
            "ana",
            [NewTurn("user", FLIGHT), NewTurn("assistant", "Noted, have a nice trip.")],
        )
        services.manager.add_turns("bobs-notes", "bob", [NewTurn("user", "My PIN is 5521.")])
        assert services.vectors is not None
        services.vectors.indexer.drain()
    finally:
        services.close()
    return data_dir


async def test_stdio_tools_and_resources_through_the_real_client(
    seeded: Path, tmp_path: Path
) -> None:
    cli = str(Path(sys.executable).parent / "memory-chain")
    params = StdioServerParameters(
        command=cli, args=["mcp", "--user", "ana"], env={**os.environ, **_env(seeded)}
    )
    errlog = tmp_path / "mcp-stderr.log"
    with errlog.open("w") as stderr:
        async with (
            stdio_client(params, errlog=stderr) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await _use_every_tool_and_resource(session)
    log = errlog.read_text()
    assert "the client closed standard input" in log, log  # a clean exit, stores closed
    assert "Traceback" not in log, log


async def _use_every_tool_and_resource(session: ClientSession) -> None:
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    assert set(tools["search_memory"].inputSchema["properties"]) == {
        "query",
        "conversation_id",
        "limit",
    }
    assert tools["forget"].inputSchema["required"] == ["fact_id"]
    output = tools["search_memory"].outputSchema
    assert output is not None
    assert set(output["properties"]) == {"items", "facts", "degraded"}

    # remember: added, then the same fact again adds nothing.
    added = _structured(await session.call_tool("remember", {"text": SEATS, "kind": "preference"}))
    assert added["action"] == "added"
    fact = added["fact"]
    assert (fact["text"], fact["kind"], fact["origin"]) == (SEATS, "preference", "explicit")
    again = _structured(await session.call_tool("remember", {"text": SEATS}))
    assert (again["action"], again["fact"]["id"]) == ("same", fact["id"])

    # list_facts
    listed = _structured(await session.call_tool("list_facts", {}))
    assert [f["id"] for f in listed["facts"]] == [fact["id"]]

    # search_memory: the user's turns and the relevant facts.
    found = _structured(
        await session.call_tool("search_memory", {"query": "When do we fly to Lisbon?"})
    )
    assert found["items"][0]["content"] == FLIGHT
    assert found["items"][0]["conversation_id"] == "trip"
    assert found["degraded"] == []
    assert all("5521" not in item["content"] for item in found["items"])  # bob's
    found = _structured(
        await session.call_tool("search_memory", {"query": "Which seat do I like?", "limit": 1})
    )
    assert [f["content"] for f in found["facts"]] == [SEATS]
    assert "not found" in _error(
        await session.call_tool("search_memory", {"query": "PIN", "conversation_id": "bobs-notes"})
    )

    # forget: dismissed, kept in the history; an unknown id says what to do.
    forgotten = _structured(await session.call_tool("forget", {"fact_id": fact["id"]}))
    assert forgotten["fact"]["status"] == "dismissed"
    assert _structured(await session.call_tool("list_facts", {}))["facts"] == []
    history = _structured(await session.call_tool("list_facts", {"include_history": True}))
    assert [(f["id"], f["status"]) for f in history["facts"]] == [(fact["id"], "dismissed")]
    assert "call list_facts" in _error(await session.call_tool("forget", {"fact_id": UNKNOWN_FACT}))

    # resources: the user's conversations, and one with its turns.
    resources = {str(r.uri) for r in (await session.list_resources()).resources}
    assert resources == {"memory://conversations"}
    templates = (await session.list_resource_templates()).resourceTemplates
    assert [t.uriTemplate for t in templates] == ["memory://conversations/{conversation_id}"]
    conversations = (await _read_json(session, "memory://conversations"))["conversations"]
    assert [c["conversation_id"] for c in conversations] == ["trip"]
    trip = await _read_json(session, "memory://conversations/trip")
    assert [t["content"] for t in trip["turns"]] == [FLIGHT, "Noted, have a nice trip."]
    assert trip["omitted_turns"] == 0
    with pytest.raises(McpError, match="not found"):
        await session.read_resource(AnyUrl("memory://conversations/bobs-notes"))


# -- streamable HTTP -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("mcp-http") / "data"
    env = _env(
        data_dir, api_keys={"key-ana": "ana", "key-bob": "bob", "key-cy": "cy", "key-dee": "dee"}
    )
    running = RunningServer(data_dir, env).start()
    yield running
    running.stop()


@asynccontextmanager
async def _session(server: RunningServer, key: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(60.0)) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_http_tools_per_key_and_users_kept_apart(server: RunningServer) -> None:
    turns = {"turns": [{"role": "user", "content": FLIGHT}]}
    response = httpx.post(
        f"{server.url}/v1/conversations/trip/turns",
        json=turns,
        headers={"Authorization": "Bearer key-ana"},
        timeout=60,
    )
    assert response.status_code == 201, response.text

    async with _session(server, "key-ana") as ana:
        assert {tool.name for tool in (await ana.list_tools()).tools} == TOOLS
        added = _structured(await ana.call_tool("remember", {"text": SEATS}))
        fact_id = added["fact"]["id"]
        facts = _structured(await ana.call_tool("list_facts", {}))["facts"]
        assert [(f["id"], f["user_id"]) for f in facts] == [(fact_id, "ana")]
        found = _structured(await ana.call_tool("search_memory", {"query": "seat preference"}))
        assert SEATS in [f["content"] for f in found["facts"]]
        conversations = (await _read_json(ana, "memory://conversations"))["conversations"]
        assert [c["conversation_id"] for c in conversations] == ["trip"]

    async with _session(server, "key-bob") as bob:
        assert _structured(await bob.call_tool("list_facts", {"include_history": True})) == {
            "facts": []
        }
        found = _structured(await bob.call_tool("search_memory", {"query": "seat preference"}))
        assert found["facts"] == []
        assert all(item["content"] != FLIGHT for item in found["items"])
        assert "not found" in _error(await bob.call_tool("forget", {"fact_id": fact_id}))
        assert (await _read_json(bob, "memory://conversations"))["conversations"] == []
        with pytest.raises(McpError, match="not found"):
            await bob.read_resource(AnyUrl("memory://conversations/trip"))

    async with _session(server, "key-ana") as ana:  # bob changed nothing of ana's
        facts = _structured(await ana.call_tool("list_facts", {}))["facts"]
        assert [(f["id"], f["status"]) for f in facts] == [(fact_id, "current")]


async def test_http_concurrent_requests_each_act_as_their_own_user(server: RunningServer) -> None:
    async def owners(key: str) -> set[str]:
        async with _session(server, key) as session:
            await session.call_tool("remember", {"text": f"My key is {key}."})
            calls = [session.call_tool("list_facts", {}) for _ in range(8)]
            results = await asyncio.gather(*calls)
        return {f["user_id"] for r in results for f in _structured(r)["facts"]}

    assert await asyncio.gather(owners("key-cy"), owners("key-dee")) == [{"cy"}, {"dee"}]


def test_http_without_a_valid_key_is_401_and_mcp_is_not_in_openapi(server: RunningServer) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer not-a-key"}):
        response = httpx.post(
            f"{server.url}/mcp", json=initialize, headers={**accept, **headers}, timeout=30
        )
        assert response.status_code == 401, response.text
        assert "API key" in response.json()["detail"]
        assert response.headers["www-authenticate"] == "Bearer"
    response = httpx.post(
        f"{server.url}/mcp",
        json=initialize,
        headers={**accept, "Authorization": "Bearer key-ana"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "memory_chain"
    assert "mcp-session-id" not in response.headers  # stateless
    # No stream to GET and no session to DELETE on a stateless server.
    response = httpx.get(f"{server.url}/mcp", headers={"Authorization": "Bearer key-ana"})
    assert response.status_code == 405
    schema = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    assert not [path for path in schema["paths"] if path.startswith("/mcp")]
    # Timed under its own route, as every route is.
    metrics = httpx.get(
        f"{server.url}/metrics", headers={"Authorization": "Bearer key-ana"}, timeout=30
    ).text
    assert 'route="/mcp",status="401"' in metrics
    assert 'route="/mcp",status="200"' in metrics
