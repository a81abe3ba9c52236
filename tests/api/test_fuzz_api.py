"""Fuzzing the HTTP API of a real server: no input may cause a 5xx, none may change stored data.

Schemathesis generates requests for every operation of ``/openapi.json`` (valid and invalid
ones) against ``memory-chain serve`` on 127.0.0.1 with API keys on, and checks
``not_a_server_error``: with a key (so the authenticated code runs), and without one (no
protected endpoint may answer 2xx). The routes that call the LLM (``/memory`` invoke, batch
and streams, ``/v1/chat/completions`` and consolidation) get few examples: each valid one
costs a model call.

Hand-written cases cover what a generator rarely produces: bodies that are not UTF-8, JSON
nested 10,000 levels deep, SQL, LIKE and FTS5 metacharacters in search queries, path
traversal in ids, out-of-range pagination and an oversize body. Every such case must get a 4xx
(or a 2xx where the request is valid), never a 5xx, and leave the stored conversation as it
was.

Two users, each with a key and data of their own: ``owner`` holds the seeded conversation that
must never change, and a fact; ``fuzzer`` is the key the generated requests use (so a lucky
guess of the owner's conversation id is also an isolation check), and owns a conversation of
its own (and a fact in it) that the generator is pointed at half of the time. The generated
requests include the caller's own-data routes (``/v1/facts``, ``/v1/users/me/export`` and
``DELETE /v1/users/me``, which erases the fuzzer, never the owner). Every response to them is
checked for cross-user reads too (:func:`no_owner_data`): the owner's turns and fact carry a
marker that no request of the fuzzer (or without a key) may ever get back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from memory_chain.api import create_app
from tests.servers import RunningServer, server_env

# Schemathesis' own strategies draw from `random`; Hypothesis warns about it, not about us.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module:hypothesis.errors.HypothesisDeprecationWarning"
)

OWNER_KEY = "fuzz-owner-key"
FUZZER_KEY = "fuzz-fuzzer-key"
OWNER = {"Authorization": f"Bearer {OWNER_KEY}"}
FUZZER = {"Authorization": f"Bearer {FUZZER_KEY}"}
SEED = "fuzz-seed"
#: In the owner's turns and fact only: a response to anyone else that holds it leaked them.
OWNER_MARKER = "owner-only-7c1f9a"
FUZZER_OWN = "fuzzer-own"
#: The id of the fuzzer's own fact (filled when the server is seeded).
OWN_FACT: list[str] = []
TIMEOUT = 300.0
MAX_REQUEST_BYTES = 262_144

# Operations that run the chat model (or may): few examples there.
LLM_PATHS = (
    r"^/memory/(c/\{config_hash\}/)?(invoke|batch|stream|stream_log|stream_events)$"
    r"|/consolidate$|^/v1/chat/completions$"
)
# Operations LangServe leaves open whatever the keys (schemas of the runnables) and /health.
PUBLIC_PATHS = ("/health", "/input_schema", "/output_schema", "/config_schema")

FUZZ_SETTINGS = {
    "deadline": None,
    "database": None,  # no .hypothesis/ folder in the work tree
    "suppress_health_check": list(HealthCheck),
}

JSON_POSTS = (
    f"/v1/conversations/{SEED}/search",
    "/memory/invoke",
    "/memory/batch",
    "/memory/stream",
    "/memory/stream_log",
    "/memory/stream_events",
    "/memory/retriever/invoke",
    "/memory/retriever/batch",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_llm_url: str) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("fuzz") / "data"
    keys = {OWNER_KEY: "owner", FUZZER_KEY: "fuzzer"}
    # Facts learnt at consolidation would change the seeded user's facts after the snapshot:
    # this tests the API's robustness, not extraction (tests/facts/test_extract.py).
    env = server_env(
        data_dir,
        local_llm_url,
        api_keys=keys,
        max_request_bytes=MAX_REQUEST_BYTES,
        consolidation_learn_facts=False,
    )
    running = RunningServer(data_dir, env).start()
    yield running
    running.stop()


def _chat(server: RunningServer, headers: dict[str, str], conversation: str, text: str) -> None:
    body = {"input": {"input": text}, "config": {"configurable": {"conversation_id": conversation}}}
    response = httpx.post(
        f"{server.url}/memory/invoke", json=body, headers=headers, timeout=TIMEOUT
    )
    assert response.status_code == 200, response.text


def _snapshot(server: RunningServer) -> dict[str, Any]:
    """What is stored of the seeded conversation, as its owner reads it."""
    base = f"{server.url}/v1/conversations/{SEED}"
    turns = httpx.get(f"{base}/turns", params={"limit": 500}, headers=OWNER, timeout=30)
    info = httpx.get(base, headers=OWNER, timeout=30)
    assert turns.status_code == 200, turns.text
    assert info.status_code == 200, info.text
    facts = httpx.get(
        f"{server.url}/v1/facts",
        params={"include": ["superseded", "dismissed"]},
        headers=OWNER,
        timeout=30,
    )
    assert facts.status_code == 200, facts.text
    detail = info.json()
    return {
        "facts": facts.json()["facts"],
        "turns": turns.json()["turns"],
        "status": detail["status"],
        "turn_count": detail["turn_count"],
        "summaries": detail["summaries"],
    }


@pytest.fixture(scope="module")
def seeded(server: RunningServer) -> dict[str, Any]:
    """The owner's conversation (two exchanges) and the fuzzer's own; the owner's snapshot."""
    _chat(
        server,
        OWNER,
        SEED,
        f"My cat Pixel likes tuna; DROP everything else from the list. {OWNER_MARKER}",
    )
    _chat(
        server,
        OWNER,
        SEED,
        f"Remember: 100% of the budget_2024 goes to LIKE-minded folks ({OWNER_MARKER}).",
    )
    _chat(server, FUZZER, FUZZER_OWN, "Please remember this: the fuzzer says hello.")
    own = httpx.get(f"{server.url}/v1/facts", headers=FUZZER, timeout=30).json()["facts"]
    OWN_FACT[:] = [fact["id"] for fact in own]
    snapshot = _snapshot(server)
    assert snapshot["turn_count"] == 4
    assert len(snapshot["facts"]) == 1  # the owner's "Remember: ..."
    assert OWNER_MARKER in snapshot["facts"][0]["text"]
    return snapshot


