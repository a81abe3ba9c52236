"""A fake Ollama server for fault tests: instant, slow or failing replies, on demand.

It speaks the part of Ollama's API that memory_chain uses (``GET /api/version`` at start-up,
``POST /api/chat``) and tells the chat requests from the summarization chain's (by the
chain's system message), so a test can slow down or break one and not the other; the fact
extractor's calls are told apart too, answered with no facts unless a test sets
``extraction_reply``, and counted neither as chats nor as summaries. Replies
are deterministic (``"Noted: <the user's last message>"``), so a regenerated reply equals the
stored one. It runs in the test process; memory_chain servers reach it on 127.0.0.1.

For the Open WebUI tests it can also show what memory gave it (``recall``: the reply quotes
the prompt's "Relevant memories" lines), stream its reply word by word (``word_delay``), and
answer Open WebUI's background tasks (a user message starting with ``### Task:``) with the
JSON that Open WebUI expects (a title, tags, follow-ups), counting them in ``tasks``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from memory_chain.extraction import EXTRACTION_SYSTEM
from memory_chain.local_llm.model import MODEL_NAME
from memory_chain.summarize import SUMMARY_SYSTEM

#: How a summarization request starts (the system message up to its first placeholder).
SUMMARY_PREFIX = SUMMARY_SYSTEM.split("{", 1)[0]
#: How a fact-extraction request starts.
EXTRACTION_PREFIX = EXTRACTION_SYSTEM[:80]
#: Where the chat prompt lists what memory found (see memory_chain.chat.budget).
MEMORIES_HEADING = "Relevant memories (most relevant first):"
#: Open WebUI's background tasks: how to tell them apart, and the JSON each expects.
TASKS = {
    "title": ("concise title", {"title": "Fake: {words}"}),
    "tags": ("tags categorizing", {"tags": ["General"]}),
    "follow_ups": ("Predict 3-5", {"follow_ups": ["Tell me more"]}),
}


def task_reply(prompt: str) -> tuple[str, str]:
    """The kind of an Open WebUI background task and its JSON answer.

    A title is ``"Fake: "`` and the first three words of the chat's first user message, so
    that each chat gets its own.
    """
    first_user = re.search(r"USER:\s*(.+)", prompt)
    words = " ".join(first_user[1].split()[:3]) if first_user else "chat"
    for kind, (marker, answer) in TASKS.items():
        if marker in prompt:
            return kind, json.dumps(answer).replace("{words}", words.replace('"', ""))
    return "other", "{}"


def remembered(messages: list[dict[str, Any]]) -> list[str]:
    """The memory lines of a chat prompt's system message."""
    system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
    if MEMORIES_HEADING not in system:
        return []
    section = system.split(MEMORIES_HEADING, 1)[1].split("\n\n", 1)[0]
    # Each line is "- (when, where, who) text": keep the text.
    lines = [re.sub(r"^- \(.*?\)\s*", "", line.strip()) for line in section.splitlines()]
    return [line for line in lines if line]


