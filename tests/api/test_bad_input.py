"""Hand-written bad input against a real server: a 4xx that says what to fix, never a 5xx.

Complements ``test_fuzz_api.py`` (schemathesis, and its hand-written cases: non-UTF-8 bodies,
10,000-deep JSON, traversal ids, pagination bounds on the LangServe and conversation routes)
and ``test_conversations_api.py`` (malformed ids, search bodies, pagination, 413): here are the
cases those leave out, including ``POST /v1/chat/completions`` (which they do not send bad
bodies to), bodies nested 100,000 deep, other kinds of invalid UTF-8, wrong content types,
odd ids (unicode, case, control characters, double encoding), search ``k`` and query-string
oddities, and keyword-search metacharacters on PostgreSQL as well as SQLite.

Every response must be a 4xx with a JSON message (``detail``, or OpenAI's ``error.message``),
or a 2xx where the input is legitimately fine (metacharacters in a search query are plain
text). Two users' conversations are stored first (through the chat API, whose model is the
stub LLM of ``benchmarks/loadgen.py``) and must read back exactly the same after every test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.loadgen import STUB_REPLY, StubOllama
from tests.conftest import _fresh_postgres_database
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

MAX_BYTES = 400_000  # room for 100,000 nested arrays (200 kB)
TIMEOUT = 60.0
OWNER, OTHER = "owner", "other"
VICTIM, OTHERS = "victim", "others-conversation"
SEED_MESSAGES = [
    "My cat Pixel likes tuna; 100% of budget_2024 goes to the vet -- really.",
    'She wrote "NEAR(cat tuna)" and {body context}: OR AND NOT * on a note.',
    "Please remember this: my locker is number 7.",  # a fact for the facts routes
]
OWNER_HEADERS = {"X-User-Id": OWNER}


# -- the servers and what they store --------------------------------------------------------


@pytest.fixture(scope="module")
def stub_llm_url() -> Iterator[str]:
    with StubOllama() as stub:
        yield stub.url


def _chat(server: RunningServer, user: str, conversation: str, text: str) -> None:
    body = {"messages": [{"role": "user", "content": text}], "conversation_id": conversation}
    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        json=body,
        headers={"X-User-Id": user},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == STUB_REPLY


def snapshot(server: RunningServer) -> dict[str, Any]:
    """Everything both users can read: their conversations, details, turns and facts."""
    state: dict[str, Any] = {}
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
        for user in (OWNER, OTHER):
            headers = {"X-User-Id": user}
            listed = http.get("/v1/conversations", params={"limit": 200}, headers=headers)
            assert listed.status_code == 200, listed.text
            for conversation in listed.json():
                cid = conversation["conversation_id"]
                detail = http.get(f"/v1/conversations/{cid}", headers=headers)
                turns = http.get(
                    f"/v1/conversations/{cid}/turns", params={"limit": 500}, headers=headers
                )
                assert detail.status_code == 200, detail.text
                assert turns.status_code == 200, turns.text
                state[f"{user}/{cid}"] = {"detail": detail.json(), "turns": turns.json()}
            facts = http.get(
                "/v1/facts", params={"include": ["superseded", "dismissed"]}, headers=headers
            )
            assert facts.status_code == 200, facts.text
            state[f"{user}/facts"] = facts.json()
    return state


def _wait_for_backfill(server: RunningServer) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        health = httpx.get(f"{server.url}/health", timeout=TIMEOUT).json()
        if health["tier3"]["queued_turns"] == 0:
            return
        time.sleep(0.2)
    pytest.fail("tier 3 did not embed the seeded turns within 60 s")


class Target:
    """A running server and the snapshot of what it stored before any bad request."""

    def __init__(self, server: RunningServer) -> None:
        self.server = server
        for text in SEED_MESSAGES:
            _chat(server, OWNER, VICTIM, text)
        _chat(server, OTHER, OTHERS, "Nothing to see here.")
        _wait_for_backfill(server)
        self.before = snapshot(server)
        assert len(self.before[f"{OWNER}/{VICTIM}"]["turns"]["turns"]) == 2 * len(SEED_MESSAGES)
        assert len(self.before[f"{OWNER}/facts"]["facts"]) == 1
        self.contents = {t["content"] for t in self.before[f"{OWNER}/{VICTIM}"]["turns"]["turns"]}

    @property
    def url(self) -> str:
        return self.server.url


def _start(data_dir: Path, llm_url: str, **extra: object) -> RunningServer:
    env = server_env(data_dir, llm_url, max_request_bytes=MAX_BYTES, **extra)
    return RunningServer(data_dir, env).start()


@pytest.fixture(scope="module")
def sqlite_target(tmp_path_factory: pytest.TempPathFactory, stub_llm_url: str) -> Iterator[Target]:
    server = _start(tmp_path_factory.mktemp("bad-input") / "data", stub_llm_url)
    yield Target(server)
    server.stop()


@pytest.fixture(scope="module")
def postgres_target(
    tmp_path_factory: pytest.TempPathFactory, stub_llm_url: str, request: pytest.FixtureRequest
) -> Iterator[Target]:
    url = _fresh_postgres_database(request.getfixturevalue("postgres_url"))
    server = _start(
        tmp_path_factory.mktemp("bad-input-pg") / "data", stub_llm_url, database_url=url
    )
    yield Target(server)
    server.stop()


@pytest.fixture
def target(sqlite_target: Target) -> Iterator[Target]:
    """The SQLite server; after the test, everything stored must read back the same."""
    yield sqlite_target
    assert snapshot(sqlite_target.server) == sqlite_target.before


def client_error(response: httpx.Response) -> str:
    """The message of a 4xx JSON error (fails otherwise)."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    assert response.headers.get("content-type", "").startswith("application/json"), (
        response.status_code,
        response.headers.get("content-type"),
        response.text[:300],
    )
    body = response.json()
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):
        message = "; ".join(str(item.get("msg", "")) for item in detail if isinstance(item, dict))
    elif isinstance(detail, str):
        message = detail
    else:
        message = str((body.get("error") or {}).get("message", ""))
    assert message.strip(), body
    return message


