"""Clients of the three-replica fault test: chat spread over every replica, with failover.

Each client is one user. It works through conversations one after another and sends each
message to the next replica in turn (so one conversation is hit by every replica), resending
its history as OpenAI clients do. A replica that is down (killed, restarting) answers
nothing: the client sends the same message, with the same history, to the next one until a
replica acknowledges it; the history planning answers a message that is already stored
without storing it again. Some conversations are purged after a few messages (a different
replica than the last write), and some of those are then written again under the same id.

Every message names its conversation and incarnation (``[u1/k3.1] ...``), so a prompt, a
summary request and a point can be traced to it.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

WORDS = ["passport", "Lisbon", "bicycle", "invoice", "garden", "piano", "Tuesday", "lemon"]
#: A tag as messages carry it: user, conversation and incarnation.
TAG = re.compile(r"\[(u\d+/[kp]\d+)\.(\d+)\]")


@dataclass
class Exchange:
    """One acknowledged message, its reply, and the replica that answered."""

    text: str
    reply: str
    replica: int


@dataclass
class Incarnation:
    """A conversation under one id, from its first message to its purge (if any)."""

    user: str
    conversation: str
    number: int
    exchanges: list[Exchange] = field(default_factory=list)
    purged: bool = False

    @property
    def tag(self) -> str:
        return f"{self.user}/{self.conversation}.{self.number}"

    def history(self) -> list[dict[str, str]]:
        said: list[dict[str, str]] = []
        for exchange in self.exchanges:
            said += [
                {"role": "user", "content": exchange.text},
                {"role": "assistant", "content": exchange.reply},
            ]
        return said


@dataclass
class Client:
    """One user chatting through every replica (see the module's docstring)."""

    number: int
    urls: Sequence[str]
    kept_messages: int = 12
    purged_messages: int = 4
    incarnations: list[Incarnation] = field(default_factory=list)
    failed_requests: int = 0
    #: Chat requests sent to a replica that died before answering (not refused at connect).
    cut_off: int = 0
    purge_seconds: list[float] = field(default_factory=list)
    http_errors: list[str] = field(default_factory=list)
    _turn: int = 0

    @property
    def user(self) -> str:
        return f"u{self.number}"

    def run(self, stop: threading.Event, abort: threading.Event) -> None:
        """Chat until ``stop`` (the conversation under way is finished) or ``abort``."""
        rng = random.Random(self.number)
        with httpx.Client(timeout=60) as http:
            round_ = 0
            while not stop.is_set() and not abort.is_set():
                self._converse(http, rng, Incarnation(self.user, f"k{round_}", 1), abort)
                purged = Incarnation(self.user, f"p{round_}", 1)
                self._converse(http, rng, purged, abort, purge=True)
                if round_ % 2:  # the same id again, after the purge: a new conversation
                    again = Incarnation(self.user, purged.conversation, 2)
                    self._converse(http, rng, again, abort)
                round_ += 1

    def _converse(
        self,
        http: httpx.Client,
        rng: random.Random,
        incarnation: Incarnation,
        abort: threading.Event,
        *,
        purge: bool = False,
    ) -> None:
        self.incarnations.append(incarnation)
        count = self.purged_messages if purge else self.kept_messages
        for number in range(count):
            text = f"[{incarnation.tag}] message {number}: " + " ".join(rng.sample(WORDS, 3))
            if number == 1:
                text += f". Please remember this: my code is {rng.randrange(1000, 9999)}"
            sent = self._send(http, incarnation, text, abort)
            if sent is None:
                return
            incarnation.exchanges.append(sent)
        if purge and self._purge(http, incarnation.conversation, abort):
            incarnation.purged = True

    def _next(self) -> int:
        self._turn += 1
        return (self._turn + self.number) % len(self.urls)

    def _send(
        self, http: httpx.Client, incarnation: Incarnation, text: str, abort: threading.Event
    ) -> Exchange | None:
        messages = [*incarnation.history(), {"role": "user", "content": text}]
        headers = {"X-Conversation-Id": incarnation.conversation, "X-User-Id": self.user}
        while not abort.is_set():
            replica = self._next()
            try:
                response = http.post(
                    f"{self.urls[replica]}/v1/chat/completions",
                    json={"messages": messages},
                    headers=headers,
                )
            except httpx.TransportError as exc:  # killed, or restarting: the next replica
                self.failed_requests += 1
                # Sent, then the replica died: it may have called the model already.
                self.cut_off += not isinstance(exc, httpx.ConnectError)
                time.sleep(0.05)
                continue
            if response.status_code == 200:
                reply = response.json()["choices"][0]["message"]["content"]
                return Exchange(text, reply, replica)
            self.http_errors.append(f"{response.status_code}: {response.text[:300]}")
            time.sleep(0.2)
        return None

    def _purge(self, http: httpx.Client, conversation: str, abort: threading.Event) -> bool:
        attempts = 0
        began = time.monotonic()
        while not abort.is_set():
            replica = self._next()
            try:
                response = http.delete(
                    f"{self.urls[replica]}/v1/conversations/{conversation}",
                    params={"purge": "true"},
                    headers={"X-User-Id": self.user},
                )
            except httpx.TransportError:
                self.failed_requests += 1
                attempts += 1
                time.sleep(0.05)
                continue
            # A 404 after a failed attempt: that attempt purged it before the replica died.
            if response.status_code in (200, 204) or (response.status_code == 404 and attempts):
                self.purge_seconds.append(time.monotonic() - began)
                return True
            self.http_errors.append(f"purge {response.status_code}: {response.text[:300]}")
            return False
        return False