class FakeOllama:
    """An Ollama-compatible HTTP server with knobs.

    Attributes:
        chat_delay: Seconds before a chat reply.
        summary_delay: Seconds before a summary.
        chat_status: HTTP status of chat replies (non-200: Ollama's ``{"error"}`` body).
        summary_status: HTTP status of summaries.
        summary_starts: When each summarization request arrived (``time.monotonic()``).
        summary_messages: The messages of every summarization request, in order of arrival.
        summaries_in_flight: Summarization requests being answered now.
        chats: Chat requests received.
        chat_messages: The messages of every chat request, in order of arrival.
        recall: Quote the prompt's remembered lines in chat replies.
        word_delay: Seconds between streamed words of a chat reply (0: one chunk).
        tasks: Background tasks answered, by kind (``"title"``, ``"tags"``, ...).
        models: The models it has, by name, with the context length ``/api/show`` declares
            (and a Modelfile ``num_ctx`` when the value is a pair ``(length, num_ctx)``);
            a chat naming another model gets Ollama's 404.
        requests: Every chat request's body (model, options, messages), in order.
        extractions: Every fact-extraction request's body, in order.
        extraction_reply: What extraction requests are answered (JSON text), or a function
            of the request's messages that gives it.
    """

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.chat_delay = 0.0
        self.summary_delay = 0.0
        self.chat_status = 200
        self.summary_status = 200
        self.summary_starts: list[float] = []
        self.summary_messages: list[list[dict[str, Any]]] = []
        self.summaries_in_flight = 0
        self.chats = 0
        self.chat_messages: list[list[dict[str, Any]]] = []
        self.recall = False
        self.word_delay = 0.0
        self.tasks: list[str] = []
        self.models: dict[str, int | tuple[int, int]] = {MODEL_NAME: 32_768}
        self.requests: list[dict[str, Any]] = []
        self.extractions: list[dict[str, Any]] = []
        self.extraction_reply: str | Callable[[list[dict[str, Any]]], str] = '{"facts": []}'
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
        elif self.path == "/api/tags":
            models = [
                {"name": name, "model": name, "modified_at": "2026-11-01T10:00:00Z", "size": 1}
                for name in self.fake.models
            ]
            self._send(HTTPStatus.OK, {"models": models})
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": f"{self.path} not found"})

    def _known(self, name: object) -> bool:
        return any(
            str(name).removesuffix(":latest") == m.removesuffix(":latest") for m in self.fake.models
        )

    def _show(self, body: dict[str, Any]) -> None:
        name = body.get("model") or body.get("name")
        declared = next(
            (
                v
                for m, v in self.fake.models.items()
                if str(name).removesuffix(":latest") == m.removesuffix(":latest")
            ),
            None,
        )
        if declared is None:
            self._send(HTTPStatus.NOT_FOUND, {"error": f"model '{name}' not found"})
            return
        length, num_ctx = declared if isinstance(declared, tuple) else (declared, None)
        show: dict[str, Any] = {
            "parameters": f"num_ctx {num_ctx}\nstop <|im_end|>" if num_ctx else "stop <|im_end|>",
            "model_info": {"general.architecture": "llama", "llama.context_length": length},
        }
        self._send(HTTPStatus.OK, show)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path == "/api/show":
            self._show(body)
            return
        if self.path != "/api/chat":
            self._send(HTTPStatus.NOT_FOUND, {"error": f"{self.path} not found"})
            return
        if not self._known(body.get("model")):
            name = body.get("model")
            self._send(
                HTTPStatus.NOT_FOUND, {"error": f'model "{name}" not found, try pulling it first'}
            )
            return
        messages = body.get("messages") or []
        if messages and str(messages[0].get("content", "")).startswith(EXTRACTION_PREFIX):
            with self.fake.lock:
                self.fake.extractions.append(body)
            reply = self.fake.extraction_reply
            text = reply(messages) if callable(reply) else reply
            lines = [_line(text, done=False), _line("", done=True)]
            data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
            self._write(HTTPStatus.OK, data, "application/x-ndjson")
            return
        summary = bool(messages) and str(messages[0].get("content", "")).startswith(SUMMARY_PREFIX)
        fake = self.fake
        with fake.lock:
            if summary:
                fake.summary_starts.append(time.monotonic())
                fake.summary_messages.append(messages)
                fake.summaries_in_flight += 1
            else:
                fake.chats += 1
                fake.chat_messages.append(messages)
                fake.requests.append(body)
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
            prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
            if summary:
                text = f"Summary of {len(messages)} messages."
            elif last_user.lstrip().startswith("### Task:"):
                kind, text = task_reply(last_user)
                with fake.lock:
                    fake.tasks.append(kind)
            else:
                text = f"Noted: {last_user}"
                memories = remembered(messages) if fake.recall else []
                if memories:
                    text += " | Remembered: " + " ; ".join(memories)
                if fake.word_delay and body.get("stream", True):
                    self._stream_words(text, prompt_tokens)
                    return
            lines = [_line(text, done=False), _line("", done=True, prompt_tokens=prompt_tokens)]
            data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
            self._write(HTTPStatus.OK, data, "application/x-ndjson")
        finally:
            if summary:
                with fake.lock:
                    fake.summaries_in_flight -= 1

    def _stream_words(self, text: str, prompt_tokens: int) -> None:
        """A chat reply a word at a time, ``word_delay`` apart (ends with the connection)."""
        words = text.split(" ")
        chunks = [word if i == 0 else " " + word for i, word in enumerate(words)]
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "application/x-ndjson")
            self.end_headers()
            lines = [_line(chunk, done=False) for chunk in chunks]
            lines.append(_line("", done=True, prompt_tokens=prompt_tokens))
            for number, line in enumerate(lines):
                if number and self.fake.stopping.wait(self.fake.word_delay):
                    return
                self.wfile.write(json.dumps(line).encode() + b"\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

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
