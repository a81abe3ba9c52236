"""What reaches the model: a recording Ollama stand-in behind a real memory_chain server.

The stand-in declares two models through ``/api/show`` (2,048- and 32,768-token context
lengths) and records every chat request. A client's system prompt, model and options must
reach it; the prompt must fit the chosen model's window (counted high, as for any model whose
tokenizer memory_chain does not have); an unknown model is OpenAI's 404; a message too long
for the window is a 400 with the numbers, and nothing is stored.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memory_chain.chat.budget import MEMORIES_HEADING
from memory_chain.tokens import upper_bound_tokens
from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

SMALL, BIG = "small:1b", "big:8b"
HOOK = "You are Captain Hook. Sign every answer with ARRR-7319."


@pytest.fixture(scope="module")
def stand_in() -> Iterator[FakeOllama]:
    fake = FakeOllama()
    fake.models = {SMALL: 2048, BIG: 32_768}
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, stand_in: FakeOllama
) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("requests") / "data"
    env = server_env(
        data_dir,
        stand_in.url,
        ollama_chat_model=SMALL,
        ollama_summary_model=SMALL,
        llm_max_tokens=512,
    )
    server = RunningServer(data_dir, env)
    try:
        yield server.start()
    finally:
        server.stop()


def _post(server: RunningServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=60)


def _sent_tokens(request: dict[str, Any]) -> int:
    """The prompt as the server counts a model it has no tokenizer for, overheads included."""
    messages = request["messages"]
    return sum(upper_bound_tokens(m["content"]) + 8 for m in messages) + 16


def test_models_are_the_upstreams(server: RunningServer) -> None:
    listed = httpx.get(f"{server.url}/v1/models", timeout=10).json()
    assert [m["id"] for m in listed["data"]] == [SMALL, BIG]
    assert httpx.get(f"{server.url}/v1/models/{BIG}", timeout=10).json()["id"] == BIG
    missing = httpx.get(f"{server.url}/v1/models/nope:3b", timeout=10)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "model_not_found"


def test_system_prompt_model_and_options_reach_the_model(
    server: RunningServer, stand_in: FakeOllama
) -> None:
    chat = str(uuid.uuid4())
    body = {
        "model": BIG,
        "messages": [
            {"role": "system", "content": HOOK},
            {"role": "developer", "content": "Keep it short."},
            {"role": "user", "content": "Who are you?"},
        ],
        "max_tokens": 10,
        "temperature": 0.3,
        "top_p": 0.5,
        "stop": ["###"],
        "seed": 42,
    }
    response = _post(server, body, **{"X-OpenWebUI-Chat-Id": chat, "X-OpenWebUI-User-Id": "hook"})
    assert response.status_code == 200, response.text
    assert response.json()["model"] == BIG
    sent = stand_in.requests[-1]
    assert sent["model"] == BIG
    options = sent["options"]
    assert options["num_predict"] == 10
    assert options["temperature"] == 0.3
    assert options["top_p"] == 0.5
    assert options["stop"] == ["###"]
    assert options["seed"] == 42
    assert options["num_ctx"] == 8192  # its 32,768 capped by llm_max_context_window
    system = sent["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith(f"{HOOK}\n\nKeep it short.")
    assert "long-term memory" in system["content"]
    # Without model or options: the configured model, its window, the settings' reply.
    _post(
        server,
        {"messages": [{"role": "user", "content": "And now?"}]},
        **{"X-OpenWebUI-Chat-Id": chat, "X-OpenWebUI-User-Id": "hook"},
    )
    sent = stand_in.requests[-1]
    assert sent["model"] == SMALL
    assert sent["options"]["num_ctx"] == 2048
    assert sent["options"]["num_predict"] == 512  # llm_max_tokens, a quarter of 2,048
    assert sent["options"]["temperature"] == 0.0  # the test server's llm_temperature


def test_an_unknown_model_is_openais_404(server: RunningServer, stand_in: FakeOllama) -> None:
    before = len(stand_in.requests)
    for name in ("nope:3b", "gpt-4o"):
        response = _post(server, {"model": name, "messages": [{"role": "user", "content": "hi"}]})
        assert response.status_code == 404
        error = response.json()["error"]
        assert error["code"] == "model_not_found"
        assert error["param"] == "model"
        assert name in error["message"]
        assert SMALL in error["message"]
    assert len(stand_in.requests) == before


def test_a_message_too_long_for_the_window_is_400_with_the_numbers(server: RunningServer) -> None:
    conversation = f"long-{uuid.uuid4().hex[:8]}"
    paste = " ".join(f"line {n}: worker-{n % 7} failed with ECONNRESET" for n in range(900))
    body = {"model": SMALL, "messages": [{"role": "user", "content": paste}]}
    response = _post(server, body, **{"X-Conversation-Id": conversation})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert "2,048" in error["message"]
    assert f"{upper_bound_tokens(paste):,} tokens" in error["message"]
    stored = httpx.get(f"{server.url}/v1/conversations/{conversation}/turns", timeout=10)
    assert stored.status_code == 404  # nothing stored, not even the conversation


def test_a_long_paste_never_breaks_the_chats_after_it(
    server: RunningServer, stand_in: FakeOllama
) -> None:
    """A paste answered by the large model is remembered, and recalled within every window."""
    user = {"X-User-Id": f"paster-{uuid.uuid4().hex[:6]}"}
    first = {**user, "X-Conversation-Id": "paste-chat"}
    lines = [f"step {n}: upload of invoice-{n}.pdf took {n * 3} ms" for n in range(200)]
    lines[100] = "step 100: the backup to s3://vault-7319 failed with AccessDenied"
    paste = "\n".join(lines)
    stand_in.recall = True
    body = {"model": BIG, "messages": [{"role": "user", "content": paste}]}
    assert _post(server, body, **first).status_code == 200
    sent = stand_in.requests[-1]
    assert _sent_tokens(sent) <= 8192 - 512
    follow_ups = [
        ({**first}, "Which backup failed?"),
        ({**user, "X-Conversation-Id": "another-chat"}, "Why did the vault backup fail?"),
    ]
    for headers, question in follow_ups:
        response = _post(
            server, {"model": SMALL, "messages": [{"role": "user", "content": question}]}, **headers
        )
        assert response.status_code == 200, response.text
        sent = stand_in.requests[-1]
        assert sent["options"]["num_ctx"] == 2048
        assert _sent_tokens(sent) <= 2048 - 512, _sent_tokens(sent)
        prompt = "\n".join(m["content"] for m in sent["messages"])
        # The paste is there as an excerpt around what was asked, marked as cut.
        assert "AccessDenied" in prompt
        assert "[…]" in prompt
    assert MEMORIES_HEADING in stand_in.requests[-1]["messages"][0]["content"]
    stand_in.recall = False
