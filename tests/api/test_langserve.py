"""The LangServe routes end to end: ``RemoteRunnable`` against a real uvicorn and the real model.

One server (no API keys, so the user comes from ``X-User-Id`` or is ``default``) serves every
test of this module; each test talks in its own conversation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.runnables import RunnableConfig
from langserve import RemoteRunnable

from tests.servers import RunningServer, server_env

TIMEOUT = 120.0
Remote = RemoteRunnable[Any, Any]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_llm_url: str) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("langserve") / "data"
    running = RunningServer(data_dir, server_env(data_dir, local_llm_url)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def remote(server: RunningServer) -> Remote:
    return RemoteRunnable(server.url + "/memory/", timeout=TIMEOUT)


def _config(conversation_id: str) -> RunnableConfig:
    return {"configurable": {"conversation_id": conversation_id}}


def _turns(server: RunningServer, conversation_id: str, **headers: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{server.url}/v1/conversations/{conversation_id}/turns", headers=headers, timeout=30
    )
    assert response.status_code == 200, response.text
    turns: list[dict[str, Any]] = response.json()["turns"]
    return turns


def _wait_for_backfill(server: RunningServer, timeout: float = 60.0) -> None:
    """Wait until tier 3 has embedded (and settled) every stored turn."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tier3 = httpx.get(f"{server.url}/health", timeout=10).json()["tier3"]
        if tier3["queued_turns"] == 0:
            return
        time.sleep(0.2)
    pytest.fail(f"tier 3 still has queued turns after {timeout} s: {tier3}")


def test_invoke_returns_the_reply_and_stores_both_turns(
    server: RunningServer, remote: Remote
) -> None:
    reply = remote.invoke({"input": "Hello! Please answer with one word."}, _config("invoke"))
    assert isinstance(reply, BaseMessage)
    assert reply.type in ("ai", "AIMessageChunk")
    assert isinstance(reply.content, str)
    assert reply.content.strip()
    turns = _turns(server, "invoke")
    assert [(t["turn_number"], t["role"]) for t in turns] == [(1, "user"), (2, "assistant")]
    assert turns[0]["content"] == "Hello! Please answer with one word."
    assert turns[1]["content"] == reply.content
    assert turns[1]["tokens"]["completion"]  # the counts the model reported


def test_stream_yields_several_chunks(server: RunningServer, remote: Remote) -> None:
    chunks = list(remote.stream({"input": "Count from one to ten in words."}, _config("stream")))
    assert len(chunks) > 2
    assert all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    text = "".join(str(chunk.content) for chunk in chunks)
    assert text.strip()
    turns = _turns(server, "stream")
    assert [t["role"] for t in turns] == ["user", "assistant"]
    assert turns[1]["content"] == text


def test_batch_answers_each_input(server: RunningServer, remote: Remote) -> None:
    inputs = ["What colour is the sky? One word.", "What colour is grass? One word."]
    replies = remote.batch([{"input": text} for text in inputs], _config("batch"))
    assert len(replies) == 2
    assert all(isinstance(reply, BaseMessage) and str(reply.content).strip() for reply in replies)
    turns = _turns(server, "batch")
    # Each message is stored before its model call and each reply once complete: the inputs
    # of one batch run at once, so two questions may come before both replies.
    assert [t["turn_number"] for t in turns] == [1, 2, 3, 4]
    assert turns[0]["role"] == "user"
    assert {t["content"] for t in turns if t["role"] == "user"} == set(inputs)
    replied = {t["content"] for t in turns if t["role"] == "assistant"}
    assert replied == {str(r.content) for r in replies}


async def test_astream_events_show_the_chat_model_tokens(
    server: RunningServer, remote: Remote
) -> None:
    events = [
        event
        async for event in remote.astream_events(
            {"input": "Name three fruits."}, _config("events"), version="v2"
        )
    ]
    kinds = [event["event"] for event in events]
    assert kinds[0] == "on_chain_start"
    assert kinds[-1] == "on_chain_end"
    assert "on_chat_model_start" in kinds
    assert "on_chat_model_end" in kinds
    tokens = [
        event["data"]["chunk"] for event in events if event["event"] == "on_chat_model_stream"
    ]
    assert len(tokens) > 2
    assert all(isinstance(token, AIMessageChunk) for token in tokens)
    text = "".join(str(token.content) for token in tokens)
    assert text.strip()
    assert _turns(server, "events")[1]["content"] == text


def test_schemas_describe_the_chat_input_output_and_config(server: RunningServer) -> None:
    input_schema = httpx.get(f"{server.url}/memory/input_schema", timeout=10).json()
    assert input_schema["properties"]["input"]["type"] == "string"
    assert input_schema["required"] == ["input"]
    output_schema = httpx.get(f"{server.url}/memory/output_schema", timeout=10).json()
    assert "AIMessageChunk" in str(output_schema)
    config_schema = httpx.get(f"{server.url}/memory/config_schema", timeout=10).json()
    text = str(config_schema)
    assert "conversation_id" in text
    assert "user_id" in text
    retriever_input = httpx.get(f"{server.url}/memory/retriever/input_schema", timeout=10).json()
    assert retriever_input["type"] == "string"


