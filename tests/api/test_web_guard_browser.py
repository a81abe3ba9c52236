"""Other sites' pages against memory on 127.0.0.1, in Chromium, next to the memory browser.

A real ``memory-chain serve`` on 127.0.0.1 with the shipped defaults (no keys: the setup
every page of the user's browser could reach), the fake Ollama as its model, and some memory:
a conversation and two facts. ``tests/browser/rebinding.js`` then, in one Chromium:

- opens an attacker's page at ``http://rebind.test:<port>/``, the name resolving to 127.0.0.1
  (``--host-resolver-rules``), as a DNS rebinding attacker's name does once re-pointed: for
  the browser the page is same-origin with the server. It reads the export, the facts and the
  conversations, writes a fact, chats, calls MCP, purges the conversation and erases the user;
- opens the memory browser at ``http://127.0.0.1:<port>/ui/`` (and on ``localhost``), which
  lists the conversation and the facts and adds one;
- opens pages of other origins (another port of localhost, another name) that try to read
  and write through ``http://127.0.0.1:<port>``.

Afterwards the memory is what it was, plus the fact the memory browser added.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_chain.local_llm.model import MODEL_NAME
from tests import browsers
from tests.faults.fake_llm import FakeOllama
from tests.postgres import free_port
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

REBIND = "rebind.test"
TURNS = [("user", "I take insulin every morning."), ("assistant", "Noted: insulin.")]
FACTS = ["My sister is called Ines.", "My blood type is O negative."]
NEW_FACT = "My favourite tea is green tea."
ATTACKER_FACT = "I was written by another site."
#: What the rebinding page tries, as fetch from its own origin (so the server's).
ATTACKS: list[list[Any]] = [
    ["GET", "/v1/users/me/export"],
    ["GET", "/v1/facts"],
    ["GET", "/v1/conversations"],
    ["GET", "/v1/conversations/trip/turns"],
    ["GET", "/v1/me"],
    ["GET", "/health"],
    ["GET", "/metrics"],
    ["GET", "/ui/"],
    ["GET", "/memory/playground/"],
    ["POST", "/v1/facts", {"text": ATTACKER_FACT}],
    ["POST", "/v1/conversations/trip/search", {"query": "insulin"}],
    [
        "POST",
        "/v1/chat/completions",
        {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}]},
    ],
    [
        "POST",
        "/memory/invoke",
        {"input": {"input": "hi"}, "config": {"configurable": {"conversation_id": "trip"}}},
    ],
    [
        "POST",
        "/mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "list_facts", "arguments": {}},
        },
    ],
    ["DELETE", "/v1/conversations/trip?purge=true"],
    ["DELETE", "/v1/users/me"],
]
#: What the cross-origin pages try: (method, path, fetch mode, body, content type).
CROSS_ATTEMPTS = [
    ("GET", "/v1/users/me/export", "cors", None, None),
    ("POST", "/v1/facts", "no-cors", json.dumps({"text": ATTACKER_FACT}), "text/plain"),
    ("POST", "/v1/facts", "cors", json.dumps({"text": ATTACKER_FACT}), "application/json"),
    ("POST", "/v1/conversations/trip/consolidate", "no-cors", None, None),
    ("POST", "/v1/conversations/trip/end", "no-cors", None, None),
    ("DELETE", "/v1/users/me", "cors", None, None),
]


def _cross_page(target: str) -> bytes:
    attempts = [
        {"method": m, "url": target + path, "mode": mode, "body": body, "type": kind}
        for m, path, mode, body, kind in CROSS_ATTEMPTS
    ]
    script = f"""
      (async () => {{
        const results = [];
        for (const a of {json.dumps(attempts)}) {{
          const init = {{ method: a.method, mode: a.mode }};
          if (a.body !== null) {{
            init.body = a.body;
            init.headers = {{ "Content-Type": a.type }};
          }}
          try {{
            const r = await fetch(a.url, init);
            results.push({{ ...a, type: r.type, status: r.status,
                            answer: r.type === "opaque" ? null : (await r.text()).slice(0, 400) }});
          }} catch (error) {{
            results.push({{ ...a, error: String(error) }});
          }}
        }}
        window.attackResults = results;
        document.title = "done";
      }})();"""
    page = f"<!doctype html><title>a page</title><p>Nothing to see.</p><script>{script}</script>"
    return page.encode()


class _OtherSite:
    """Another origin's web server on 127.0.0.1: one page, attacking ``target``."""

    def __init__(self, target: str) -> None:
        page = _cross_page(target)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    fake = FakeOllama().start()
    data_dir = tmp_path_factory.mktemp("rebinding") / "data"
    server = RunningServer(data_dir, server_env(data_dir, fake.url)).start()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        body = {"turns": [{"role": role, "content": text} for role, text in TURNS]}
        assert http.post("/v1/conversations/trip/turns", json=body).status_code == 201
        for text in FACTS:
            assert http.post("/v1/facts", json={"text": text}).status_code == 201
    yield server
    server.stop()
    fake.stop()


