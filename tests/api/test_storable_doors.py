"""Text no database keeps, and numbers no column holds, are refused at every door: a 4xx.

A NUL character (PostgreSQL refuses it; SQLite keeps it, and the user's export then cannot
be imported), an unpaired surrogate (no UTF-8 encoding exists for it) and a ``seed`` out of
the model's range, sent through each door that stores what it is given: the REST bodies
(facts, turns, chat completions with their history and system messages, Open WebUI's
background tasks), LangServe's input and config, the MCP ``remember`` tool, the LangGraph
store's ``put`` (values, keys, namespace labels) and ``memory-chain import``. Each is refused
with a message that says what to fix, on SQLite and on PostgreSQL, and nothing is stored.

The app runs in process on the real stores; the chat routes' model is the stub LLM of
``benchmarks/loadgen.py`` (what is tested is refused before any model is called).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from langgraph.store.base import PutOp
from mcp.server.fastmcp.exceptions import ToolError

from benchmarks.loadgen import StubOllama
from memory_chain.api import create_app
from memory_chain.config import MemorySettings
from memory_chain.errors import InvalidInputError
from memory_chain.integrations.mcp import build_mcp_server
from memory_chain.integrations.store import MemoryStore
from memory_chain.local_llm.model import MODEL_NAME
from memory_chain.services import Services
from memory_chain.transfer import ImportFileError, import_jsonl
from tests.conftest import _fresh_postgres_database

pytestmark = pytest.mark.slow

NUL = "Lisbon\x00 in May"
LONE = "Lisbon \ud800 in May"
BAD_TEXTS = [NUL, LONE]


@pytest.fixture(scope="module")
def stub_llm_url() -> Iterator[str]:
    with StubOllama() as stub:
        yield stub.url


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, stub_llm_url: str
) -> Iterator[TestClient]:
    database = None
    if request.param == "postgresql":
        database = _fresh_postgres_database(request.getfixturevalue("postgres_url"))
    settings = MemorySettings(
        data_dir=tmp_path_factory.mktemp(f"doors-{request.param}") / "data",
        database_url=database,
        memory_tier3_enabled=False,
        llm_fallback="off",
        ollama_base_url=stub_llm_url,
        ollama_chat_model=MODEL_NAME,
        ollama_summary_model=MODEL_NAME,
        consolidation_learn_facts=False,
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as opened:
        yield opened


@pytest.fixture
def user(request: pytest.FixtureRequest) -> str:
    """A user of this test alone (so that "nothing stored" reads only what it did)."""
    return "u-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]


def _services(client: TestClient) -> Services:
    services: Services = client.app.state.services  # type: ignore[attr-defined]
    return services


def _send(client: TestClient, method: str, path: str, user: str, body: Any) -> httpx.Response:
    # ASCII JSON: an unpaired surrogate travels as its \u escape, as clients send it.
    content = json.dumps(body).encode()
    headers = {"X-User-Id": user, "Content-Type": "application/json"}
    return client.request(method, path, content=content, headers=headers)


def _refused(response: httpx.Response, *says: str) -> str:
    """The message of a 4xx JSON error (whatever its shape), holding each of ``says``."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    body = response.json()
    detail = body.get("detail")
    if isinstance(detail, list):  # a request body's fields
        message = "; ".join(str(item.get("msg", "")) for item in detail)
    else:
        message = str(detail or body.get("error", {}).get("message", ""))
    assert message.strip(), body
    for part in says:
        assert part in message, message
    return message


def _nothing_stored(client: TestClient, user: str) -> None:
    """No conversation, fact or store item of ``user`` (its export is empty)."""
    export = client.get("/v1/users/me/export", headers={"X-User-Id": user})
    assert export.status_code == 200, export.text
    assert export.text == "", export.text[:300]


# -- REST ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=["nul", "surrogate"])
def test_facts_refuse_it_in_text_and_subject(client: TestClient, user: str, bad: str) -> None:
    _refused(_send(client, "POST", "/v1/facts", user, {"text": bad}))
    _refused(_send(client, "POST", "/v1/facts", user, {"text": "I live in Porto.", "subject": bad}))
    _nothing_stored(client, user)
    added = _send(client, "POST", "/v1/facts", user, {"text": "I live in Porto."})
    assert added.status_code == 201, added.text
    fact = added.json()["fact"]
    _refused(_send(client, "PATCH", f"/v1/facts/{fact['id']}", user, {"text": bad}))
    listed = client.get("/v1/facts", headers={"X-User-Id": user}).json()["facts"]
    assert [f["text"] for f in listed] == ["I live in Porto."]


