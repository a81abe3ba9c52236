"""Two users with API keys: neither can list, read, search, change or delete the other's data.

Alice tells the assistant a secret code; bob then tries every endpoint on her conversation.
Foreign conversations answer exactly like missing ones (404, never 403), alice's data is
unchanged afterwards, and nothing bob can search returns her turns. Conversation ids are each
user's own: bob writing under the id of alice's conversation creates his own conversation of
that name, exactly as under an id nobody uses, so a write cannot probe ids either. A trusted
front end's key (``proxy_api_keys``, as Open WebUI would use) keeps its own users apart by
their header, and none of them can reach alice; without the header it is refused (403), and a
LangServe config naming another user than the key's is refused too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langserve import RemoteRunnable

from tests.servers import RunningServer, server_env

TIMEOUT = 120.0
ALICE = {"Authorization": "Bearer key-a"}
BOB = {"Authorization": "Bearer key-b"}
SECRET = "PLUM-7319"
CODE_DIGITS = re.compile(r"(?<!\d)7319(?!\d)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
ALICES = "alice-vault"
ALICES_OTHER = "alice-recall"
QUESTION = "What is my vault code? Answer with the code only."
BOBS = "bob-garden"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_llm_url: str) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("isolation") / "data"
    env = server_env(
        data_dir,
        local_llm_url,
        api_keys={"key-a": "alice", "key-b": "bob"},
        proxy_api_keys={"key-webui": "webui"},
    )
    running = RunningServer(data_dir, env).start()
    yield running
    running.stop()


def _invoke_body(conversation_id: str, text: str, **configurable: str) -> dict[str, Any]:
    return {
        "input": {"input": text},
        "config": {"configurable": {"conversation_id": conversation_id, **configurable}},
    }


def _chat(server: RunningServer, headers: dict[str, str], conversation_id: str, text: str) -> str:
    response = httpx.post(
        f"{server.url}/memory/invoke",
        json=_invoke_body(conversation_id, text),
        headers=headers,
        timeout=TIMEOUT,
    )
    assert response.status_code == 200, response.text
    content: str = response.json()["output"]["content"]
    return content


def _tells_the_code(text: str) -> bool:
    """Whether ``text`` holds the code's digits as a number of their own.

    stream_log and stream_events carry run ids (UUIDs, whose hex may hold the digits between
    letters: "…-a7319f…") and timings in nanoseconds ("total_duration":524731982); the ids are
    left out and the digits must not touch other digits.
    """
    return CODE_DIGITS.search(UUID.sub(" ", text)) is not None


def _snapshot(server: RunningServer, conversation_id: str) -> dict[str, Any]:
    """Everything alice can read about a conversation."""
    with httpx.Client(base_url=server.url, headers=ALICE, timeout=30) as alice:
        detail = alice.get(f"/v1/conversations/{conversation_id}")
        turns = alice.get(f"/v1/conversations/{conversation_id}/turns")
        listed = alice.get("/v1/conversations")
    for response in (detail, turns, listed):
        assert response.status_code == 200, response.text
    return {"detail": detail.json(), "turns": turns.json(), "list": listed.json()}


def _settled(server: RunningServer) -> None:
    """Wait for alice's consolidation and for tier 3 to embed every turn."""
    deadline = time.monotonic() + 90
    while True:
        assert time.monotonic() < deadline, "consolidation or tier-3 backfill did not finish"
        detail = httpx.get(f"{server.url}/v1/conversations/{ALICES}", headers=ALICE).json()
        queued = httpx.get(f"{server.url}/health", timeout=10).json()["tier3"]["queued_turns"]
        if detail["summaries"] and not queued:
            return
        time.sleep(0.2)


@pytest.fixture(scope="module")
def alices_state(server: RunningServer) -> dict[str, Any]:
    """Alice's and bob's conversations, embedded into tier 3; alice's state afterwards."""
    # "Remember this" also files the message under alice's facts (consolidated at once).
    _chat(server, ALICE, ALICES, f"Please remember this: my vault code is {SECRET}.")
    _chat(server, ALICE, ALICES, "The vault is behind the painting of a lighthouse.")
    _chat(server, BOB, BOBS, "I grow tomatoes and basil in my garden.")
    _settled(server)
    # Alice's memory spans her conversations: asked elsewhere, the model recalls the code.
    assert SECRET in _chat(server, ALICE, ALICES_OTHER, QUESTION)
    _settled(server)
    return _snapshot(server, ALICES)


@pytest.fixture
def unchanged(server: RunningServer, alices_state: dict[str, Any]) -> Iterator[None]:
    """Check after the test that alice's conversation is exactly as it was."""
    yield
    assert _snapshot(server, ALICES) == alices_state


