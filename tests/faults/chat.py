"""Small HTTP helpers of the fault tests: chat as an OpenAI client does, poll the health."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx


def chat(
    http: httpx.Client,
    conversation_id: str,
    history: list[dict[str, str]],
    text: str,
    *,
    stream: bool = False,
) -> httpx.Response:
    """Send ``text`` after ``history``; on a 200 (not streamed) the exchange joins ``history``."""
    response = http.post(
        "/v1/chat/completions",
        json={
            "messages": [*history, {"role": "user", "content": text}],
            "stream": stream,
        },
        headers={"X-Conversation-Id": conversation_id},
    )
    if response.status_code == 200 and not stream:
        reply = response.json()["choices"][0]["message"]["content"]
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
    return response


def health(http: httpx.Client) -> dict[str, Any]:
    """``GET /health``."""
    response = http.get("/health")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def turn_numbers(http: httpx.Client, conversation_id: str) -> list[int]:
    """The stored turn numbers of a conversation, through the API."""
    response = http.get(f"/v1/conversations/{conversation_id}/turns", params={"limit": 500})
    assert response.status_code == 200, response.text
    return [turn["turn_number"] for turn in response.json()["turns"]]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.1)
