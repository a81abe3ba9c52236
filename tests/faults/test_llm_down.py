"""The LLM slow, failing or gone, against real servers and a fake Ollama in the test process.

Chat answers 503 with what to fix, within ``llm_timeout_seconds`` when the model hangs; the
user's message is stored (before the model is called) and a retry answers it without storing
it twice; it works again as soon as the model does, without a restart. A client that leaves
mid-stream keeps its message too. Consolidation
retries the summarization with backoff, stores nothing when every attempt fails, and keeps
every turn in tier 1 until a summary is stored. (An LLM unreachable from start-up, and a
stream failing halfway, are covered in ``tests/api/test_openai_compat.py``.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.chat import chat, turn_numbers, wait_for
from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer

pytestmark = pytest.mark.slow


def _error(response: httpx.Response) -> str:
    assert response.status_code == 503, response.text
    body: dict[str, Any] = response.json()
    if "error" in body:  # the OpenAI-compatible route
        message: str = body["error"]["message"]
        assert body["error"]["type"] == "service_unavailable"
        return message
    detail: str = body["detail"]
    return detail


def _invoke(http: httpx.Client, conversation_id: str, text: str) -> httpx.Response:
    config = {"configurable": {"conversation_id": conversation_id}}
    return http.post("/memory/invoke", json={"input": {"input": text}, "config": config})


def _stored(http: httpx.Client, conversation_id: str) -> list[tuple[str, str]]:
    response = http.get(f"/v1/conversations/{conversation_id}/turns")
    assert response.status_code == 200, response.text
    return [(turn["role"], turn["content"]) for turn in response.json()["turns"]]


def test_a_hanging_llm_times_out_with_503_and_keeps_the_message(
    tmp_path: Path, fake_llm: FakeOllama, make_server: Callable[..., RunningServer]
) -> None:
    server = make_server(
        tmp_path / "data", llm_timeout_seconds=2, memory_tier3_enabled=False
    ).start()
    fake_llm.chat_delay = 60
    with httpx.Client(base_url=server.url, timeout=60) as http:
        attempts = [
            lambda: chat(http, "slow", [], "hello", stream=False),
            lambda: chat(http, "slow", [], "hello", stream=True),
            lambda: _invoke(http, "slow", "hello"),
        ]
        for attempt in attempts:
            began = time.monotonic()
            message = _error(attempt())
            assert time.monotonic() - began < 10
            assert "llm_timeout_seconds" in message, message
            assert "MEMORY_CHAIN_LLM_TIMEOUT_SECONDS" in message, message
            # The message is stored once, whichever client retried it.
            assert _stored(http, "slow") == [("user", "hello")]
        fake_llm.chat_delay = 0
        history: list[dict[str, str]] = []
        assert chat(http, "slow", history, "hello").status_code == 200
        assert history[1]["content"] == "Noted: hello"
        assert _stored(http, "slow") == [("user", "hello"), ("assistant", "Noted: hello")]


def test_a_client_leaving_mid_stream_keeps_its_message(
    tmp_path: Path, fake_llm: FakeOllama, make_server: Callable[..., RunningServer]
) -> None:
    server = make_server(tmp_path / "data", memory_tier3_enabled=False).start()
    fake_llm.word_delay = 1.0  # a slow model: the client gives up after the first words
    said = "Remember this: the spare key is under the blue pot."
    body = {"messages": [{"role": "user", "content": said}], "stream": True}
    headers = {"X-Conversation-Id": "gone"}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            assert next(lines).startswith("data:")  # the first event; then the client leaves
        wait_for(lambda: fake_llm.chats == 1, 10, "the chat request")
        time.sleep(3)  # the reply would be complete by now
        assert _stored(http, "gone") == [("user", said)]
        # The client sends it again: answered, stored once.
        fake_llm.word_delay = 0
        assert chat(http, "gone", [], said).status_code == 200
        assert _stored(http, "gone") == [("user", said), ("assistant", f"Noted: {said}")]


def test_an_llm_failing_after_start_up_is_503_until_it_is_back(
    tmp_path: Path, fake_llm: FakeOllama, make_server: Callable[..., RunningServer]
) -> None:
    server = make_server(tmp_path / "data", memory_tier3_enabled=False).start()
    history: list[dict[str, str]] = []
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.get("/health").json()["llm"]["provider"] == "ollama"
        assert chat(http, "flaky", history, "first").status_code == 200
        fake_llm.chat_status = 404  # what Ollama answers for a model that is not pulled
        for stream in (False, True):
            message = _error(chat(http, "flaky", history, "second", stream=stream))
            assert "ollama pull" in message, message
        fake_llm.chat_status = 200
        fake_llm.stop()  # Ollama gone: the port refuses connections
        for response in (chat(http, "flaky", history, "second"), _invoke(http, "flaky", "second")):
            message = _error(response)
            assert "check that Ollama runs" in message, message
        assert turn_numbers(http, "flaky") == [1, 2, 3]  # "second" is kept, once
        fake_llm.start()  # back on the same port
        assert chat(http, "flaky", history, "second").status_code == 200
        assert turn_numbers(http, "flaky") == [1, 2, 3, 4]
        contents = [m["content"] for m in history]
        assert contents == ["first", "Noted: first", "second", "Noted: second"]


def _detail(http: httpx.Client, conversation_id: str) -> dict[str, Any]:
    response = http.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_failing_summaries_are_retried_with_backoff_and_prune_nothing(
    tmp_path: Path, fake_llm: FakeOllama, make_server: Callable[..., RunningServer]
) -> None:
    timeout = 1.5
    server = make_server(
        tmp_path / "data",
        llm_timeout_seconds=timeout,
        memory_tier2_summary_threshold=4,
        memory_tier1_keep_after_consolidation=2,
        memory_tier3_enabled=False,
    ).start()
    fake_llm.summary_delay = 60  # chat answers, summaries hang
    history: list[dict[str, str]] = []
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for text in ("one", "two", "three"):
            assert chat(http, "notes", history, text).status_code == 200
        # Four messages triggered a background consolidation: three attempts, each timing
        # out, 1 s and then 2 s apart (the service's backoff).
        wait_for(lambda: len(fake_llm.summary_starts) >= 3, 30, "three summary attempts")
        starts = fake_llm.summary_starts[:3]
        assert starts[1] - starts[0] >= timeout + 1.0 - 0.2, starts
        assert starts[2] - starts[1] >= timeout + 2.0 - 0.2, starts
        assert server.log is not None
        wait_for(
            lambda: "consolidation of notes (messages) failed" in server.log.read_text(),
            10,
            "the consolidation to give up",
        )
        detail = _detail(http, "notes")
        assert detail["summaries"] == []
        assert detail["summary"] is None
        assert [t["turn_number"] for t in detail["recent_turns"]] == list(range(1, 7))
        assert turn_numbers(http, "notes") == list(range(1, 7))

        # The manual trigger while the model errors: 503, saying what to check.
        fake_llm.summary_delay = 0
        fake_llm.summary_status = 500
        message = _error(http.post("/v1/conversations/notes/consolidate"))
        assert "summarization failed 3 times" in message
        assert "is the LLM reachable?" in message
        detail = _detail(http, "notes")
        assert detail["summaries"] == []
        assert [t["turn_number"] for t in detail["recent_turns"]] == list(range(1, 7))

        # The model is back: the summary is stored, and only then is tier 1 pruned.
        fake_llm.summary_status = 200
        response = http.post("/v1/conversations/notes/consolidate")
        assert response.status_code == 200, response.text
        summary = response.json()["summary"]
        assert (summary["turn_range_start"], summary["turn_range_end"]) == (1, 6)
        detail = _detail(http, "notes")
        assert [(s["turn_range_start"], s["turn_range_end"]) for s in detail["summaries"]] == [
            (1, 6)
        ]
        assert detail["summary"]
        assert [t["turn_number"] for t in detail["recent_turns"]] == [5, 6]
        assert turn_numbers(http, "notes") == list(range(1, 7))