def _send(
    target: Target, method: str, path: str, content: Any = None, **headers: str
) -> httpx.Response:
    """A request sent as written (httpx would resolve dot segments in the path itself)."""
    all_headers = {**OWNER_HEADERS, **headers}
    with httpx.Client(timeout=TIMEOUT) as http:
        request = http.build_request(
            method, httpx.URL(target.url + path), content=content, headers=all_headers
        )
        return http.send(request)


# -- bodies ---------------------------------------------------------------------------------

SEARCH = f"/v1/conversations/{VICTIM}/search"
CHAT = "/v1/chat/completions"
JSON_ROUTES = [CHAT, SEARCH, "/memory/invoke", "/memory/batch", "/memory/stream"]
RETRIEVER = "/memory/retriever/invoke"


def valid_body(path: str, text: str = "tuna") -> dict[str, Any]:
    """A body the route accepts, aimed at the victim conversation."""
    config = {"configurable": {"conversation_id": VICTIM}}
    if path == CHAT:
        return {"messages": [{"role": "user", "content": text}], "conversation_id": VICTIM}
    if path == SEARCH:
        return {"query": text}
    if path == "/memory/batch":
        return {"inputs": [{"input": text}], "config": config}
    if path == RETRIEVER:
        return {"input": text, "config": config}
    return {"input": {"input": text}, "config": config}


def _with_text(path: str, raw_text: bytes) -> bytes:
    """The valid body with its text replaced by ``raw_text`` (bytes, possibly not UTF-8)."""
    marker = "MARKER-7f3a"
    return json.dumps(valid_body(path, marker)).encode().replace(marker.encode(), raw_text)


INVALID_UTF8 = {
    "lone-continuation-byte": b"caf\x80",
    "overlong-dot": b"\xc0\xae\xc0\xae/etc",
    "truncated-sequence": b"euro \xe2\x82",
    "surrogate-encoded": b"\xed\xa0\x80",
    "latin-1": b"caf\xe9 cr\xe8me",
}


@pytest.mark.parametrize("path", [*JSON_ROUTES, RETRIEVER])
@pytest.mark.parametrize("kind", sorted(INVALID_UTF8))
def test_invalid_utf8_in_a_body_is_a_client_error(target: Target, path: str, kind: str) -> None:
    response = _send(
        target,
        "POST",
        path,
        _with_text(path, INVALID_UTF8[kind]),
        **{"Content-Type": "application/json"},
    )
    # A surrogate encoded in UTF-8 bytes decodes (json.loads uses "surrogatepass") to a str
    # that pydantic refuses as "unable to parse raw data as a unicode string".
    message = client_error(response).lower()
    assert "utf-8" in message or "unicode" in message, message


