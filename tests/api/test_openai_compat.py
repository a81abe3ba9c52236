"""The OpenAI-compatible API, driven by the ``openai`` SDK against a real uvicorn server.

The server answers with the embedded model (Qwen 0.5B behind Ollama's API, 24 tokens a
reply). One server per module serves most tests; auth and an unreachable LLM get their own.
The history planning and a stream failing halfway are tested in process.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessageChunk
from openai import OpenAI

from memory_chain.api import create_app
from memory_chain.api.openai_history import derived_conversation_id
from memory_chain.chat.core import ChatCore
from memory_chain.config import DEFAULT_USER_ID, MemorySettings
from memory_chain.errors import LLMUnavailableError
from memory_chain.local_llm.model import MODEL_NAME
from tests.postgres import free_port
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow


def _serve(
    factory: pytest.TempPathFactory, llm_url: str, **settings: object
) -> Iterator[RunningServer]:
    data_dir = factory.mktemp("openai") / "data"
    server = RunningServer(data_dir, server_env(data_dir, llm_url, **settings))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_llm_url: str) -> Iterator[RunningServer]:
    """A server without API keys (users from headers), tier 3 on."""
    yield from _serve(tmp_path_factory, local_llm_url)


@pytest.fixture(scope="module")
def keyed_server(
    tmp_path_factory: pytest.TempPathFactory, local_llm_url: str
) -> Iterator[RunningServer]:
    """A server with API keys for alice and bob."""
    yield from _serve(
        tmp_path_factory,
        local_llm_url,
        api_keys={"key-alice": "alice", "key-bob": "bob"},
        memory_tier3_enabled=False,
    )


def _client(server: RunningServer, api_key: str = "unused", **headers: str) -> OpenAI:
    return OpenAI(
        base_url=f"{server.url}/v1", api_key=api_key, max_retries=0, default_headers=headers
    )


def _turns(server: RunningServer, conversation_id: str, **headers: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{server.url}/v1/conversations/{conversation_id}/turns", headers=headers, timeout=10
    )
    assert response.status_code == 200, response.text
    turns: list[dict[str, Any]] = response.json()["turns"]
    return turns


def _said(turns: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(turn["role"], turn["content"]) for turn in turns]


def _chat(client: OpenAI, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    completion = client.chat.completions.create(
        model=MODEL_NAME,
        messages=messages,  # type: ignore[arg-type]
        **kwargs,
    )
    content = completion.choices[0].message.content
    assert content
    return content


def _stream(client: OpenAI, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[str, Any]:
    """Stream a reply (usage included); the text and the chunks."""
    chunks = list(
        client.chat.completions.create(
            model=MODEL_NAME,
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
            **kwargs,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks


# -- models -----------------------------------------------------------------------------------


def test_models_lists_the_served_model(server: RunningServer) -> None:
    client = _client(server)
    models = client.models.list()
    assert [model.id for model in models.data] == [MODEL_NAME]
    assert models.data[0].object == "model"
    assert client.models.retrieve(MODEL_NAME).id == MODEL_NAME
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-4")
    assert MODEL_NAME in caught.value.message


# -- chat -------------------------------------------------------------------------------------


def test_chat_answers_with_usage_and_stores_the_exchange(server: RunningServer) -> None:
    conversation = f"sdk-{uuid.uuid4().hex[:8]}"
    completion = _client(server).chat.completions.create(
        model=MODEL_NAME,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello to Ana."},
        ],
        temperature=0.3,
        max_tokens=5,
        user="someone",
        extra_body={"conversation_id": conversation},
    )
    assert completion.object == "chat.completion"
    assert completion.model == MODEL_NAME
    assert completion.id.startswith("chatcmpl-")
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in {"stop", "length"}
    usage = completion.usage
    assert usage is not None
    assert usage.prompt_tokens > 0
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens

    turns = _turns(server, conversation)
    assert _said(turns) == [("user", "Say hello to Ana."), ("assistant", choice.message.content)]
    assert turns[1]["tokens"] == {
        "prompt": usage.prompt_tokens,
        "completion": usage.completion_tokens,
        "total": usage.total_tokens,
    }


def test_streaming_chunks_assemble_the_stored_reply(server: RunningServer) -> None:
    conversation = f"stream-{uuid.uuid4().hex[:8]}"
    client = _client(server, **{"X-Conversation-Id": conversation})
    text, chunks = _stream(client, [{"role": "user", "content": "Name a colour."}])

    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert all(chunk.model == MODEL_NAME for chunk in chunks)
    assert len({chunk.id for chunk in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1
    assert finals[0].choices[0].finish_reason in {"stop", "length"}
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage is not None
    assert usage_chunk.usage.completion_tokens > 0
    assert usage_chunk.usage.prompt_tokens > 0
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert text
    assert _said(_turns(server, conversation)) == [
        ("user", "Name a colour."),
        ("assistant", text),
    ]


def test_resent_history_stores_two_turns_per_request(server: RunningServer) -> None:
    conversation = f"history-{uuid.uuid4().hex[:8]}"
    client = _client(server)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for number, question in enumerate(
        ["My name is Ana.", "I live in Porto.", "What is my name?"], start=1
    ):
        messages.append({"role": "user", "content": question})
        reply = _chat(client, messages, extra_headers={"X-Conversation-Id": conversation})
        messages.append({"role": "assistant", "content": reply})
        turns = _turns(server, conversation)
        assert len(turns) == 2 * number
        assert _said(turns) == [(m["role"], m["content"]) for m in messages[1:]]


def test_open_webui_headers_name_the_chat_and_the_user(server: RunningServer) -> None:
    chat_id = str(uuid.uuid4())
    owui = {"X-OpenWebUI-Chat-Id": chat_id, "X-OpenWebUI-User-Id": "owui-user-1"}
    client = _client(server, **owui)
    messages: list[dict[str, Any]] = []
    for question in ["I have a cat called Miso.", "What should I feed her?"]:
        messages.append({"role": "user", "content": question})
        reply, _ = _stream(client, messages)  # Open WebUI streams, with usage
        messages.append({"role": "assistant", "content": reply})
    as_owui_user = {"X-User-Id": "owui-user-1"}
    assert _said(_turns(server, chat_id, **as_owui_user)) == [
        (m["role"], m["content"]) for m in messages
    ]
    listed = httpx.get(f"{server.url}/v1/conversations", headers=as_owui_user, timeout=10).json()
    assert chat_id in [c["conversation_id"] for c in listed]
    other = httpx.get(f"{server.url}/v1/conversations/{chat_id}/turns", timeout=10)
    assert other.status_code == 404  # the default user does not see it

    # Open WebUI's background title task, sent for the same chat: answered, not remembered.
    task = f"### Task:\nGenerate a concise title.\n<chat_history>\n{messages[0]['content']}\n"
    _chat(client, [{"role": "user", "content": task + "</chat_history>"}])
    # Regenerate: the last question again, without the reply it had: nothing new is stored.
    _stream(client, messages[:-1])
    # Edit an earlier message (another branch): only the new exchange is stored.
    edited = [messages[0], messages[1], {"role": "user", "content": "Is tuna fine for her?"}]
    reply = _chat(client, edited)
    turns = _turns(server, chat_id, **as_owui_user)
    assert _said(turns) == [(m["role"], m["content"]) for m in messages] + [
        ("user", "Is tuna fine for her?"),
        ("assistant", reply),
    ]


def test_derived_conversation_id_is_stable_across_turns(server: RunningServer) -> None:
    client = _client(server, **{"X-User-Id": "derive-user"})
    first = f"Remember the code word {uuid.uuid4().hex[:6]}."
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": first}]
    )
    conversation = raw.headers["x-conversation-id"]
    assert conversation == derived_conversation_id("derive-user", first)
    reply = raw.parse().choices[0].message.content or ""
    # Content as parts, as Open WebUI sends it sometimes.
    parts = [{"type": "text", "text": "What is the code word?"}]
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL_NAME,
        messages=[
            {"role": "user", "content": first},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": parts},
        ],
    )
    assert raw.headers["x-conversation-id"] == conversation
    turns = _turns(server, conversation, **{"X-User-Id": "derive-user"})
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert turns[2]["content"] == "What is the code word?"
    # The same first message from another user is another conversation.
    assert derived_conversation_id(DEFAULT_USER_ID, first) != conversation


def test_history_the_server_lacks_is_stored_once(server: RunningServer) -> None:
    conversation = f"import-{uuid.uuid4().hex[:8]}"
    earlier = [
        {"role": "user", "content": "We fly to Lisbon on 3 May."},
        {"role": "assistant", "content": "Noted: Lisbon, 3 May."},
    ]
    client = _client(server, **{"X-Conversation-Id": conversation})
    messages = [*earlier, {"role": "user", "content": "When do we fly?"}]
    reply = _chat(client, messages)
    expected = [(m["role"], m["content"]) for m in messages] + [("assistant", reply)]
    assert _said(_turns(server, conversation)) == expected
    # Sending the same request again (a retry) stores nothing more.
    _chat(client, messages)
    assert _said(_turns(server, conversation)) == expected


# -- auth and errors --------------------------------------------------------------------------


def test_api_keys_are_required_and_scope_conversations(keyed_server: RunningServer) -> None:
    url = f"{keyed_server.url}/v1/chat/completions"
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}]}
    missing = httpx.post(url, json=body, timeout=10)
    assert missing.status_code == 401
    assert "API key" in missing.json()["error"]["message"]
    assert httpx.get(f"{keyed_server.url}/v1/models", timeout=10).status_code == 401
    with pytest.raises(openai.AuthenticationError) as caught:
        _client(keyed_server, api_key="wrong").chat.completions.create(**body)  # type: ignore[call-overload]
    assert caught.value.status_code == 401

    alice = _client(keyed_server, api_key="key-alice")
    conversation = f"alice-{uuid.uuid4().hex[:8]}"
    _chat(alice, body["messages"], extra_body={"conversation_id": conversation})  # type: ignore[arg-type]
    as_alice = {"Authorization": "Bearer key-alice"}
    assert len(_turns(keyed_server, conversation, **as_alice)) == 2

    bob = _client(keyed_server, api_key="key-bob", **{"X-User-Id": "alice"})  # no impersonation
    as_bob = {"Authorization": "Bearer key-bob"}
    foreign = httpx.get(
        f"{keyed_server.url}/v1/conversations/{conversation}/turns", headers=as_bob, timeout=10
    )
    assert foreign.status_code == 404
    # Bob naming the same conversation id chats in a conversation of his own.
    _chat(bob, body["messages"], extra_body={"conversation_id": conversation})  # type: ignore[arg-type]
    assert len(_turns(keyed_server, conversation, **as_bob)) == 2
    assert len(_turns(keyed_server, conversation, **as_alice)) == 2


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "x", "messages": []}, "messages"),
        ({"model": "x"}, "messages"),
        ({"model": "x", "messages": "hi"}, "messages"),
        ({"model": "x", "messages": [{"role": "wizard", "content": "hi"}]}, "role"),
        ({"model": "x", "messages": [{"content": "hi"}]}, "role"),
        ({"model": "x", "messages": [{"role": "user", "content": "  "}]}, "no text"),
        ({"model": "x", "messages": [{"role": "user", "content": None}]}, "no text"),
        ({"model": "x", "messages": [{"role": "user", "content": 5}]}, "content"),
        (
            {"model": "x", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "no text",
        ),
        (
            {"model": "x", "messages": [{"role": "user", "content": "a"}, {"role": "assistant"}]},
            "last message",
        ),
        ({"model": "x", "messages": [{"role": "system", "content": "hi"}]}, "last message"),
        (
            {"messages": [{"role": "user", "content": "hi"}], "conversation_id": "../etc"},
            "conversation_id",
        ),
        ({"messages": [{"role": "user", "content": "hi"}], "n": 3}, "n"),
        ({"messages": [{"role": "user", "content": "hi"}], "stream": "maybe"}, "stream"),
        ({"messages": [{"role": "user", "content": "hi\u0000"}]}, "NUL"),
        ({"messages": [{"role": "user", "content": "x" * 200_001}]}, "max_message_chars"),
        ([1, 2], "dictionary"),
    ],
)
def test_malformed_requests_get_422_with_a_message(
    server: RunningServer, body: Any, says: str
) -> None:
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 422, response.text
    error = response.json()
    assert says in error["error"]["message"]
    assert error["detail"] == error["error"]["message"]
    assert error["error"]["type"] == "invalid_request_error"


def test_other_bad_requests_are_4xx_json(server: RunningServer) -> None:
    url = f"{server.url}/v1/chat/completions"
    ok_body = {"model": "x", "messages": [{"role": "user", "content": "hi"}]}
    not_json = httpx.post(
        url, content=b"{nope", headers={"Content-Type": "application/json"}, timeout=10
    )
    assert not_json.status_code == 422
    assert "not valid JSON" in not_json.json()["error"]["message"]
    bad_header = httpx.post(url, json=ok_body, headers={"X-Conversation-Id": "a b"}, timeout=10)
    assert bad_header.status_code == 422
    assert "X-Conversation-Id" in bad_header.json()["error"]["message"]
    bad_user = httpx.post(url, json=ok_body, headers={"X-User-Id": "../root"}, timeout=10)
    assert bad_user.status_code == 422
    assert "user id" in bad_user.json()["error"]["message"]
    surrogate = b'{"messages": [{"role": "user", "content": "bad \\ud800"}]}'
    lone = httpx.post(
        url, content=surrogate, headers={"Content-Type": "application/json"}, timeout=10
    )
    assert lone.status_code == 422
    assert "not valid Unicode" in lone.json()["error"]["message"]
    too_big = {**ok_body, "messages": [{"role": "user", "content": "x" * 9_000_000}]}
    assert httpx.post(url, json=too_big, timeout=30).status_code == 413
    assert httpx.get(url, timeout=10).status_code == 405


def test_unreachable_llm_is_503_with_the_fix(
    start_server: Callable[..., RunningServer],
) -> None:
    down = start_server(ollama_base_url="http://127.0.0.1:9", memory_tier3_enabled=False)
    client = _client(down)
    messages = [{"role": "user", "content": "hello"}]
    for stream in (False, True):
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model=MODEL_NAME, messages=messages, stream=stream)  # type: ignore[call-overload]
        assert caught.value.status_code == 503
        assert "start Ollama at http://127.0.0.1:9" in caught.value.message
    assert [m.id for m in client.models.list().data]  # the rest of the API still answers
    # The message is kept (stored before the model was called), once for both attempts.
    (stored,) = httpx.get(f"{down.url}/v1/conversations", timeout=10).json()
    assert stored["turn_count"] == 1


# -- in process: a stream that fails after it started ------------------------------------------


class _FailingCore:
    """The real core's preparation, then a reply that loses the model after one piece."""

    def __init__(self, core: ChatCore) -> None:
        self.prepare = core.prepare

    def astream(self, _turn: Any, _config: Any = None) -> AsyncIterator[AIMessageChunk]:
        async def pieces() -> AsyncIterator[AIMessageChunk]:
            yield AIMessageChunk(content="Hel")
            raise LLMUnavailableError("the chat model failed mid-reply: restart Ollama")

        return pieces()