@pytest.fixture
def unchanged(server: RunningServer, seeded: dict[str, Any]) -> Iterator[None]:
    """Checks, after the test, that the seeded conversation is stored exactly as before."""
    yield
    assert _snapshot(server) == seeded


# The schema is built from the app at collection time (building it does no I/O), so pytest
# sees one test per operation; test_the_served_schema_is_the_one_fuzzed checks that the running
# server serves this very schema at /openapi.json. (Schemathesis' `from_fixture`, which would
# load it from the server, fails on pytest 9.2: it sets `Function._nodeid`, which is gone.)
APP_SCHEMA = create_app().openapi()
schema = schemathesis.openapi.from_dict(APP_SCHEMA)
fast_operations = schema.exclude(path_regex=LLM_PATHS)
llm_operations = schema.include(path_regex=LLM_PATHS)


def _aim_at_own_conversation(case: Any, aim: bool) -> None:
    """Point half of the generated ids at a conversation that exists, so handlers run fully.

    Random ids almost never name a stored conversation (404), nor pass the id check in a
    LangServe config (4xx before the chain runs); aimed ones reach the stores and the model.
    """
    if not aim:
        return
    if "conversation_id" in (case.path_parameters or {}):
        case.path_parameters["conversation_id"] = FUZZER_OWN
    if "fact_id" in (case.path_parameters or {}) and OWN_FACT:
        case.path_parameters["fact_id"] = OWN_FACT[0]  # the fuzzer's "remember this"
    body = case.body
    if isinstance(body, dict) and case.path.startswith("/memory/"):
        config = body.get("config")
        config = config if isinstance(config, dict) else {}
        body["config"] = {**config, "configurable": {"conversation_id": FUZZER_OWN}}