def _assert_not_found(response: httpx.Response) -> None:
    assert response.status_code == 404, f"{response.status_code} {response.text}"
    assert response.headers["content-type"].startswith("application/json")
    assert "not found" in response.json()["detail"]


def test_each_user_lists_only_their_own(
    server: RunningServer, alices_state: dict[str, Any]
) -> None:
    assert [c["conversation_id"] for c in alices_state["list"]] == [ALICES_OTHER, ALICES]
    bobs = httpx.get(f"{server.url}/v1/conversations", headers=BOB, timeout=30).json()
    assert BOBS in [c["conversation_id"] for c in bobs]
    assert not {ALICES, ALICES_OTHER} & {c["conversation_id"] for c in bobs}
    for status in ("active", "archived"):
        listed = httpx.get(
            f"{server.url}/v1/conversations", params={"status": status}, headers=BOB, timeout=30
        ).json()
        assert ALICES not in [c["conversation_id"] for c in listed]


FOREIGN = [
    ("GET", "/v1/conversations/{id}", None),
    ("GET", "/v1/conversations/{id}/turns", None),
    ("POST", "/v1/conversations/{id}/search", {"query": "vault code"}),
    ("POST", "/v1/conversations/{id}/consolidate", None),
    ("POST", "/v1/conversations/{id}/end", None),
    ("DELETE", "/v1/conversations/{id}", None),
    ("DELETE", "/v1/conversations/{id}?purge=true", None),
]


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(("method", "path", "body"), FOREIGN)
def test_a_foreign_conversation_is_404(
    server: RunningServer, method: str, path: str, body: dict[str, Any] | None
) -> None:
    foreign = httpx.request(
        method, server.url + path.format(id=ALICES), json=body, headers=BOB, timeout=TIMEOUT
    )
    missing = httpx.request(
        method, server.url + path.format(id="never-was"), json=body, headers=BOB, timeout=TIMEOUT
    )
    _assert_not_found(foreign)
    _assert_not_found(missing)
    # Same answer as a missing conversation: ids cannot be probed.
    assert foreign.json()["detail"].replace(ALICES, "?") == missing.json()["detail"].replace(
        "never-was", "?"
    )


def _bobs_turns(server: RunningServer, conversation_id: str) -> list[tuple[str, str]]:
    response = httpx.get(
        f"{server.url}/v1/conversations/{conversation_id}/turns", headers=BOB, timeout=30
    )
    assert response.status_code == 200, response.text
    return [(turn["role"], turn["content"]) for turn in response.json()["turns"]]


def _purge_bobs(server: RunningServer, conversation_id: str) -> None:
    response = httpx.delete(
        f"{server.url}/v1/conversations/{conversation_id}?purge=true", headers=BOB, timeout=30
    )
    assert response.status_code == 200, response.text


@pytest.mark.usefixtures("unchanged")
def test_an_id_in_use_by_another_user_answers_like_a_free_one(server: RunningServer) -> None:
    turns = {"turns": [{"role": "user", "content": "My shed key is under the mat."}]}
    answers = {}
    for conversation_id in (ALICES, "nobody-uses-this"):
        response = httpx.post(
            f"{server.url}/v1/conversations/{conversation_id}/turns",
            json=turns,
            headers=BOB,
            timeout=30,
        )
        stored = [(t["turn_number"], t["content"]) for t in response.json()["turns"]]
        answers[conversation_id] = (response.status_code, stored)
        assert _bobs_turns(server, conversation_id) == [("user", "My shed key is under the mat.")]
    # The same answer (201, turn 1) whether alice uses the id or nobody does.
    assert answers[ALICES] == answers["nobody-uses-this"]
    assert answers[ALICES][0] == 201
    # OpenAI-style chat under alice's id (a header, as a client would name it) is bob's own.
    chat = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": QUESTION}]},
        headers={**BOB, "X-Conversation-Id": ALICES},
        timeout=TIMEOUT,
    )
    assert chat.status_code == 200, chat.text
    assert SECRET not in chat.text
    assert chat.headers["x-conversation-id"] == ALICES
    assert [role for role, _ in _bobs_turns(server, ALICES)] == ["user", "user", "assistant"]
    for conversation_id in (ALICES, "nobody-uses-this"):
        _purge_bobs(server, conversation_id)


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("endpoint", ["invoke", "batch", "stream", "stream_log", "stream_events"])
def test_bob_writing_under_alices_id_writes_his_own(server: RunningServer, endpoint: str) -> None:
    body = _invoke_body(ALICES, "Hi, what is the vault code?")
    if endpoint == "batch":
        body = {"inputs": [body["input"]], "config": body["config"]}
    parts: list[str] = []
    with httpx.stream(
        "POST", f"{server.url}/memory/{endpoint}", json=body, headers=BOB, timeout=TIMEOUT
    ) as response:
        try:
            parts.extend(response.iter_text())
        except httpx.RemoteProtocolError:
            parts.append("\n<the server dropped the connection mid-stream>")
    text = "".join(parts)
    assert response.status_code == 200, f"{response.status_code} {text}"
    assert SECRET not in text
    assert not _tells_the_code(text)
    # The exchange is stored in bob's conversation of that name; alice's is unchanged.
    assert _bobs_turns(server, ALICES)[0] == ("user", "Hi, what is the vault code?")
    _purge_bobs(server, ALICES)