@pytest.mark.parametrize("endpoint", ["invoke", "batch", "stream", "stream_events"])
def test_a_request_without_conversation_id_is_400(server: RunningServer, endpoint: str) -> None:
    body: dict[str, Any] = (
        {"inputs": [{"input": "hi"}]} if endpoint == "batch" else {"input": {"input": "hi"}}
    )
    response = httpx.post(f"{server.url}/memory/{endpoint}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    assert "conversation_id" in response.json()["detail"]


@pytest.mark.parametrize("conversation_id", ["../x", "a b", "x/y", "-x", "x" * 129, "caf\u00e9"])
def test_a_malformed_conversation_id_is_422(server: RunningServer, conversation_id: str) -> None:
    body = {"input": {"input": "hi"}, "config": _config(conversation_id)}
    response = httpx.post(f"{server.url}/memory/invoke", json=body, timeout=30)
    assert response.status_code == 422, response.text
    assert "invalid conversation id" in response.json()["detail"]


def test_the_conversation_can_come_from_a_header(server: RunningServer) -> None:
    response = httpx.post(
        f"{server.url}/memory/invoke",
        json={"input": {"input": "Say hi."}},
        headers={"X-Conversation-Id": "from-header"},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200, response.text
    assert len(_turns(server, "from-header")) == 2


@pytest.mark.parametrize("endpoint", ["invoke", "stream"])
def test_an_empty_message_is_422(server: RunningServer, endpoint: str) -> None:
    body = {"input": {"input": "   "}, "config": _config("empty")}
    parts: list[str] = []
    with httpx.stream("POST", f"{server.url}/memory/{endpoint}", json=body, timeout=30) as response:
        try:
            parts.extend(response.iter_text())
        except httpx.RemoteProtocolError:
            parts.append("\n<the server dropped the connection mid-stream>")
    text = "".join(parts)
    # Refused before a stream starts: a 422 that says what to fix, not a 500 event.
    assert response.status_code == 422, f"{response.status_code} {text}"
    assert "detail" in json.loads(text)
    assert httpx.get(f"{server.url}/v1/conversations/empty", timeout=30).status_code == 404


def test_turns_accumulate_two_per_invoke(server: RunningServer, remote: Remote) -> None:
    messages = ["My name is Ada.", "I live in Porto.", "I like sailing."]
    replies = [remote.invoke({"input": text}, _config("c1")) for text in messages]
    turns = _turns(server, "c1")
    assert [t["turn_number"] for t in turns] == [1, 2, 3, 4, 5, 6]
    assert [t["content"] for t in turns[0::2]] == messages
    assert [t["content"] for t in turns[1::2]] == [reply.content for reply in replies]
    assert {t["role"] for t in turns[0::2]} == {"user"}
    assert {t["role"] for t in turns[1::2]} == {"assistant"}


def test_retriever_returns_the_callers_turns_with_scores(server: RunningServer) -> None:
    mine: Remote = RemoteRunnable(server.url + "/memory/", timeout=TIMEOUT)
    mine.invoke({"input": "My cat is called Pistachio."}, _config("pets"))
    other: Remote = RemoteRunnable(
        server.url + "/memory/", timeout=TIMEOUT, headers={"X-User-Id": "zoe"}
    )
    other.invoke({"input": "My cat is called Marzipan."}, _config("zoe-pets"))
    _wait_for_backfill(server)

    retriever: Remote = RemoteRunnable(server.url + "/memory/retriever/", timeout=TIMEOUT)
    docs = retriever.invoke("What is my cat called?")
    assert docs
    assert all(isinstance(doc, Document) for doc in docs)
    for doc in docs:
        # The chat's own fused retrieval: where each hit came from, and its fused score.
        assert doc.metadata["tier"] in {"tier2", "tier3"}
        assert set(doc.metadata["sources"]) <= {"tier2-turns", "tier2-summaries", "tier3"}
        assert doc.metadata["sources"]
        assert isinstance(doc.metadata["score"], float)
        assert doc.metadata["user_id"] == "default"
        assert "Marzipan" not in doc.page_content
    scores = [doc.metadata["score"] for doc in docs]
    assert scores == sorted(scores, reverse=True)
    assert any("Pistachio" in doc.page_content for doc in docs)
    assert any("tier3" in doc.metadata["sources"] for doc in docs)

    in_one = retriever.invoke("What is my cat called?", _config("pets"))
    assert in_one
    assert {doc.metadata["conversation_id"] for doc in in_one} == {"pets"}

    zoe: Remote = RemoteRunnable(
        server.url + "/memory/retriever/", timeout=TIMEOUT, headers={"X-User-Id": "zoe"}
    )
    zoes = zoe.invoke("What is my cat called?")
    assert {doc.metadata["user_id"] for doc in zoes} == {"zoe"}
    assert any("Marzipan" in doc.page_content for doc in zoes)
    assert not any("Pistachio" in doc.page_content for doc in zoes)
