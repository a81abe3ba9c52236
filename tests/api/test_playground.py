"""The LangServe playground at ``/memory/playground/``, driven in headless Chromium.

A person opens the playground, types a conversation id into Configure, sends a message and
reads the reply; then reloads and expects to see the conversation again.

What the LangServe playground keeps across a reload, by design: nothing of its runs (the
output and the intermediate steps live in React state only), and the configuration only
when it is in the URL. Its Share button gives that URL, ``/memory/c/<config>/playground``
(the config lz-compressed into the path). So the test follows the Share link, reloads it,
checks that the conversation id is still filled in, sends a second message, and checks
that the "Intermediate steps" panel shows the ``retrieve_memory`` step with the earlier
message and reply, loaded from memory: the history a person can see after a reload.

The browser side is ``tests/browser/playground.js`` (playwright-core driving Debian's
``chromium``; no browser download). It only reports what the page showed; the assertions
are here. Screenshots go to the test's tmp dir.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import browsers
from tests.servers import RunningServer

CONVERSATION = "playground-1"
FIRST = "My name is Ada and my cat is called Pixel."
SECOND = "What is my cat called?"


@pytest.fixture(scope="session")
def browser_tools() -> tuple[str, str]:
    """Paths of node and chromium; skips (fails under CI) when something is missing.

    Session-scoped and asked for first, so that a skip comes before the model is loaded.
    """
    return browsers.browser_tools()


def _drive(node: str, chromium: str, server: RunningServer, shots: Path) -> dict[str, Any]:
    options = {
        "baseUrl": server.url,
        "chromium": chromium,
        "conversationId": CONVERSATION,
        "first": FIRST,
        "second": SECOND,
        "screenshotDir": str(shots),
        "timeoutMs": 90_000,
    }
    return browsers.drive(node, "playground.js", options, timeout=240)


def _explain(report: dict[str, Any], server: RunningServer) -> str:
    log = server.log.read_text()[-3000:] if server.log else ""
    return (
        f"the playground failed at step {report.get('step')!r}: {report.get('error')}\n"
        f"failed responses: {report.get('failedResponses')}\n"
        f"console errors: {report.get('consoleErrors')}\n"
        f"screenshots: {report.get('screenshots')}\n"
        f"server log (end):\n{log}"
    )


def _turns(server: RunningServer) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.url}/v1/conversations/{CONVERSATION}/turns", timeout=30)
    assert response.status_code == 200, response.text
    turns: list[dict[str, Any]] = response.json()["turns"]
    return turns


def _normal(text: str) -> str:
    return " ".join(text.split())


def test_playground_chats_and_shows_the_history_after_reload(
    browser_tools: tuple[str, str], start_server: Callable[..., RunningServer], tmp_path: Path
) -> None:
    node, chromium = browser_tools
    server = start_server()
    shots = tmp_path / "screenshots"
    shots.mkdir()

    report = _drive(node, chromium, server, shots)

    assert report["error"] is None, _explain(report, server)
    assert report["failedResponses"] == [], _explain(report, server)
    for shot in report["screenshots"]:
        assert Path(shot).stat().st_size > 0

    # The reply the page showed is the reply the server stored, after the user's message.
    turns = _turns(server)
    assert [(t["turn_number"], t["role"]) for t in turns] == [
        (1, "user"),
        (2, "assistant"),
        (3, "user"),
        (4, "assistant"),
    ]
    assert turns[0]["content"] == FIRST
    assert turns[2]["content"] == SECOND
    first_reply = turns[1]["content"]
    assert _normal(first_reply)
    assert _normal(report["first"]["output"]) == _normal(first_reply)
    assert _normal(report["second"]["output"]) == _normal(turns[3]["content"])

    # After the reload the conversation id is still set: it travels in the shared URL.
    reloaded = report["reloaded"]
    assert "/memory/c/" in reloaded["url"]
    assert reloaded["url"].rstrip("/").endswith("/playground")
    assert reloaded["conversationId"] == CONVERSATION

    # The second run's intermediate steps show the history that memory gave the model: the
    # first message and reply as earlier turns, then the new message.
    steps = {step["name"]: step["text"] for step in report["second"]["steps"]}
    assert "retrieve_memory" in steps, steps.keys()
    # The step's output: the prepared turn (the request, the plan, the budgeted prompt).
    prepared = json.loads(steps["retrieve_memory"])["output"]
    assert prepared["request"]["conversation_id"] == CONVERSATION
    messages = prepared["prompt"]["messages"]
    history = [(message["type"], _normal(message["content"])) for message in messages]
    assert history[0][0] == "system"
    assert history[1:] == [
        ("human", FIRST),
        ("ai", _normal(first_reply)),
        ("human", SECOND),
    ]
