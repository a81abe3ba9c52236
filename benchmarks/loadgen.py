"""Load against a real memory_chain server: a stub LLM, chat clients, the read-back check.

Shared by ``bench_load.py``, ``bench_soak.py`` and ``tests/api/test_concurrency.py``, so it
imports only httpx and the standard library (nothing of ``tests/`` or of the other benchmarks).

The conversations API has no endpoint that stores turns: turns are stored by chatting
(``POST /v1/chat/completions``, ``/memory/invoke``), where the chain stores the user message
and the reply together (two turns, one transaction) after the model answered. Without a
model nothing is stored (``llm_fallback=off`` and no Ollama: every chat answers 503). So the
server is pointed at :class:`StubOllama`, a minimal Ollama API in its own process that
answers every chat at once with a fixed reply: what is measured is the server and its memory
(retrieval: keyword search, ``embed_query`` and vector search; the two-turn write; tier-1
and consolidation bookkeeping; the tier-3 backfill in the background), not a model. It runs
as ``python benchmarks/loadgen.py stub-llm --port N`` to serve the stub.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

STUB_REPLY = "Noted, thanks."
USER_HEADER = "X-User-Id"


# -- the stub LLM ---------------------------------------------------------------------------


class _StubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes: with Nagle's algorithm the body then waits for
    # the client's delayed ACK (40 ms on Linux) on every call. Ollama's server sets
    # TCP_NODELAY, as Go does by default.
    disable_nagle_algorithm = True

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/api/version":
            self._send(200, b'{"version": "0.12.0"}', "application/json")
        elif self.path == "/api/tags":
            self._send(200, b'{"models": []}', "application/json")
        else:
            self._send(200, b"Ollama is running", "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        model = request.get("model", "stub")
        now = datetime.now(UTC).isoformat()
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        done = {
            "model": model,
            "created_at": now,
            "done": True,
            "done_reason": "stop",
            "total_duration": 1000,
            "load_duration": 0,
            "prompt_eval_count": max(1, prompt_chars // 4),
            "prompt_eval_duration": 500,
            "eval_count": 4,
            "eval_duration": 500,
        }
        key = "response" if self.path == "/api/generate" else "message"
        content: Any = (
            STUB_REPLY
            if key == "response"
            else {
                "role": "assistant",
                "content": STUB_REPLY,
            }
        )
        if request.get("stream", True):
            first = {"model": model, "created_at": now, key: content, "done": False}
            empty: Any = "" if key == "response" else {"role": "assistant", "content": ""}
            lines = [first, {**done, key: empty}]
            body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
            self._send(200, body, "application/x-ndjson")
        else:
            self._send(200, json.dumps({**done, key: content}).encode(), "application/json")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_stub(port: int) -> None:
    """Serve the stub LLM on 127.0.0.1 (blocks)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _StubHandler)
    server.daemon_threads = True
    server.serve_forever()


@dataclass
class StubOllama:
    """The stub LLM in its own process (so that it does not share the clients' GIL)."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL, for ``MEMORY_CHAIN_OLLAMA_BASE_URL``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> StubOllama:
        """Start it and wait until it answers."""
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "stub-llm", "--port", str(self.port)]
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/api/version", timeout=1).status_code == 200:
                    return self
            if self.process.poll() is not None:
                raise RuntimeError("the stub LLM exited")
            time.sleep(0.1)
        raise TimeoutError("the stub LLM did not start")

    def stop(self) -> None:
        """Stop it."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> StubOllama:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


# -- clients --------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the clients saw."""

    latencies_ns: list[int] = field(default_factory=list)
    acknowledged: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    error_examples: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def error_count(self) -> int:
        """Failed requests."""
        return sum(self.errors.values())

    def failed(self, kind: str, example: str) -> None:
        """Count a failure."""
        self.errors[kind] += 1
        if len(self.error_examples) < 10:
            self.error_examples.append(example[:300])


def chat_body(conversation_id: str, text: str) -> dict[str, Any]:
    """A chat completion sending only the new message (memory supplies the history)."""
    return {
        "messages": [{"role": "user", "content": text}],
        "conversation_id": conversation_id,
    }


async def chat_once(
    http: httpx.AsyncClient, conversation_id: str, text: str, outcome: Outcome
) -> bool:
    """One chat request; its latency and outcome recorded."""
    started = time.perf_counter_ns()
    try:
        response = await http.post("/v1/chat/completions", json=chat_body(conversation_id, text))
    except httpx.HTTPError as exc:
        outcome.failed(type(exc).__name__, f"{conversation_id}: {exc!r}")
        return False
    outcome.latencies_ns.append(time.perf_counter_ns() - started)
    if response.status_code != 200:
        outcome.failed(f"HTTP {response.status_code}", f"{conversation_id}: {response.text}")
        return False
    reply = response.json()["choices"][0]["message"]["content"]
    if reply != STUB_REPLY:
        outcome.failed("unexpected reply", f"{conversation_id}: {reply!r}")
        return False
    outcome.acknowledged[conversation_id].append(text)
    return True