def _memory(server: RunningServer) -> dict[str, Any]:
    """What the server holds for its user: the export's lines by kind, with the facts' texts."""
    export = httpx.get(f"{server.url}/v1/users/me/export", timeout=60)
    assert export.status_code == 200, export.text
    lines = [json.loads(line) for line in export.text.splitlines()]
    return {
        "lines": lines,
        "facts": sorted(line["text"] for line in lines if "text" in line and "status" in line),
    }


def test_other_sites_pages_cannot_reach_memory_and_the_memory_browser_can(
    server: RunningServer, tmp_path: Path
) -> None:
    node, chromium = browsers.browser_tools()
    before = _memory(server)
    assert before["facts"] == sorted(FACTS)
    other = _OtherSite(server.url)
    try:
        cross_pages = [f"http://localhost:{other.port}/", f"http://cross.test:{other.port}/"]
        options = {
            "chromium": chromium,
            "port": server.port,
            "rebindName": REBIND,
            "attacks": ATTACKS,
            "crossPages": cross_pages,
            "newFact": NEW_FACT,
            "screenshotDir": str(tmp_path),
        }
        report = browsers.drive(node, "rebinding.js", options, timeout=240)
    finally:
        other.close()
    (tmp_path / "report.json").write_text(json.dumps(report, indent=1))  # with the screenshot
    assert report["error"] is None, report

    # The rebinding page: same-origin for the browser, every request refused by the server.
    rebinding = report["rebinding"]
    assert rebinding["origin"] == f"http://{REBIND}:{server.port}"
    results = rebinding["results"]
    assert [(r["method"], r["path"]) for r in results] == [(a[0], a[1]) for a in ATTACKS]
    for result in results:
        assert result.get("status") == 421, result
        assert "MEMORY_CHAIN_TRUSTED_HOSTS" in result["body"], result
        assert "insulin" not in result["body"]
        assert "Ines" not in result["body"]

    # The memory browser, in the same browser, on the server's own names.
    for seen in (report["memoryBrowser"], report["memoryBrowserLocalhost"]):
        assert seen["errorHidden"], seen
        assert seen["conversations"] == ["trip"]
        assert set(FACTS) <= set(seen["facts"])
    assert NEW_FACT in report["memoryBrowser"]["factsAfterAdding"]

    # The cross-origin pages could read nothing, and the server refused what reached it.
    for page in report["crossOrigin"]:
        for result in page["results"]:
            assert result.get("answer") in (None, ""), result  # no answer readable
    cross_responses = [
        entry
        for entry in report["network"]
        if entry["url"].startswith(server.url) and entry["page"] in cross_pages
    ]
    assert cross_responses, report["network"]
    for entry in cross_responses:
        assert entry.get("status") in (403, None), entry

    # Nothing changed but the memory browser's fact.
    after = _memory(server)
    assert after["facts"] == sorted([*FACTS, NEW_FACT])
    assert ATTACKER_FACT not in json.dumps(after["lines"])
    unchanged = [line for line in after["lines"] if line.get("text") != NEW_FACT]
    assert unchanged == before["lines"]

    # The server refused them itself (the browser hid some answers from the pages).
    log = server.log.read_text() if server.log else ""
    assert "MEMORY_CHAIN_TRUSTED_HOSTS" in log  # the start-up line says what is trusted
    refused = set(re.findall(r"refused (\w+) (\S+) \(Host '([^']*)', Origin (\S+)\): (\d+)", log))
    for method, path in {(a[0], a[1].split("?")[0]) for a in ATTACKS}:
        host = f"{REBIND}:{server.port}"
        origin = f"'http://{host}'" if method != "GET" else "None"
        assert (method, path, host, origin, "421") in refused, (method, path)
    for page in cross_pages:
        origin = repr(page.rstrip("/"))
        for method, path in {
            ("GET", "/v1/users/me/export"),
            ("POST", "/v1/facts"),
            ("OPTIONS", "/v1/facts"),  # the preflight of the JSON one
            ("POST", "/v1/conversations/trip/consolidate"),
            ("POST", "/v1/conversations/trip/end"),
            ("OPTIONS", "/v1/users/me"),
        }:
            seen = (method, path, f"127.0.0.1:{server.port}", origin, "403")
            assert seen in refused, (page, method, path)