def test_the_message_says_what_and_where(client: TestClient, user: str) -> None:
    response = _send(client, "POST", "/v1/facts", user, {"text": NUL})
    _refused(response, "NUL character", "at position 6", "remove it")


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=["nul", "surrogate"])
def test_turns_refuse_it(client: TestClient, user: str, bad: str) -> None:
    body = {"turns": [{"role": "user", "content": "fine"}, {"role": "assistant", "content": bad}]}
    _refused(_send(client, "POST", "/v1/conversations/trip/turns", user, body))
    _nothing_stored(client, user)


def _chat(messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    return {"messages": messages, "conversation_id": "trip", **extra}


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=["nul", "surrogate"])
@pytest.mark.parametrize("where", ["message", "system", "history", "task"])
def test_chat_completions_refuse_it_anywhere(
    client: TestClient, user: str, bad: str, where: str
) -> None:
    messages = {
        "message": [{"role": "user", "content": bad}],
        "system": [{"role": "system", "content": bad}, {"role": "user", "content": "Hi"}],
        "history": [
            {"role": "user", "content": bad},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "And then?"},
        ],
        # An Open WebUI background task (a title): answered without memory, refused as well.
        "task": [{"role": "user", "content": f"### Task:\nGenerate a title for: {bad}"}],
    }[where]
    response = _send(client, "POST", "/v1/chat/completions", user, _chat(messages))
    _refused(response)
    assert "error" in response.json()  # OpenAI's shape
    _nothing_stored(client, user)


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=["nul", "surrogate"])
@pytest.mark.parametrize("path", ["/memory/invoke", "/memory/stream"])
@pytest.mark.parametrize("field", ["input", "system"])
def test_langserve_refuses_it_before_streaming(
    client: TestClient, user: str, bad: str, path: str, field: str
) -> None:
    chat_input = {"input": "Hi", "system": "Be brief."} | {field: bad}
    body = {"input": chat_input, "config": {"configurable": {"conversation_id": "trip"}}}
    _refused(_send(client, "POST", path, user, body))
    _nothing_stored(client, user)


# -- the seed --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [10**30, 2**31, -1])
def test_a_seed_out_of_range_is_refused_and_nothing_stored(
    client: TestClient, user: str, seed: int
) -> None:
    hi = [{"role": "user", "content": "Hi"}]
    response = _send(client, "POST", "/v1/chat/completions", user, _chat(hi, seed=seed))
    _refused(response, "from 0 to 2147483647")
    assert response.status_code == 422
    # LangServe's config field takes -1 as "unset" (its default): the others are refused.
    for path in ("/memory/invoke", "/memory/stream", "/memory/batch")[: 3 if seed >= 0 else 0]:
        config = {"configurable": {"conversation_id": "trip", "seed": seed}}
        body: dict[str, Any] = {"input": {"input": "Hi"}, "config": config}
        if path.endswith("batch"):
            body = {"inputs": [{"input": "Hi"}], "config": config}
        langserve = _send(client, "POST", path, user, body)
        _refused(langserve, "from 0 to 2147483647")
    _nothing_stored(client, user)


def test_a_seed_in_range_is_taken(client: TestClient, user: str) -> None:
    hi = [{"role": "user", "content": "Hi"}]
    response = _send(client, "POST", "/v1/chat/completions", user, _chat(hi, seed=2**31 - 1))
    assert response.status_code == 200, response.text
    config = {"configurable": {"conversation_id": "other", "seed": 0}}
    invoked = _send(
        client, "POST", "/memory/invoke", user, {"input": {"input": "Hi"}, "config": config}
    )
    assert invoked.status_code == 200, invoked.text


