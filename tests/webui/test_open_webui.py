"""A real Open WebUI in front of a real memory_chain server, driven in headless Chromium.

Everything is real but the model: Open WebUI (PyPI's ``open-webui``, pinned in
``scripts/setup-open-webui.sh``) runs on 127.0.0.1 with accounts on, talking to a
``memory-chain serve`` process through its OpenAI connection with one proxy key; Chromium
signs in and chats as a person would (``tests/browser/open_webui.js``). The chat model is
the fake Ollama of the fault tests, which answers ``Noted: <message>`` word by word and
quotes whatever memory put in its prompt, so a recalled fact shows in the page only if
memory_chain retrieved it; it answers Open WebUI's background tasks (title, tags,
follow-ups) with the JSON Open WebUI expects.

Ada tells a fact in one chat and asks for it in a second; she reloads and finds both chats;
Bob, another account behind the same key, asks the same question and gets nothing of Ada's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import browsers
from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer, server_env
from tests.webui.open_webui import Account, OpenWebUI, require_open_webui

pytestmark = pytest.mark.slow

PROXY_KEY = "webui-proxy-key"
NAMESPACE = "webui"
FACT = "My cat is called Pixel-7319."
QUESTION = "What is my cat called?"
SECRET = "Pixel-7319"


@pytest.fixture(scope="module")
def tools() -> tuple[str, str, Path]:
    """node, chromium and the ``open-webui`` command (skips, or fails under CI, without)."""
    node, chromium = browsers.browser_tools()
    return node, chromium, require_open_webui()


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeOllama]:
    fake = FakeOllama().start()
    fake.recall = True
    # Slow enough that Chromium, sampling every 25 ms, sees the reply grow word by word.
    fake.word_delay = 0.2
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def memory_server(
    tools: tuple[str, str, Path], fake_llm: FakeOllama, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("memory") / "data"
    env = server_env(data_dir, fake_llm.url, proxy_api_keys={PROXY_KEY: NAMESPACE})
    server = RunningServer(data_dir, env).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def accounts() -> dict[str, Account]:
    return {
        "ada": Account("Ada", "ada@example.com", "ada-password-1"),
        "bob": Account("Bob", "bob@example.com", "bob-password-1"),
    }


@pytest.fixture(scope="module")
def open_webui(
    tools: tuple[str, str, Path],
    memory_server: RunningServer,
    accounts: dict[str, Account],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OpenWebUI]:
    webui = OpenWebUI(
        command=tools[2],
        data_dir=tmp_path_factory.mktemp("open-webui") / "data",
        api_url=f"{memory_server.url}/v1",
        api_key=PROXY_KEY,
    )
    webui.start()
    webui.create_accounts(accounts["ada"], accounts["bob"])
    yield webui
    webui.stop()


def _drive(
    tools: tuple[str, str, Path],
    webui: OpenWebUI,
    account: Account,
    messages: list[str],
    shots: Path,
    *,
    reload: bool,
) -> dict[str, Any]:
    node, chromium, _ = tools
    shots.mkdir(parents=True, exist_ok=True)
    options = {
        "baseUrl": webui.url,
        "chromium": chromium,
        "email": account.email,
        "password": account.password,
        "messages": messages,
        "reload": reload,
        "screenshotDir": str(shots),
        "prefix": f"{account.name.lower()}-",
        "timeoutMs": 60_000,
    }
    report = browsers.drive(node, "open_webui.js", options, timeout=300)
    assert report["error"] is None, _explain(report, webui)
    return report


def _explain(report: dict[str, Any], webui: OpenWebUI) -> str:
    return (
        f"Open WebUI failed at step {report.get('step')!r}: {report.get('error')}\n"
        f"failed responses: {report.get('failedResponses')}\n"
        f"page errors: {report.get('pageErrors')}, console: {report.get('consoleErrors')}\n"
        f"screenshots: {report.get('screenshots')}\n"
        f"Open WebUI log (end):\n{webui.tail()}"
    )


@pytest.fixture(scope="module")
def ada(
    tools: tuple[str, str, Path],
    open_webui: OpenWebUI,
    accounts: dict[str, Account],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """What Ada saw: a fact told in one chat, asked for in a second, then a reload."""
    shots = tmp_path_factory.mktemp("screenshots")
    return _drive(tools, open_webui, accounts["ada"], [FACT, QUESTION], shots, reload=True)


def _memory(server: RunningServer, account: Account, path: str) -> Any:
    """memory_chain's API as Open WebUI calls it for ``account`` (proxy key + user header)."""
    headers = {"Authorization": f"Bearer {PROXY_KEY}", "X-OpenWebUI-User-Id": account.id}
    response = httpx.get(f"{server.url}{path}", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _stored(server: RunningServer, account: Account) -> dict[str, list[dict[str, Any]]]:
    """The account's conversations in memory_chain, each with its turns."""
    ids = [c["conversation_id"] for c in _memory(server, account, "/v1/conversations")]
    return {cid: _memory(server, account, f"/v1/conversations/{cid}/turns")["turns"] for cid in ids}


def test_the_reply_streams_into_the_page(ada: dict[str, Any]) -> None:
    first = ada["chats"][0]
    reply = first["reply"]
    assert reply.startswith(f"Noted: {FACT}")
    # Sampled every 25 ms: the page showed the reply growing, a word at a time.
    growing = [s.strip() for s in first["samples"] if s.strip() and s != reply]
    assert len(growing) >= 3, first["samples"]
    assert all(reply.startswith(sample) for sample in growing), first["samples"]


def test_a_second_chat_recalls_a_fact_from_the_first(
    ada: dict[str, Any], memory_server: RunningServer, accounts: dict[str, Account]
) -> None:
    first, second = ada["chats"]
    assert first["chatId"] != second["chatId"]
    assert second["reply"].startswith(f"Noted: {QUESTION}")
    # The fake model only knows the fact if memory put it in the prompt.
    assert SECRET in second["reply"], second["reply"]

    # Each Open WebUI chat is a memory_chain conversation of Ada's (namespaced) user.
    stored = _stored(memory_server, accounts["ada"])
    assert set(stored) == {first["chatId"], second["chatId"]}
    assert [t["content"] for t in stored[first["chatId"]]] == [FACT, first["reply"]]
    assert [t["content"] for t in stored[second["chatId"]]] == [QUESTION, second["reply"]]


def test_chats_are_still_there_after_a_reload(ada: dict[str, Any]) -> None:
    ids = [chat["chatId"] for chat in ada["chats"]]
    listed = {chat["id"]: chat["title"] for chat in ada["sidebarAfterReload"]}
    assert set(ids) <= set(listed), ada["sidebarAfterReload"]
    # Titles come from Open WebUI's title task, answered through memory_chain.
    assert listed[ids[0]] == "Fake: My cat is"
    assert listed[ids[1]] == "Fake: What is my"
    reopened = ada["reopened"]
    assert reopened["user"] == [FACT]
    assert reopened["assistant"] == [ada["chats"][0]["reply"]]


def test_background_tasks_are_answered_and_not_stored(
    ada: dict[str, Any],
    fake_llm: FakeOllama,
    memory_server: RunningServer,
    accounts: dict[str, Account],
) -> None:
    # Open WebUI asks for tags and follow-ups after the reply, in the background.
    wanted = {"title", "tags", "follow_ups"}
    deadline = time.monotonic() + 60
    while not wanted <= set(fake_llm.tasks) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert wanted <= set(fake_llm.tasks), fake_llm.tasks
    for account in accounts.values():
        for turns in _stored(memory_server, account).values():
            for turn in turns:
                assert "### Task" not in turn["content"]
                assert not turn["content"].startswith("{"), turn  # no task's JSON answer
    # Only the two chats' exchanges are stored: no task became a conversation.
    assert sum(len(t) for t in _stored(memory_server, accounts["ada"]).values()) == 4


def test_each_account_keeps_its_own_memory(
    ada: dict[str, Any],
    tools: tuple[str, str, Path],
    open_webui: OpenWebUI,
    memory_server: RunningServer,
    accounts: dict[str, Account],
    tmp_path: Path,
) -> None:
    bob = _drive(tools, open_webui, accounts["bob"], [QUESTION], tmp_path, reload=False)
    (chat,) = bob["chats"]
    assert chat["reply"].startswith(f"Noted: {QUESTION}")
    assert SECRET not in chat["reply"], chat["reply"]

    bobs = _stored(memory_server, accounts["bob"])
    assert list(bobs) == [chat["chatId"]]
    adas = _stored(memory_server, accounts["ada"])
    assert chat["chatId"] not in adas
    assert len(adas) == 2
    # Bob's namespace cannot see Ada's conversations, even by id.
    headers = {"Authorization": f"Bearer {PROXY_KEY}", "X-OpenWebUI-User-Id": accounts["bob"].id}
    foreign = httpx.get(
        f"{memory_server.url}/v1/conversations/{ada['chats'][0]['chatId']}",
        headers=headers,
        timeout=30,
    )
    assert foreign.status_code == 404


def test_nothing_left_the_machine(ada: dict[str, Any]) -> None:
    assert ada["blockedRequests"] == []
    assert ada["failedResponses"] == [], ada["failedResponses"]
