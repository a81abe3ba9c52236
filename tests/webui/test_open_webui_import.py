"""Bring your Open WebUI history: export a user's chats through Open WebUI's own API, import
them with ``memory-chain import``, and a new chat in Open WebUI gets an answer that needs an
old chat's detail.

Everything is real but the model: Open WebUI 0.12 (as in ``test_open_webui.py``) in front of
a ``memory-chain serve`` process behind one proxy key. The old chat is made in Open WebUI
without memory_chain (``POST /api/v1/chats/new``, as a chat held with another model before
memory_chain was connected): dated in 2024, with a regenerated reply (a branch) and an empty
reply. The fake model quotes what memory put in its prompt, so the detail shows in the answer
only if memory_chain retrieved it from the imported chat. Then the server's idle scan
consolidates the imported chat in the background, its summary dated 2024.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer, server_env
from tests.webui.open_webui import Account, OpenWebUI, require_open_webui

pytestmark = pytest.mark.slow

PROXY_KEY = "webui-import-key"
NAMESPACE = "webui"
DETAIL = "Marlowe-6620"
OLD = 1714035600  # 2024-04-25 09:00 UTC


def _old_chat() -> dict[str, Any]:
    """A chat as Open WebUI keeps it: a history tree, the branch last seen ending at m5."""

    def message(
        mid: str, parent: str | None, children: list[str], role: str, text: str, at: int
    ) -> dict[str, Any]:
        return {
            "id": mid, "parentId": parent, "childrenIds": children, "role": role,
            "content": text, "timestamp": at, "done": True,
        }  # fmt: skip

    messages = [
        message("m1", None, ["m2", "m3"], "user", f"My boat is moored at the {DETAIL} pier.", OLD),
        message("m2", "m1", [], "assistant", "Noted, a pier.", OLD + 10),
        message("m3", "m1", ["m4"], "assistant", "A fine place for a boat.", OLD + 20),
        message("m4", "m3", ["m5"], "user", "Remember that I sail on Sundays.", OLD + 60),
        message("m5", "m4", [], "assistant", "", OLD + 70),
    ]
    return {
        "title": "Sailing",
        "models": ["old-model"],
        "history": {"currentId": "m5", "messages": {m["id"]: m for m in messages}},
        "messages": messages,
        "timestamp": OLD * 1000,
    }


@pytest.fixture(scope="module")
def command() -> Path:
    return require_open_webui()


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeOllama]:
    fake = FakeOllama().start()
    fake.recall = True
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def memory_server(
    command: Path, fake_llm: FakeOllama, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("memory") / "data"
    env = server_env(data_dir, fake_llm.url, proxy_api_keys={PROXY_KEY: NAMESPACE})
    server = RunningServer(data_dir, env).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def webui(
    command: Path, memory_server: RunningServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpenWebUI]:
    running = OpenWebUI(
        command=command,
        data_dir=tmp_path_factory.mktemp("open-webui") / "data",
        api_url=f"{memory_server.url}/v1",
        api_key=PROXY_KEY,
    )
    running.start()
    yield running
    running.stop()


def _signed_in(webui: OpenWebUI, account: Account) -> httpx.Client:
    response = httpx.post(
        f"{webui.url}/api/v1/auths/signin",
        json={"email": account.email, "password": account.password},
        timeout=60,
    )
    response.raise_for_status()
    token = response.json()["token"]
    return httpx.Client(
        base_url=webui.url, headers={"Authorization": f"Bearer {token}"}, timeout=120
    )


def _import(server: RunningServer, path: Path) -> subprocess.CompletedProcess[str]:
    cli = str(Path(sys.executable).parent / "memory-chain")
    return subprocess.run(
        [cli, "import", str(path)],
        env={**os.environ, **server.env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.timeout(900)  # Open WebUI starts in about a minute; the idle scan runs each minute
def test_chats_exported_from_open_webui_are_recalled_in_a_new_chat(
    webui: OpenWebUI, memory_server: RunningServer, tmp_path: Path
) -> None:
    ada = Account("Ada", "ada@example.com", "ada-password-1")
    webui.create_accounts(ada)
    with _signed_in(webui, ada) as client:
        made = client.post("/api/v1/chats/new", json={"chat": _old_chat()})
        assert made.status_code == 200, made.text
        chat_id = made.json()["id"]

        # "Export All Chats": the API streams one chat per line; the page saves an array.
        streamed = client.get("/api/v1/chats/all")
        assert streamed.status_code == 200, streamed.text
        chats = [json.loads(line) for line in streamed.text.splitlines() if line.strip()]
        assert [c["id"] for c in chats] == [chat_id]
        export = tmp_path / "chat-export.json"
        export.write_text(json.dumps(chats))

        # The vector index is one process's: stop the server, import, start it again.
        memory_server.stop()
        first = _import(memory_server, export)
        again = _import(memory_server, export)
        memory_server.start()
        assert first.returncode == 0, first.stderr
        assert "imported 3 turns in 1 conversations (open-webui, 1 users)" in first.stdout
        assert "left out 1 empty messages" in first.stdout
        assert "imported 0 turns" in again.stdout, again.stdout

        # The chat is Ada's, under the id the proxy gives it, dated as it was.
        headers = {"Authorization": f"Bearer {PROXY_KEY}", "X-OpenWebUI-User-Id": ada.id}
        turns = httpx.get(
            f"{memory_server.url}/v1/conversations/{chat_id}/turns", headers=headers, timeout=30
        ).json()["turns"]
        assert [t["content"] for t in turns] == [
            f"My boat is moored at the {DETAIL} pier.",
            "A fine place for a boat.",
            "Remember that I sail on Sundays.",
        ]
        assert turns[0]["timestamp"].startswith("2024-04-25T09:00:00")
        facts = httpx.get(f"{memory_server.url}/v1/facts", headers=headers, timeout=30)
        assert facts.status_code == 200, facts.text
        assert facts.json()["facts"] == [], facts.text  # "Remember ..." was history

        # A new chat, through Open WebUI: the answer needs the imported chat's detail.
        models = client.get("/api/models").json()["data"]
        asked = client.post(
            "/api/chat/completions",
            json={
                "model": models[0]["id"],
                "messages": [{"role": "user", "content": "Where is my boat moored?"}],
                "stream": False,
            },
        )
        assert asked.status_code == 200, f"{asked.text}\n{webui.tail()}"
        answer = asked.json()["choices"][0]["message"]["content"]
        assert DETAIL in answer, answer

    # In the background, the server's idle scan consolidates the imported chat (idle since
    # 2024): its summary is dated by the turns it covers, not by today.
    deadline = time.monotonic() + 180
    summaries: list[dict[str, Any]] = []
    while not summaries and time.monotonic() < deadline:
        time.sleep(2)
        summaries = httpx.get(
            f"{memory_server.url}/v1/conversations/{chat_id}", headers=headers, timeout=30
        ).json()["summaries"]
    assert summaries, "the imported chat was not consolidated in the background"
    assert (summaries[0]["turn_range_start"], summaries[0]["turn_range_end"]) == (1, 3)
    assert summaries[0]["created_at"].startswith("2024-04-25T09:01:00")