@pytest.mark.usefixtures("unchanged")
def test_the_config_cannot_choose_the_user(server: RunningServer) -> None:
    # Naming alice in the config with bob's key is refused, not served as either of them.
    for conversation_id in (ALICES, "bob-claims-alice"):
        body = _invoke_body(conversation_id, "What is the vault code?", user_id="alice")
        response = httpx.post(
            f"{server.url}/memory/invoke", json=body, headers=BOB, timeout=TIMEOUT
        )
        assert response.status_code == 403, response.text
        assert "acts as 'bob'" in response.json()["detail"]
        assert SECRET not in response.text
    bobs = httpx.get(f"{server.url}/v1/conversations", headers=BOB, timeout=30).json()
    alices = httpx.get(f"{server.url}/v1/conversations", headers=ALICE, timeout=30).json()
    for listed in (bobs, alices):
        assert "bob-claims-alice" not in [c["conversation_id"] for c in listed]
    assert ALICES not in [c["conversation_id"] for c in bobs]


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("header", ["X-User-Id", "X-OpenWebUI-User-Id"])
def test_user_headers_cannot_impersonate(server: RunningServer, header: str) -> None:
    headers = {**BOB, header: "alice"}
    response = httpx.get(f"{server.url}/v1/conversations/{ALICES}", headers=headers, timeout=30)
    _assert_not_found(response)
    listed = httpx.get(f"{server.url}/v1/conversations", headers=headers, timeout=30).json()
    assert ALICES not in [c["conversation_id"] for c in listed]
    # Without a key the header is no way in either.
    anonymous = httpx.get(f"{server.url}/v1/conversations", headers={header: "alice"}, timeout=30)
    assert anonymous.status_code == 401


@pytest.mark.usefixtures("unchanged")
def test_bobs_searches_never_return_alices_turns(server: RunningServer) -> None:
    query = f"What is the vault code? {SECRET}"
    retriever: RemoteRunnable[str, list[Document]] = RemoteRunnable(
        f"{server.url}/memory/retriever/", headers=BOB, timeout=TIMEOUT
    )
    configs: list[RunnableConfig | None] = [None, {"configurable": {"conversation_id": BOBS}}]
    for config in configs:
        docs = retriever.invoke(query, config)
        assert {doc.metadata["user_id"] for doc in docs} <= {"bob"}, config
        assert not any(SECRET in doc.page_content for doc in docs), config
    # Naming alice in the config is refused.
    claimed = httpx.post(
        f"{server.url}/memory/retriever/invoke",
        json={"input": query, "config": {"configurable": {"user_id": "alice"}}},
        headers=BOB,
        timeout=TIMEOUT,
    )
    assert claimed.status_code == 403, claimed.text
    assert SECRET not in claimed.text
    # Filtering on alice's conversation finds nothing (or is refused), never her turns.
    response = httpx.post(
        f"{server.url}/memory/retriever/invoke",
        json={"input": query, "config": {"configurable": {"conversation_id": ALICES}}},
        headers=BOB,
        timeout=TIMEOUT,
    )
    if response.status_code != 404:
        assert response.status_code == 200, response.text
        assert response.json()["output"] == []
    batch = httpx.post(
        f"{server.url}/memory/retriever/batch",
        json={"inputs": [query, "lighthouse painting"]},
        headers=BOB,
        timeout=TIMEOUT,
    )
    assert batch.status_code == 200, batch.text
    assert SECRET not in batch.text
    assert "lighthouse" not in batch.text

    found = httpx.post(
        f"{server.url}/v1/conversations/{BOBS}/search",
        json={"query": query, "k": 50},
        headers=BOB,
        timeout=TIMEOUT,
    ).json()
    assert found["results"]
    assert not any(SECRET in hit["content"] for hit in found["results"])
    assert not any("vault" in hit["content"].lower() for hit in found["results"])

    # Alice's own retriever finds it: the secret is there to be found.
    alices: RemoteRunnable[str, list[Document]] = RemoteRunnable(
        f"{server.url}/memory/retriever/", headers=ALICE, timeout=TIMEOUT
    )
    assert any(SECRET in doc.page_content for doc in alices.invoke(query))