def test_invalid_utf8_in_a_key_and_a_latin1_charset_label(target: Target) -> None:
    body = b'{"messages": [{"role": "user", "cont\xe9nt": "hi"}], "conversation_id": "victim"}'
    client_error(_send(target, "POST", CHAT, body, **{"Content-Type": "application/json"}))
    latin = _with_text(CHAT, b"caf\xe9")
    labelled = {"Content-Type": "application/json; charset=latin-1"}
    client_error(_send(target, "POST", CHAT, latin, **labelled))


@pytest.mark.parametrize("path", [*JSON_ROUTES, RETRIEVER])
@pytest.mark.parametrize(
    "shape", ["arrays-100k-top", "arrays-100k-in-field", "objects-50k-in-field"]
)
def test_json_nested_100k_deep_is_a_client_error(target: Target, path: str, shape: str) -> None:
    if shape == "arrays-100k-top":
        body = b"[" * 100_000 + b"]" * 100_000
    elif shape == "arrays-100k-in-field":
        body = _with_text(path, b"x").replace(b'"x"', b"[" * 100_000 + b"]" * 100_000)
    else:
        nested = b'{"a":' * 50_000 + b"1" + b"}" * 50_000
        body = _with_text(path, b"x").replace(b'"x"', nested)
    assert len(body) < MAX_BYTES
    response = _send(target, "POST", path, body, **{"Content-Type": "application/json"})
    assert "JSON" in client_error(response)


@pytest.mark.parametrize("path", [CHAT, "/memory/stream", "/memory/batch", RETRIEVER])
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_413(target: Target, path: str, declared: bool) -> None:
    body = _with_text(path, b"x" * (MAX_BYTES + 1))

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 32 * 1024):
            yield body[start : start + 32 * 1024]

    content = body if declared else chunks()
    response = _send(target, "POST", path, content, **{"Content-Type": "application/json"})
    assert response.status_code == 413, (response.status_code, response.text[:300])
    assert "send less" in client_error(response)


# -- content types and methods --------------------------------------------------------------

WRONG_CONTENT_TYPES = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=xyz",
    "application/xml",
]


@pytest.mark.parametrize("path", [*JSON_ROUTES, RETRIEVER])
@pytest.mark.parametrize("content_type", WRONG_CONTENT_TYPES)
def test_a_json_body_under_another_content_type(
    target: Target, path: str, content_type: str
) -> None:
    # The body itself is valid: only the label is wrong. A web page can POST text/plain,
    # form-urlencoded and multipart to 127.0.0.1 without a CORS preflight, so accepting them
    # would let any page the user visits write into a server that runs without API keys.
    body = json.dumps(valid_body(path, "a forged message")).encode()
    response = _send(target, "POST", path, body, **{"Content-Type": content_type})
    message = client_error(response)
    if path.startswith("/memory"):  # LangServe would read it as JSON: refused before that
        assert response.status_code == 415, response.text
        assert "application/json" in message


@pytest.mark.parametrize("path", [*JSON_ROUTES, RETRIEVER])
def test_a_json_body_without_a_content_type(target: Target, path: str) -> None:
    body = json.dumps(valid_body(path, "an unlabelled message")).encode()
    response = _send(target, "POST", path, body)
    client_error(response)


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "APPLICATION/JSON", "application/x+json"]
)
@pytest.mark.parametrize("path", [SEARCH, RETRIEVER])
def test_json_content_types_are_accepted(target: Target, path: str, content_type: str) -> None:
    body = json.dumps(valid_body(path, "tuna")).encode()
    response = _send(target, "POST", path, body, **{"Content-Type": content_type})
    assert response.status_code == 200, response.text[:300]


