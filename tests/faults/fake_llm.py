"""A fake Ollama server for fault tests: instant, slow or failing replies, on demand.

It speaks the part of Ollama's API that memory_chain uses (``GET /api/version`` at start-up,
``POST /api/chat``) and tells the chat requests from the summarization chain's (by the
chain's system message), so a test can slow down or break one and not the other. Replies
are deterministic (``"Noted: <the user's last message>"``), so a regenerated reply equals the
stored one. It runs in the test process; memory_chain servers reach it on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from memory_chain.summarize import SUMMARY_SYSTEM

#: How a summarization request starts (the system message up to its first placeholder).
SUMMARY_PREFIX = SUMMARY_SYSTEM.split("{", 1)[0]


class FakeOllama:
    """An Ollama-compatible HTTP server with knobs.

    Attributes:
        chat_delay: Seconds before a chat reply.
        summary_delay: Seconds before a summary.
        chat_status: HTTP status of chat replies (non-200: Ollama's ``{"error"}`` body).
        summary_status: HTTP status of summaries.
        summary_starts: When each summarization request arrived (``time.monotonic()``).
        summaries_in_flight: Summarization requests being answered now.
        chats: Chat requests received.
    """

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.chat_delay = 0.0
        self.summary_delay = 0.0
        self.chat_status = 200
        self.summary_status = 200
        self.summary_starts: list[float] = []
        self.summaries_in_flight = 0
        self.chats = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL (the bound port once started)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeOllama:
        """Bind (the same port again after :meth:`stop`) and serve from a daemon thread."""
        self.stopping.clear()
        self._httpd = _Server(("127.0.0.1", self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: the port refuses connections (delayed replies are abandoned)."""
        self.stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], fake: FakeOllama) -> None:
        self.fake = fake
        super().__init__(address, _Handler)


def _line(text: str, *, done: bool, prompt_tokens: int = 0) -> dict[str, Any]:
    line: dict[str, Any] = {
        "model": "fake",
        "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "message": {"role": "assistant", "content": text},
        "done": done,
    }
    if done:
        line.update(
            done_reason="stop",
            total_duration=1,
            load_duration=0,
            prompt_eval_count=prompt_tokens,
            prompt_eval_duration=1,
            eval_count=3,
            eval_duration=1,
        )
    return line


class _Handler(BaseHTTPRequestHandler):
    @property
    def fake(self) -> FakeOllama:
        return cast(_Server, self.server).fake

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/api/version":
            self._send(HTTPStatus.OK, {"version": "0.12.0"})
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": f"{self.path} not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path != "/api/chat":
            self._send(HTTPStatus.NOT_FOUND, {"error": f"{self.path} not found"})
            return
        messages = body.get("messages") or []
        summary = bool(messages) and str(messages[0].get("content", "")).startswith(SUMMARY_PREFIX)
        fake = self.fake
        with fake.lock:
            if summary:
                fake.summary_starts.append(time.monotonic())
                fake.summaries_in_flight += 1
            else:
                fake.chats += 1
        try:
            delay = fake.summary_delay if summary else fake.chat_delay
            if delay and fake.stopping.wait(delay):
                return  # stopped while waiting: drop the connection unanswered
            status = fake.summary_status if summary else fake.chat_status
            if status != 200:
                self._send(HTTPStatus(status), {"error": f"fake failure {status}"})
                return
            last_user = next(
                (m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), ""
            )
            text = f"Summary of {len(messages)} messages." if summary else f"Noted: {last_user}"
            prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
            lines = [_line(text, done=False), _line("", done=True, prompt_tokens=prompt_tokens)]
            data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
            self._write(HTTPStatus.OK, data, "application/x-ndjson")
        finally:
            if summary:
                with fake.lock:
                    fake.summaries_in_flight -= 1

    def _send(self, status: HTTPStatus, obj: dict[str, Any]) -> None:
        self._write(status, json.dumps(obj).encode(), "application/json")

    def _write(self, status: HTTPStatus, data: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the memory_chain server was killed or gave up waiting