@pytest.mark.usefixtures("unchanged")
def test_bobs_chat_memory_never_holds_alices_turns(server: RunningServer) -> None:
    # The same question that makes alice's memory answer with her code (see alices_state).
    reply = _chat(server, BOB, BOBS, QUESTION)
    assert SECRET not in reply
    assert not _tells_the_code(reply)


UNAUTHENTICATED = [
    ("GET", "/v1/conversations", None),
    ("GET", f"/v1/conversations/{ALICES}", None),
    ("GET", f"/v1/conversations/{ALICES}/turns", None),
    ("POST", f"/v1/conversations/{ALICES}/search", {"query": "vault"}),
    ("POST", f"/v1/conversations/{ALICES}/consolidate", None),
    ("POST", f"/v1/conversations/{ALICES}/end", None),
    ("DELETE", f"/v1/conversations/{ALICES}", None),
    ("DELETE", f"/v1/conversations/{ALICES}?purge=true", None),
    ("POST", "/memory/invoke", _invoke_body(ALICES, "hi")),
    (
        "POST",
        "/memory/batch",
        {"inputs": [{"input": "hi"}], "config": _invoke_body(ALICES, "")["config"]},
    ),
    ("POST", "/memory/stream", _invoke_body(ALICES, "hi")),
    ("POST", "/memory/stream_log", _invoke_body(ALICES, "hi")),
    ("POST", "/memory/stream_events", _invoke_body(ALICES, "hi")),
    ("POST", "/memory/retriever/invoke", {"input": "vault"}),
    ("POST", "/memory/retriever/batch", {"inputs": ["vault"]}),
]


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(
    "credentials",
    [{}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}, {"Authorization": "key-a"}],
    ids=["no-key", "wrong-bearer", "wrong-x-api-key", "no-scheme"],
)
@pytest.mark.parametrize(("method", "path", "body"), UNAUTHENTICATED)
def test_every_endpoint_needs_a_valid_key(
    server: RunningServer,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    credentials: dict[str, str],
) -> None:
    response = httpx.request(
        method, server.url + path, json=body, headers=credentials, timeout=TIMEOUT
    )
    assert response.status_code == 401, f"{response.status_code} {response.text}"
    assert "API key" in response.json()["detail"]
    assert response.headers["www-authenticate"] == "Bearer"


def test_x_api_key_works_like_a_bearer_key(
    server: RunningServer, alices_state: dict[str, Any]
) -> None:
    response = httpx.get(
        f"{server.url}/v1/conversations/{ALICES}", headers={"X-API-Key": "key-a"}, timeout=30
    )
    assert response.status_code == 200, response.text
    assert response.json() == alices_state["detail"]


WEBUI = {"Authorization": "Bearer key-webui"}


def _as_webui_user(user: str | None) -> dict[str, str]:
    return {**WEBUI, "X-OpenWebUI-User-Id": user} if user else dict(WEBUI)


@pytest.mark.usefixtures("unchanged")
def test_a_proxy_key_keeps_its_users_apart_by_header(server: RunningServer) -> None:
    # Open WebUI's request: its one key, the user's and the chat's forwarded ids.
    chat = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "Say hello."}]},
        headers={**_as_webui_user("u-1"), "X-OpenWebUI-Chat-Id": "webui-chat-1"},
        timeout=TIMEOUT,
    )
    assert chat.status_code == 200, chat.text
    path = f"{server.url}/v1/conversations/webui-chat-1"
    mine = httpx.get(path, headers=_as_webui_user("u-1"), timeout=30)
    assert mine.status_code == 200, mine.text
    listed = httpx.get(f"{server.url}/v1/conversations", headers=_as_webui_user("u-1"), timeout=30)
    assert [c["conversation_id"] for c in listed.json()] == ["webui-chat-1"]
    # Another Open WebUI user and alice's own key: not found.
    for headers in (_as_webui_user("u-2"), ALICE):
        _assert_not_found(httpx.get(path, headers=headers, timeout=30))
    # The key without a user is no user at all (not one shared by the proxy's users).
    for route in (path, f"{server.url}/v1/conversations", f"{server.url}/v1/me"):
        anonymous = httpx.get(route, headers=_as_webui_user(None), timeout=30)
        assert anonymous.status_code == 403, anonymous.text
        assert "ENABLE_FORWARD_USER_INFO_HEADERS=True" in anonymous.json()["detail"]
    # The proxy's "alice" is webui:alice, not alice.
    _assert_not_found(
        httpx.get(f"{server.url}/v1/conversations/{ALICES}", headers=_as_webui_user("alice"))
    )
    too_long = httpx.get(path, headers=_as_webui_user("u" * 125), timeout=30)
    assert too_long.status_code == 422, too_long.text
    assert "too long once namespaced" in too_long.json()["detail"]