@schemathesis.check
def no_owner_data(ctx: Any, response: Any, case: Any) -> bool | None:
    """No response to the fuzzer (or to no key) holds anything of the owner's data."""
    if OWNER_MARKER in response.text:
        raise AssertionError(
            f"{case.method} {case.path} answered {response.status_code} with the owner's data: "
            f"{response.text[:300]}"
        )
    return None


CHECKS = [not_a_server_error, no_owner_data]


def test_the_served_schema_is_the_one_fuzzed(server: RunningServer) -> None:
    served = httpx.get(f"{server.url}/openapi.json", timeout=TIMEOUT)
    assert served.status_code == 200
    assert served.json() == APP_SCHEMA


@fast_operations.parametrize()
@fast_operations.given(aim=st.booleans())
@settings(max_examples=40, **FUZZ_SETTINGS)
def test_no_server_error_with_a_key(
    case: Any, aim: bool, server: RunningServer, seeded: dict[str, Any]
) -> None:
    _aim_at_own_conversation(case, aim)
    case.call_and_validate(base_url=server.url, headers=FUZZER, checks=CHECKS, timeout=TIMEOUT)


@llm_operations.parametrize()
@llm_operations.given(aim=st.booleans())
@settings(max_examples=4, **FUZZ_SETTINGS)
def test_no_server_error_on_llm_routes(
    case: Any, aim: bool, server: RunningServer, seeded: dict[str, Any]
) -> None:
    _aim_at_own_conversation(case, aim)
    case.call_and_validate(base_url=server.url, headers=FUZZER, checks=CHECKS, timeout=TIMEOUT)


@schema.parametrize()
@settings(max_examples=8, **FUZZ_SETTINGS)
def test_no_server_error_and_no_access_without_a_key(
    case: Any, server: RunningServer, seeded: dict[str, Any]
) -> None:
    response = case.call_and_validate(base_url=server.url, checks=CHECKS, timeout=TIMEOUT)
    if not case.path.endswith(PUBLIC_PATHS):
        assert not 200 <= response.status_code < 300, (case.method, case.path, response.text)


def test_the_leak_check_sees_the_owners_data(server: RunningServer, seeded: dict[str, Any]) -> None:
    # The check can fail: the owner's own reads carry the marker (and it raises on them).
    for path in ("/v1/facts", f"/v1/conversations/{SEED}/turns", "/v1/users/me/export"):
        response = httpx.get(f"{server.url}{path}", headers=OWNER, timeout=TIMEOUT)
        assert response.status_code == 200, response.text
        with pytest.raises(AssertionError, match="the owner's data"):
            no_owner_data(None, response, type("Case", (), {"method": "GET", "path": path}))


def test_seeded_conversation_unchanged_after_fuzzing(
    server: RunningServer, seeded: dict[str, Any]
) -> None:
    # Runs after the generated tests above (pytest keeps the file's order).
    assert _snapshot(server) == seeded


def _post(server: RunningServer, path: str, content: bytes) -> httpx.Response:
    headers = {**OWNER, "Content-Type": "application/json", "X-Conversation-Id": SEED}
    return httpx.post(f"{server.url}{path}", content=content, headers=headers, timeout=TIMEOUT)


def _is_client_error(response: httpx.Response) -> bool:
    return 400 <= response.status_code < 500


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("path", JSON_POSTS)
def test_body_that_is_not_utf8_is_a_client_error(server: RunningServer, path: str) -> None:
    body = b'{"query": "caf\xe9 \xff\xfe", "input": {"input": "caf\xe9 \xff"}}'
    response = _post(server, path, body)
    assert _is_client_error(response), (response.status_code, response.text)


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("path", JSON_POSTS)
@pytest.mark.parametrize("shape", ["array", "object"])
def test_json_nested_10000_levels_is_a_client_error(
    server: RunningServer, path: str, shape: str
) -> None:
    depth = 10_000
    nested = "[" * depth + "]" * depth if shape == "array" else '{"a":' * depth + "1" + "}" * depth
    body = f'{{"query": {nested}, "input": {nested}}}'.encode()
    response = _post(server, path, body)
    assert _is_client_error(response), (response.status_code, response.text)