def test_form_encoded_fields_are_not_read_as_json(target: Target) -> None:
    response = _send(
        target,
        "POST",
        SEARCH,
        b"query=tuna&k=5",
        **{"Content-Type": "application/x-www-form-urlencoded"},
    )
    client_error(response)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", f"/v1/conversations/{VICTIM}"),
        ("PATCH", f"/v1/conversations/{VICTIM}"),
        ("POST", "/v1/conversations"),
        ("DELETE", "/v1/conversations"),
        ("GET", f"/v1/conversations/{VICTIM}/search"),
        ("PUT", CHAT),
        ("GET", f"/v1/conversations/{VICTIM}/nothing-here"),
        ("POST", "/v1/nothing"),
    ],
)
def test_unknown_methods_and_routes_are_json_errors(target: Target, method: str, path: str) -> None:
    client_error(_send(target, method, path, b"{}", **{"Content-Type": "application/json"}))


# -- ids ------------------------------------------------------------------------------------

ODD_IDS = [
    "VICTIM",  # ids are case-sensitive: another (missing) conversation
    "victim.",
    "victim%0A",
    "victim%0D%0A",
    "%09victim",
    "%20victim",
    "victim%20",
    "%252e%252e%252fetc",
    "..%5C..%5Cwindows",
    "%2E%2E",
    ".%2e",
    "caf%C3%A9",
    "%EF%BC%8E%EF%BC%8E",  # fullwidth dots
    "%E2%80%AEmitciv",  # right-to-left override
    "%F0%9F%98%80",
    "%00",
    "a" * 10_000,
]
ID_ROUTES = [
    ("GET", ""),
    ("GET", "/turns"),
    ("POST", "/search"),
    ("POST", "/consolidate"),
    ("POST", "/end"),
    ("DELETE", ""),
    ("DELETE", "?purge=true"),
]


@pytest.mark.parametrize("conversation", ODD_IDS, ids=lambda c: c[:24])
def test_odd_conversation_ids_in_paths(target: Target, conversation: str) -> None:
    for method, suffix in ID_ROUTES:
        body = b'{"query": "tuna"}' if suffix == "/search" else None
        response = _send(
            target,
            method,
            f"/v1/conversations/{conversation}{suffix}",
            body,
            **{"Content-Type": "application/json"},
        )
        assert response.status_code in (404, 422), (method, suffix, response.text[:300])
        client_error(response)


RAW_ODD_IDS = [
    "victim\n",
    "\tvictim",
    "victim ",
    "../victim",
    "victim/../victim",
    "café",
    "\uff0e\uff0e",  # fullwidth dots
    "\u202emitciv",
    "\x00",
    "a" * 10_000,
]


@pytest.mark.parametrize("conversation", RAW_ODD_IDS, ids=lambda c: repr(c[:24]))
def test_odd_conversation_ids_in_chat_bodies(target: Target, conversation: str) -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}], "conversation_id": conversation}
    chat_response = _send(
        target, "POST", CHAT, json.dumps(chat).encode(), **{"Content-Type": "application/json"}
    )
    langserve = {
        "input": {"input": "hi"},
        "config": {"configurable": {"conversation_id": conversation}},
    }
    langserve_response = _send(
        target,
        "POST",
        "/memory/invoke",
        json.dumps(langserve).encode(),
        **{"Content-Type": "application/json"},
    )
    client_error(chat_response)
    client_error(langserve_response)


@pytest.mark.parametrize(
    "value",
    [b"../victim", b"caf\xc3\xa9", b"caf\xe9", b"a" * 10_000, b"%2e%2e", b"victim;x"],
    ids=["traversal", "utf8", "latin1", "long", "encoded-dots", "semicolon"],
)
@pytest.mark.parametrize("header", ["X-Conversation-Id", "X-User-Id", "X-OpenWebUI-User-Id"])
def test_odd_ids_in_headers(target: Target, header: str, value: bytes) -> None:
    # (Surrounding whitespace is stripped by HTTP itself, so "victim " is a valid id here.)
    headers: dict[str, str | bytes] = {"Content-Type": "application/json", header: value}
    if header == "X-Conversation-Id":
        headers["X-User-Id"] = OWNER
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    with httpx.Client(timeout=TIMEOUT) as http:
        response = http.post(f"{target.url}{CHAT}", content=body, headers=headers)
    client_error(response)