# -- MCP, the store, an import -------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=["nul", "surrogate"])
async def test_mcp_remember_refuses_it(client: TestClient, user: str, bad: str) -> None:
    server = build_mcp_server(_services(client), user=user)
    for arguments in ({"text": bad}, {"text": "I live in Porto.", "subject": bad}):
        with pytest.raises(ToolError) as raised:
            await server.call_tool("remember", arguments)
        assert "NUL character" in str(raised.value) or "nicode" in str(raised.value)
    _nothing_stored(client, user)


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=["nul", "surrogate"])
def test_store_put_refuses_it_in_values_keys_and_labels(
    client: TestClient, user: str, bad: str
) -> None:
    store = MemoryStore(_services(client))
    puts: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
        ((user, "notes"), "diet", {"text": bad}),
        ((user, "notes"), "diet", {"text": "vegan", "tags": ["fine", bad]}),
        ((user, "notes"), "diet", {"text": "vegan", bad: 1}),
        ((user, "notes"), "diet", {"text": "vegan", "meta": {"source": bad}}),
        ((user, "notes"), f"diet{bad}", {"text": "vegan"}),
        ((user, f"notes{bad}"), "diet", {"text": "vegan"}),
        ((user, "facts"), "0" * 32, {"text": bad}),
        ((user, "facts"), "0" * 32, {"text": "I live in Porto.", "subject": bad}),
    ]
    for namespace, key, value in puts:
        # Through batch: LangGraph's put() refuses a NUL in a label itself (not a surrogate).
        with pytest.raises(InvalidInputError) as raised:
            store.batch([PutOp(namespace, key, value, index=False)])
        assert "NUL character" in str(raised.value) or "not valid Unicode" in str(raised.value)
    _nothing_stored(client, user)


def _line(obj: dict[str, Any]) -> str:
    return json.dumps({"version": 3, **obj})  # ASCII: a surrogate is written escaped


def _conversation(user: str, **turn: Any) -> str:
    base = {"turn_number": 1, "role": "user", "content": "Hi", "timestamp": None, "tokens": None}
    return _line(
        {
            "format": "memory-chain/conversation",
            "conversation_id": "trip",
            "user_id": user,
            "turn_count": 1,
            "total_tokens": 0,
            "turns": [base | turn],
        }
    )


def _fact(user: str, **fields: Any) -> str:
    fact = {"format": "memory-chain/fact", "id": "5b0c6f1e9d7a4c3b8e2f1a0d9c8b7a65"}
    return _line(fact | {"user_id": user, "text": "Prefers window seats."} | fields)


def _item(user: str, value: dict[str, Any]) -> str:
    item = {"format": "memory-chain/store-item", "namespace": ["notes"], "key": "diet"}
    return _line(item | {"user_id": user, "value": value})


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda u: _fact(u, subject="seat\ud800"), "the fact's subject is not valid Unicode"),
        (lambda u: _fact(u, text="Window\x00 seats."), "NUL character"),
        (lambda u: _item(u, {"text": "vegan", "tags": ["x\x00"]}), "the value['tags'][0]"),
        (lambda u: _item(u, {"text": "vegan \ud800"}), "not valid Unicode"),
        (lambda u: _conversation(u, content="Hi\x00"), "NUL character"),
        (
            lambda u: _conversation(u, tokens={"total": 2**40}),
            "tokens.total must be a whole number from 0 to 2,147,483,647",
        ),
    ],
    ids=["fact-subject", "fact-text", "item-nul", "item-surrogate", "turn", "tokens"],
)
def test_import_refuses_it_with_its_line(
    client: TestClient, user: str, tmp_path: Path, make: Any, says: str
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(_item(user, {"text": "fine"}) + "\n" + make(user) + "\n", encoding="utf-8")
    with pytest.raises(ImportFileError) as raised:
        import_jsonl(_services(client).store, path, max_chars=100_000)
    assert raised.value.line == 2
    assert says in str(raised.value), str(raised.value)
    _nothing_stored(client, user)


def test_what_the_doors_take_exports_and_imports_again(
    client: TestClient, user: str, tmp_path: Path
) -> None:
    # After the refusals above: nothing a door took makes the user's export unimportable.
    for text in ("I live in Porto.", "Emoji 😀 and \u202e marks \t tabs."):
        assert _send(client, "POST", "/v1/facts", user, {"text": text}).status_code == 201
    turns = {"turns": [{"role": "user", "content": "Tabs\tand 😀"}]}
    assert _send(client, "POST", "/v1/conversations/trip/turns", user, turns).status_code == 201
    MemoryStore(_services(client)).put((user, "notes"), "diet", {"text": "vegan 🌱"})
    export = client.get("/v1/users/me/export", headers={"X-User-Id": user})
    path = tmp_path / "export.jsonl"
    path.write_text(export.text, encoding="utf-8")
    target = MemorySettings(
        data_dir=tmp_path / "target", memory_tier3_enabled=False, llm_fallback="off"
    )
    from memory_chain.services import open_services

    opened = open_services(target)
    try:
        report = import_jsonl(opened.store, path, max_chars=100_000)
    finally:
        opened.close()
    assert (report.conversations, report.facts, report.store_items) == (1, 2, 1)