SEARCH_QUERIES = [
    "'; DROP TABLE turns; --",
    "' OR '1'='1",
    '"; DELETE FROM conversations; --',
    "%_",
    "%",
    "_",
    "\\",
    '"NEAR(',
    "NEAR(tuna cat",
    "*",
    "tuna*",
    ":",
    "content:tuna",
    "^",
    '"',
    "tuna AND NOT OR",
    "()",
    "-",
    "a\u0000b",
    "\U0001f600 \u202e",
]


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("query", SEARCH_QUERIES)
def test_search_metacharacters_are_plain_text(server: RunningServer, query: str) -> None:
    response = httpx.post(
        f"{server.url}/v1/conversations/{SEED}/search",
        json={"query": query, "k": 10},
        headers=OWNER,
        timeout=TIMEOUT,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degraded"] == []
    snapshot = _snapshot(server)
    stored = {turn["content"] for turn in snapshot["turns"]}
    # The owner's "Remember: ..." consolidates at once: its summary is stored too.
    stored |= {summary["summary_text"] for summary in snapshot["summaries"]}
    for hit in body["results"]:
        assert hit["content"] in stored
        # A keyword (tier 2) hit must share a word with the query: wildcards stay literal.
        if "tier2-turns" in hit["sources"] and query in {"%_", "%", "_", "*", "\\", "^"}:
            pytest.fail(f"{query!r} matched {hit['content']!r} as a keyword: it was a wildcard")


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("query", SEARCH_QUERIES)
def test_retriever_metacharacters_are_plain_text(server: RunningServer, query: str) -> None:
    body = {"input": query, "config": {"configurable": {"conversation_id": SEED}}}
    response = httpx.post(
        f"{server.url}/memory/retriever/invoke", json=body, headers=OWNER, timeout=TIMEOUT
    )
    assert response.status_code == 200, response.text


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/v1/conversations/{SEED}/search", b'{"query": "\\ud800 tuna"}'),
        (f"/v1/conversations/{SEED}/search", b'{"query": "tuna", "k": "\\udfff"}'),
        ("/memory/retriever/invoke", b'{"input": "\\ud800 tuna"}'),
        ("/memory/invoke", b'{"input": {"input": "\\udfff hello"}}'),
    ],
    ids=["search-query", "search-k", "retriever", "chat"],
)
def test_lone_surrogates_are_not_server_errors(
    server: RunningServer, path: str, body: bytes
) -> None:
    # Valid JSON (an escaped lone surrogate) that decodes to a str UTF-8 cannot encode.
    response = _post(server, path, body)
    assert response.status_code < 500, (response.status_code, response.text)


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("path", ["/memory/stream", "/memory/stream_log", "/memory/stream_events"])
@pytest.mark.parametrize("message", ["", "   \n\t"])
def test_stream_of_an_empty_message_is_refused_before_streaming(
    server: RunningServer, path: str, message: str
) -> None:
    # LangServe sends 200 first and reports an error raised inside the chain as an SSE
    # "error" event with status_code 500, then drops the connection: a bad message must be
    # refused with a 4xx before the stream starts.
    body = {"input": {"input": message}, "config": {"configurable": {"conversation_id": SEED}}}
    with httpx.stream(
        "POST", f"{server.url}{path}", json=body, headers=OWNER, timeout=TIMEOUT
    ) as response:
        try:
            text = response.read().decode()
        except httpx.HTTPError as exc:
            pytest.fail(f"{path} answered {response.status_code}, then broke off: {exc!r}")
    assert _is_client_error(response), (response.status_code, text[:300])