def test_a_control_character_in_a_header_is_refused_by_http(target: Target) -> None:
    # DEL is not allowed in a header value: uvicorn's parser answers 400 before the app runs
    # (plain text, not JSON: no route is involved).
    body = json.dumps(valid_body(CHAT, "hi")).encode()
    headers = {"Content-Type": "application/json", "X-User-Id": b"victim\x7f"}
    with httpx.Client(timeout=TIMEOUT) as http:
        response = http.post(f"{target.url}{CHAT}", content=body, headers=headers)
    assert response.status_code == 400, response.text[:300]


# -- search queries and pagination ----------------------------------------------------------

METACHARACTER_QUERIES = [
    "{body context} :",
    "{content}: tuna",
    "content : tuna",
    "turns_fts: tuna",
    "NEAR(cat tuna, 2)",
    "NEAR(",
    "NEAR/3",
    '"tuna',
    'tuna"',
    "'tuna",
    "''",
    '""',
    ";",
    "--",
    "tuna -- comment",
    "/* tuna */",
    "OR",
    "AND",
    "NOT",
    "tuna OR",
    "OR tuna",
    "NOT tuna",
    "tuna AND (cat OR",
    "(tuna",
    "tuna)",
    "+tuna",
    "tuna^2",
    "*tuna",
    "%tuna%",
    "tuna_",
    "\\%",
    "tuna ESCAPE '\\'",
    "'; SELECT 1; --",
    "$1 ? :param @x",
    "& | ! <-> :*",  # tsquery operators
    "tuna:* & !cat",
    '"' * 2_000,
    "(" * 2_000,
    "%_*\"'():^-+{}[];" * 100,
]


def _search_is_plain_text(target: Target, query: str) -> None:
    response = httpx.post(
        f"{target.url}{SEARCH}",
        json={"query": query, "k": 10},
        headers=OWNER_HEADERS,
        timeout=TIMEOUT,
    )
    assert response.status_code == 200, response.text[:500]
    body = response.json()
    assert body["degraded"] == [], body["degraded"]
    for hit in body["results"]:
        assert hit["content"] in target.contents, hit


@pytest.mark.parametrize("query", METACHARACTER_QUERIES, ids=lambda q: q[:30])
def test_search_metacharacters_on_sqlite(target: Target, query: str) -> None:
    _search_is_plain_text(target, query)


@pytest.mark.postgres
def test_search_metacharacters_on_postgres(postgres_target: Target) -> None:
    for query in METACHARACTER_QUERIES:
        _search_is_plain_text(postgres_target, query)
    assert snapshot(postgres_target.server) == postgres_target.before


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"query": "tuna", "k": -1}', 422),
        (b'{"query": "tuna", "k": 100000000000000000000}', 422),
        (b'{"query": "tuna", "k": 1.5}', 422),
        (b'{"query": "tuna", "k": null}', 422),
        (b'{"query": "tuna", "k": "NaN"}', 422),
        (b'{"query": "tuna", "k": NaN}', 422),
        (b'{"query": "tuna", "k": Infinity}', 422),
        (b'{"query": "tuna", "k": [5]}', 422),
        (b'{"query": ["tuna"]}', 422),
        (b'{"query": {"$ne": ""}}', 422),
        (b'{"query": "tuna", "k": 50}', 200),
        (b'{"query": "tuna", "k": 1}', 200),
        (b'{"query": "tuna", "k": 5, "unknown": "ignored"}', 200),
    ],
)
def test_search_k_and_query_types(target: Target, body: bytes, status: int) -> None:
    response = _send(target, "POST", SEARCH, body, **{"Content-Type": "application/json"})
    assert response.status_code == status, response.text[:300]
    if status >= 400:
        client_error(response)


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("after=1.5", 422),
        ("limit=1.0e2", 422),
        ("after=%D9%A1", 422),  # an Arabic-Indic digit, which Python's int() would accept
        ("after=0x10", 422),
        ("after=%200", 200),  # surrounding spaces are stripped
        ("limit=5&limit=900", 422),  # the last value counts
        ("limit=900&limit=5", 200),
        ("after=-0", 200),
        ("after=+1", 200),
        ("after=0&after=-1", 422),
        ("limit=%00", 422),
    ],
)
def test_turns_query_string_oddities(target: Target, query: str, status: int) -> None:
    response = _send(target, "GET", f"/v1/conversations/{VICTIM}/turns?{query}")
    assert response.status_code == status, response.text[:300]
    if status >= 400:
        client_error(response)


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("offset=1e3", 422),
        ("limit=-0", 422),
        ("offset=-0", 200),
        ("limit=50&offset=%D9%A1", 422),
        ("status=ACTIVE", 422),
        ("status=active%00", 422),
    ],
)
def test_list_query_string_oddities(target: Target, query: str, status: int) -> None:
    response = _send(target, "GET", f"/v1/conversations?{query}")
    assert response.status_code == status, response.text[:300]
    if status >= 400:
        client_error(response)


