"""Three real ``memory-chain serve`` replicas on one PostgreSQL, changing the same users' facts
at once over HTTP, with consolidation learning facts from their chats meanwhile.

Two users, three clients each; every request goes to the next replica in turn. A client adds
the same fact again and again, adds values of one subject ("home"), edits one shared fact,
dismisses facts, and chats, saying where it lives and asking to remember its gym
("Please remember that my gym is ..."): the replica that stores the message files the save,
and every few messages one consolidates the conversation, the fake model's extraction
answering the last home the range states (a value of "home" learnt from the chat, decided
against the ones the clients add by hand). Afterwards, once every replica is idle, the
history checker (:mod:`tests.facts.history_check`) reads every fact row: at most one
current value of "home" per user, no fact current twice, no acknowledged edit lost, and no
5xx (nor any other error) answered.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from memory_chain.tiers.sql import create_sql_engine, upgrade
from tests.conftest import _fresh_postgres_database
from tests.facts.history_check import History, check
from tests.faults.chat import wait_for
from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(900)]

REPLICAS = 3
USERS = 2
CLIENTS_PER_USER = 3
OPERATIONS = 40
CITIES = ["Porto", "Oslo", "Lima", "Quito", "Hanoi", "Perth", "Tunis", "Bergen"]
GYMS = ["Alpha", "Bravo", "Delta"]
LOCKER = "My locker code is 4471."
#: A home the chat states, as the fake extraction finds it.
HOME = re.compile(r"\[(\d+)\] User: .*?I live in (\w+)\.")


def extract_last_home(messages: list[dict[str, Any]]) -> str:
    """The fake model's extraction: the last home the range's user lines state, if any."""
    chat = str(messages[-1].get("content", "")).split("\n\nChat:\n", 1)[-1]
    homes = HOME.findall(chat)
    if not homes:
        return '{"facts": []}'
    line, city = homes[-1]
    fact = {"text": f"I live in {city}.", "kind": "biography", "subject": "home"}
    return json.dumps({"facts": [fact | {"turn": int(line), "replaces": ""}]})


@dataclass
class FactClient:
    """One client of one user, sending each request to the next replica in turn."""

    user: str
    number: int
    urls: list[str]
    seat: str
    history: History
    statuses: list[int] = field(default_factory=list)
    said: list[dict[str, str]] = field(default_factory=list)
    _turn: int = 0

    def run(self, start: threading.Barrier) -> None:
        rng = random.Random(self.number)
        operations: dict[str, Callable[[httpx.Client, int], None]] = {
            "add the same fact": lambda http, _: self._add(http, {"text": LOCKER}),
            "add a subject's value": lambda http, _: self._add(
                http, {"text": f"I live in {rng.choice(CITIES)}.", "subject": "home"}
            ),
            "edit": lambda http, n: self._edit(http, f"My seat is {self.number}-{n}."),
            "dismiss": lambda http, _: self._dismiss(http, rng),
            "chat": lambda http, _: self._chat(http, rng),
        }
        start.wait()
        with httpx.Client(timeout=120, headers={"X-User-Id": self.user}) as http:
            for n in range(OPERATIONS):
                kind = rng.choice(list(operations))
                try:
                    operations[kind](http, n)
                except httpx.HTTPError as exc:
                    self.history.failed(f"{kind}: {type(exc).__name__}: {exc}")
                self.history.done(kind)

    def _url(self, path: str) -> str:
        self._turn += 1
        return self.urls[(self._turn + self.number) % len(self.urls)] + path

    def _answered(self, kind: str, response: httpx.Response, *ok: int) -> bool:
        self.statuses.append(response.status_code)
        if response.status_code not in ok:
            self.history.failed(f"{kind}: {response.status_code} {response.text[:200]}")
            return False
        return True

    def _add(self, http: httpx.Client, body: dict[str, str]) -> None:
        self._answered("add", http.post(self._url("/v1/facts"), json=body), 200, 201)

    def _edit(self, http: httpx.Client, new_text: str) -> None:
        response = http.patch(self._url(f"/v1/facts/{self.seat}"), json={"text": new_text})
        if self._answered("edit", response, 200):
            self.history.edited(self.user, self.seat, new_text)

    def _dismiss(self, http: httpx.Client, rng: random.Random) -> None:
        listed = http.get(self._url("/v1/facts"))
        if not self._answered("list", listed, 200):
            return
        others = [f["id"] for f in listed.json()["facts"] if f["id"] != self.seat]
        if others:
            gone = http.delete(self._url(f"/v1/facts/{rng.choice(others)}"))
            self._answered("dismiss", gone, 204)

    def _chat(self, http: httpx.Client, rng: random.Random) -> None:
        said = f"I live in {rng.choice(CITIES)}. Please remember that my gym is {rng.choice(GYMS)}."
        messages = [*self.said, {"role": "user", "content": said}]
        headers = {"X-Conversation-Id": f"{self.user}-c{self.number}"}
        response = http.post(
            self._url("/v1/chat/completions"), json={"messages": messages}, headers=headers
        )
        if self._answered("chat", response, 200):
            reply = response.json()["choices"][0]["message"]["content"]
            self.said = [*messages, {"role": "assistant", "content": reply}]


def _settled(engine: Engine, fake: FakeOllama) -> Callable[[], bool]:
    """Queues empty, and no summary or extraction asked for 3 s."""
    seen = {"calls": -1, "since": time.monotonic()}

    def settled() -> bool:
        with engine.connect() as conn:
            queued = conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM embedding_outbox) "
                    "+ (SELECT count(*) FROM vector_tasks)"
                )
            ).scalar()
        calls = len(fake.summary_starts) + len(fake.extractions)
        if calls != seen["calls"] or fake.summaries_in_flight:
            seen.update(calls=calls, since=time.monotonic())
        return queued == 0 and time.monotonic() - seen["since"] > 3.0

    return settled


def test_fact_changes_through_three_replicas_leave_no_anomaly(
    tmp_path: Path,
    postgres_url: str,
    fake_llm: FakeOllama,
    make_server: Callable[..., RunningServer],
) -> None:
    url = _fresh_postgres_database(postgres_url)
    engine = create_sql_engine(url)
    upgrade(engine)
    fake_llm.extraction_reply = extract_last_home
    settings = {
        "database_url": url,
        "vector_backend": "pgvector",
        "log_level": "WARNING",
        "memory_tier2_summary_threshold": 4,
        "memory_tier1_keep_after_consolidation": 2,
        "consolidation_learn_facts": "true",
    }
    servers = [make_server(tmp_path / f"r{n}", **settings).start() for n in range(REPLICAS)]
    urls = [server.url for server in servers]
    history = History()
    clients = []
    for user in (f"u{n}" for n in range(USERS)):
        seat = httpx.post(
            f"{urls[0]}/v1/facts", json={"text": "My seat is 14C."}, headers={"X-User-Id": user}
        ).json()["fact"]["id"]
        clients += [
            FactClient(user, len(clients) + n, urls, seat, history) for n in range(CLIENTS_PER_USER)
        ]
    start = threading.Barrier(len(clients))
    threads = [threading.Thread(target=c.run, args=(start,), daemon=True) for c in clients]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
        assert not thread.is_alive(), "a client did not finish"
    seconds = time.monotonic() - began
    wait_for(_settled(engine, fake_llm), 180, "every replica's consolidations to finish")
    report = check(engine, history)
    statuses = [status for client in clients for status in client.statuses]
    server_errors = sum(status >= 500 for status in statuses)
    with engine.connect() as conn:
        counted = conn.execute(text("SELECT origin, count(*) FROM facts GROUP BY origin"))
        origins = {row[0]: row[1] for row in counted}
    learnt, saved = origins.get("extracted", 0), origins.get("explicit", 0)
    print(
        f"\nPostgreSQL, {REPLICAS} replicas: {report.line(len(clients), history)}; "
        f"{len(statuses)} HTTP requests in {seconds:.0f} s, {server_errors} 5xx; "
        f"{len(fake_llm.extractions)} extractions, {learnt} facts learnt, {saved} saved on "
        f"request\nanomalies: {report.anomalies[:8]}\nerrors: {history.errors[:8]}"
    )
    assert sum(history.operations.values()) == len(clients) * OPERATIONS
    assert history.edits, "no edit was acknowledged: the workload tests nothing"
    assert fake_llm.extractions, "no consolidation learnt facts: the workload tests less"
    assert report.anomalies == []
    assert history.errors == []
    assert server_errors == 0
    engine.dispose()
