"""A real Open WebUI left at its default (no user headers) in front of a proxy key: refused.

Open WebUI forwards the signed-in user's id only with ``ENABLE_FORWARD_USER_INFO_HEADERS=True``
(off by default). Here it runs with it off, memory_chain with a proxy key: Open WebUI still
lists memory_chain's models (the model list needs the key, no user), but a chat is refused
with 403 and a message naming the setting to turn on, which Open WebUI passes to its client;
nothing is stored for anyone, and the model is never called. Before, every Open WebUI account
acted as one user (the namespace) and read the others' memory.

No browser: the chat is sent to Open WebUI's own OpenAI-style endpoint with the account's
token, as its page does. The fake Ollama stands in for the model.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memory_chain.local_llm.model import MODEL_NAME
from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer, server_env
from tests.webui.open_webui import OpenWebUI, require_open_webui

pytestmark = pytest.mark.slow

PROXY_KEY = "webui-proxy-key"


@pytest.fixture(scope="module")
def command() -> Path:
    return require_open_webui()


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeOllama]:
    fake = FakeOllama().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def memory_server(
    command: Path, fake_llm: FakeOllama, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("memory") / "data"
    env = server_env(
        data_dir, fake_llm.url, proxy_api_keys={PROXY_KEY: "webui"}, memory_tier3_enabled="false"
    )
    server = RunningServer(data_dir, env).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def open_webui(
    command: Path, memory_server: RunningServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpenWebUI]:
    webui = OpenWebUI(
        command=command,
        data_dir=tmp_path_factory.mktemp("open-webui-default") / "data",
        api_url=f"{memory_server.url}/v1",
        api_key=PROXY_KEY,
        forward_user_info=False,
    )
    webui.start()
    yield webui
    webui.stop()


def test_open_webui_without_user_headers_is_refused_and_told_what_to_set(
    open_webui: OpenWebUI, memory_server: RunningServer, fake_llm: FakeOllama
) -> None:
    signup = httpx.post(
        f"{open_webui.url}/api/v1/auths/signup",
        json={"name": "Ada", "email": "ada@example.com", "password": "ada-password-1"},
        timeout=60,
    )
    signup.raise_for_status()
    auth = {"Authorization": f"Bearer {signup.json()['token']}"}

    # The models still list: Open WebUI asks memory_chain with the key and no user.
    models = httpx.get(f"{open_webui.url}/api/models", headers=auth, timeout=120)
    assert models.status_code == 200, models.text
    assert MODEL_NAME in [model["id"] for model in models.json()["data"]], models.text

    chat = httpx.post(
        f"{open_webui.url}/openai/chat/completions",
        json={
            "model": MODEL_NAME,
            "messages": [{"role": "user", "content": "My blood type is AB-."}],
            "stream": False,
        },
        headers=auth,
        timeout=120,
    )
    assert chat.status_code == 403, chat.text
    assert "ENABLE_FORWARD_USER_INFO_HEADERS=True" in chat.text
    assert fake_llm.chats == 0
    with sqlite3.connect(memory_server.data_dir / "memory.db") as db:
        assert db.execute("SELECT count(*) FROM conversations").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM conversation_turns").fetchone() == (0,)