# -- the caller's own data: facts, export, erasure --------------------------------------------


@pytest.mark.parametrize(
    ("fact_id", "status", "says"),
    [
        (f"{VICTIM}:1", 422, "match pattern"),  # the ids of an older version
        ("A" * 32, 422, "match pattern"),
        ("a" * 31, 422, "match pattern"),
        ("a" * 33, 422, "match pattern"),
        ("%2e%2e", 422, "match pattern"),
        ("0" * 32, 404, "GET /v1/facts"),
    ],
)
@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_bad_fact_ids(target: Target, method: str, fact_id: str, status: int, says: str) -> None:
    body = b'{"text": "a new text"}' if method == "PATCH" else None
    headers = {"Content-Type": "application/json"} if body else {}
    response = _send(target, method, f"/v1/facts/{fact_id}", body, **headers)
    assert response.status_code == status, response.text[:300]
    assert says in client_error(response)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{}", "text"),
        (b'{"text": ""}', "text"),
        (b'{"text": "   "}', "must not be empty"),
        (b'{"text": 5}', "text"),
        (b'{"text": "' + b"x" * 2001 + b'"}', "text"),
        (b'{"text": "ok", "kind": "gossip"}', "kind"),
        (b'{"text": "ok", "owner": "someone-else"}', "owner"),
        (b'{"text": "ok", "subject": "' + b"s" * 201 + b'"}', "subject"),
        (b"not json", "JSON"),
        (b'["a list"]', "object"),
    ],
)
def test_bad_new_facts(target: Target, body: bytes, says: str) -> None:
    response = _send(target, "POST", "/v1/facts", body, **{"Content-Type": "application/json"})
    assert response.status_code in (400, 422), response.text[:300]
    client_error(response)
    assert says.lower() in response.text.lower()  # the message, or the field it names


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{}", "text"),
        (b'{"text": null, "kind": null}', "text"),
        (b'{"kind": "gossip"}', "kind"),
        (b'{"text": ""}', "text"),
        (b'{"text": "ok", "status": "current"}', "status"),
    ],
)
def test_bad_fact_edits(target: Target, body: bytes, says: str) -> None:
    with httpx.Client(timeout=TIMEOUT) as http:
        listed = http.get(f"{target.url}/v1/facts", headers=OWNER_HEADERS).json()["facts"]
    assert listed, "the owner has a fact to edit"
    path = f"/v1/facts/{listed[0]['id']}"
    response = _send(target, "PATCH", path, body, **{"Content-Type": "application/json"})
    assert response.status_code in (400, 422), response.text[:300]
    client_error(response)
    assert says.lower() in response.text.lower()  # the message, or the field it names


@pytest.mark.parametrize(
    "query",
    [
        "include=current",
        "include=everything",
        "limit=0",
        "limit=1001",
        "conversation_id=..%2Fetc",
        "conversation_id=%00",
    ],
)
def test_bad_facts_queries(target: Target, query: str) -> None:
    response = _send(target, "GET", f"/v1/facts?{query}")
    assert response.status_code == 422, response.text[:300]
    client_error(response)


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/users/me/export"), ("DELETE", "/v1/users/me"), ("GET", "/v1/facts")],
)
@pytest.mark.parametrize("user", ["../owner", "own er", "a" * 129, "caf%C3%A9"])
def test_a_malformed_user_header_on_the_callers_routes(
    target: Target, method: str, path: str, user: str
) -> None:
    response = _send(target, method, path, **{"X-User-Id": user})
    assert response.status_code == 422, response.text[:300]
    assert "user id" in client_error(response)


def test_nothing_changed_for_either_user(sqlite_target: Target) -> None:
    # The per-test check compares after each test; this one states it for the whole file.
    assert snapshot(sqlite_target.server) == sqlite_target.before