def test_a_stream_failing_after_it_started_ends_with_an_error_event(tmp_path: Path) -> None:
    settings = MemorySettings(
        data_dir=tmp_path / "data",
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",
        ollama_chat_model=MODEL_NAME,
        memory_tier3_enabled=False,
    )
    app = create_app(settings)
    with TestClient(app) as http:
        services = app.state.services
        services.core = _FailingCore(services.core)
        client = OpenAI(base_url="http://testserver/v1", api_key="x", http_client=http)
        stream = client.chat.completions.create(
            model=MODEL_NAME,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            extra_headers={"X-Conversation-Id": "failing"},
        )
        received: list[str | None] = []

        def read() -> None:
            received.extend(chunk.choices[0].delta.content for chunk in stream)

        with pytest.raises(openai.APIError) as caught:
            read()
        assert received == ["", "Hel"]
        assert "restart Ollama" in caught.value.message
        raw = http.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "stream": True},
            headers={"X-Conversation-Id": "failing"},
        )
        assert raw.status_code == 200
        assert raw.text.endswith('"code": 503}}\n\ndata: [DONE]\n\n')
        assert http.get("/v1/conversations").json() == []  # nothing stored


# -- conversation ids ------------------------------------------------------------------------


def test_derived_ids_depend_on_user_and_first_message() -> None:
    same = derived_conversation_id("ana", "Hello  there")
    assert same == derived_conversation_id("ana", "Hello there")
    assert same != derived_conversation_id("bob", "Hello there")
    assert same != derived_conversation_id("ana", "Hello")
    assert same.startswith("oa-")
    assert len(same) == 35