def client(base_url: str, user: str, connections: int, timeout: float = 120.0) -> httpx.AsyncClient:
    """An async client for ``connections`` concurrent requests as ``user``."""
    # Idle connections are dropped after 2 s, before uvicorn closes them (5 s): with both at
    # 5 s, a request sent on a connection the server is closing fails with a ReadError.
    limits = httpx.Limits(
        max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=2.0
    )
    return httpx.AsyncClient(
        base_url=base_url, headers={USER_HEADER: user}, timeout=timeout, limits=limits
    )


async def run_clients(
    base_url: str | Sequence[str],
    user: str,
    conversation_ids: Sequence[str],
    clients: int,
    turns: int,
    text_of: Any = None,
    sticky: bool = False,
) -> Outcome:
    """``clients`` concurrent clients, each sending ``turns`` chat requests.

    Client ``c``'s ``t``-th request goes to conversation ``(c + t) % len(conversation_ids)``,
    so every conversation gets the same load and several clients write to it at once. With
    several base URLs (replicas of one deployment) it goes to replica ``(c + t) % replicas``
    as well, so one conversation is written through every replica, as a load balancer
    spreading requests would; with ``sticky``, to the replica of its conversation
    (conversation ``i`` to replica ``i % replicas``), as one routing by conversation would.
    """
    outcome = Outcome()
    gate = asyncio.Event()
    urls = [base_url] if isinstance(base_url, str) else list(base_url)

    async def one_client(number: int, https: Sequence[httpx.AsyncClient]) -> None:
        await gate.wait()
        for turn in range(turns):
            cid = conversation_ids[(number + turn) % len(conversation_ids)]
            text = (
                text_of(number, turn)
                if text_of
                else f"client {number} turn {turn}: remember item {number * turns + turn}."
            )
            conversation = (number + turn) % len(conversation_ids)
            replica = (conversation if sticky else number + turn) % len(https)
            await chat_once(https[replica], cid, text, outcome)

    async with contextlib.AsyncExitStack() as stack:
        https = [await stack.enter_async_context(client(url, user, clients)) for url in urls]
        tasks = [asyncio.create_task(one_client(n, https)) for n in range(clients)]
        started = time.perf_counter()
        gate.set()
        await asyncio.gather(*tasks)
        outcome.seconds = time.perf_counter() - started
    return outcome


# -- checks ---------------------------------------------------------------------------------


def read_turns(http: httpx.Client, conversation_id: str) -> list[dict[str, Any]]:
    """Every stored turn of a conversation, through the API's pages."""
    turns: list[dict[str, Any]] = []
    after: int | None = 0
    while after is not None:
        response = http.get(
            f"/v1/conversations/{conversation_id}/turns", params={"after": after, "limit": 500}
        )
        response.raise_for_status()
        page = response.json()
        turns.extend(page["turns"])
        after = page["next_after"]
    return turns


def check_conversations(
    base_url: str, user: str, acknowledged: dict[str, list[str]]
) -> dict[str, Any]:
    """Read every conversation back and check its turns against what was acknowledged.

    Every conversation must hold turns numbered exactly 1..N, N = 2 x acknowledged requests
    (a user turn and the reply each), with each acknowledged message stored once and as many
    replies, none before the message it answers. (A message is stored before its model call
    and the reply after it, so concurrent requests to one conversation interleave.)

    Returns:
        ``ok``, a list of ``problems`` (empty when ok), the turns checked and how many of the
        conversations have a summary.
    """
    problems: list[str] = []
    checked = summarized = 0
    with httpx.Client(base_url=base_url, headers={USER_HEADER: user}, timeout=120) as http:
        for cid, texts in sorted(acknowledged.items()):
            turns = read_turns(http, cid)
            checked += len(turns)
            numbers = [t["turn_number"] for t in turns]
            expected = 2 * len(texts)
            if numbers != list(range(1, expected + 1)):
                duplicates = len(numbers) - len(set(numbers))
                problems.append(
                    f"{cid}: {len(numbers)} turns, expected 1..{expected} "
                    f"({duplicates} duplicate numbers, first {numbers[:5]}, last {numbers[-5:]})"
                )
                continue
            info = http.get(f"/v1/conversations/{cid}").json()
            summarized += bool(info["summaries"])
            if info["turn_count"] != expected:
                problems.append(f"{cid}: turn_count {info['turn_count']}, expected {expected}")
            users = [t["content"] for t in turns if t["role"] == "user"]
            replies = [t for t in turns if t["role"] == "assistant"]
            ahead = [
                sum(1 if t["role"] == "user" else -1 for t in turns[: n + 1])
                for n in range(len(turns))
            ]
            if len(users) != len(texts) or len(replies) != len(texts) or min(ahead) < 0:
                problems.append(f"{cid}: {len(users)} messages, {len(replies)} replies")
            elif sorted(users) != sorted(texts):
                problems.append(f"{cid}: stored user messages differ from the acknowledged ones")
    return {
        "ok": not problems,
        "problems": problems,
        "turns_checked": checked,
        "summarized": summarized,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="load-generation helpers")
    sub = parser.add_subparsers(dest="command", required=True)
    stub = sub.add_parser("stub-llm", help="serve the stub LLM (Ollama API) on 127.0.0.1")
    stub.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "stub-llm":
        with contextlib.suppress(KeyboardInterrupt):
            serve_stub(args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