TRAVERSAL_IDS = [
    "..%2F..%2Fetc",
    "..%2F..%2Fetc%2Fpasswd",
    "..",
    "%2e%2e",
    "%2e%2e%2f",
    f"{SEED}%2F..%2F{SEED}",
    f"..%2F{SEED}",
    f"{SEED}%00",
    "%C0%AE%C0%AE",
    "~root",
    "a" * 129,
]
ID_ROUTES = [
    ("GET", ""),
    ("GET", "/turns"),
    ("POST", "/search"),
    ("POST", "/consolidate"),
    ("POST", "/end"),
    ("DELETE", "?purge=true"),
]


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("conversation", TRAVERSAL_IDS)
def test_path_traversal_in_conversation_ids(server: RunningServer, conversation: str) -> None:
    for method, suffix in ID_ROUTES:
        # Sent as written: httpx would otherwise resolve the dot segments itself.
        url = httpx.URL(f"{server.url}/v1/conversations/{conversation}{suffix}")
        json_body = {"query": "tuna"} if suffix == "/search" else None
        request = httpx.Request(method, url, headers=OWNER, json=json_body)
        with httpx.Client(timeout=TIMEOUT) as client:
            response = client.send(request)
        assert 300 <= response.status_code < 500, (method, url, response.status_code)
        assert response.status_code not in (200, 202), (method, url, response.text)


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(
    "conversation", ["../../etc/passwd", "..\\..\\windows", "/etc/passwd", "a/../b", ""]
)
def test_path_traversal_in_langserve_conversation(server: RunningServer, conversation: str) -> None:
    body = {"input": {"input": "hi"}, "config": {"configurable": {"conversation_id": conversation}}}
    by_config = httpx.post(f"{server.url}/memory/invoke", json=body, headers=OWNER, timeout=TIMEOUT)
    assert _is_client_error(by_config), (by_config.status_code, by_config.text)
    if conversation:
        headers = {**OWNER, "X-Conversation-Id": conversation}
        by_header = httpx.post(
            f"{server.url}/memory/invoke",
            json={"input": {"input": "hi"}},
            headers=headers,
            timeout=TIMEOUT,
        )
        assert _is_client_error(by_header), (by_header.status_code, by_header.text)


@pytest.mark.parametrize(
    "path",
    [
        "/memory/playground/..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/memory/playground/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/memory/playground/assets/..%2F..%2F..%2Fserver.py",
    ],
)
def test_path_traversal_in_playground_files(server: RunningServer, path: str) -> None:
    response = httpx.get(httpx.URL(server.url + path), timeout=TIMEOUT)
    assert _is_client_error(response), (response.status_code, response.text[:200])
    assert "root:" not in response.text
    assert "langserve" not in response.text.lower()


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("after=-1", 422),
        ("after=-9223372036854775809", 422),
        ("after=2147483648", 422),
        ("after=99999999999999999999999999999999", 422),
        ("after=1e3", 422),
        ("after=NaN", 422),
        ("after=", 422),
        ("limit=0", 422),
        ("limit=-5", 422),
        ("limit=501", 422),
        ("limit=100000000000000000000", 422),
        ("limit=1", 200),
        ("limit=500", 200),
        ("after=2147483647", 200),
        ("after=0&limit=2", 200),
    ],
)
def test_turns_pagination_bounds(server: RunningServer, query: str, status: int) -> None:
    response = httpx.get(
        f"{server.url}/v1/conversations/{SEED}/turns?{query}", headers=OWNER, timeout=TIMEOUT
    )
    assert response.status_code == status, response.text
    if status == 200:
        page = response.json()
        assert all(isinstance(turn["turn_number"], int) for turn in page["turns"])


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("limit=-1", 422),
        ("limit=0", 422),
        ("limit=201", 422),
        ("limit=99999999999999999999", 422),
        ("offset=-1", 422),
        ("offset=1000001", 422),
        ("offset=99999999999999999999", 422),
        ("status=deleted", 422),
        ("status=%27%20OR%201%3D1", 422),
        ("offset=1000000", 200),
        ("limit=200&offset=0", 200),
    ],
)
def test_list_pagination_bounds(server: RunningServer, query: str, status: int) -> None:
    response = httpx.get(f"{server.url}/v1/conversations?{query}", headers=OWNER, timeout=TIMEOUT)
    assert response.status_code == status, response.text


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("path", JSON_POSTS)
def test_oversize_body_is_413(server: RunningServer, path: str) -> None:
    body = json.dumps({"query": "x" * MAX_REQUEST_BYTES, "input": "x"}).encode()
    response = _post(server, path, body)
    assert response.status_code == 413, (response.status_code, response.text[:200])