# -- the context budget with the real model ---------------------------------------------------


def test_a_12k_token_paste_never_breaks_the_users_later_chats(server: RunningServer) -> None:
    """The embedded model (llama.cpp, a 4,096-token window) counts every prompt itself."""
    user = {"X-User-Id": f"paster-{uuid.uuid4().hex[:6]}"}
    lines = [f"step {n}: upload of invoice-{n}.pdf took {n * 3 % 997} ms" for n in range(600)]
    lines[300] = "step 300: the backup to s3://vault-7319 failed with AccessDenied"
    paste = "\n".join(lines)
    # As the current message it cannot fit: 400 with the numbers, nothing stored.
    client = _client(server, **user, **{"X-Conversation-Id": "paste"})
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "user", "content": paste}]
        )
    assert caught.value.code == "context_length_exceeded"
    assert "4,096" in caught.value.message
    tokens = int(caught.value.message.split(" tokens")[0].rsplit(" ", 1)[-1].replace(",", ""))
    assert tokens > 12_000
    # Logged as a chat held elsewhere (with a model of a larger window), it is memory now.
    logged = httpx.post(
        f"{server.url}/v1/conversations/paste/turns",
        json={
            "turns": [
                {"role": "user", "content": paste},
                {"role": "assistant", "content": "Noted."},
            ]
        },
        headers=user,
        timeout=60,
    )
    assert logged.status_code == 201, logged.text
    for conversation, question in [
        ("paste", "Which backup failed?"),
        ("later", "Why did the vault backup fail?"),
    ]:
        client = _client(server, **user, **{"X-Conversation-Id": conversation})
        completion = client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "user", "content": question}]
        )
        usage = completion.usage
        assert usage is not None
        # The model's own count of the prompt it read (llama.cpp), within its window.
        assert 200 < usage.prompt_tokens <= 4096 - 24, usage
    assert len(_turns(server, "later", **user)) == 2
