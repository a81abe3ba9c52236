"""Exports read slowly hold no database connection: every other request still answers.

``GET /v1/users/me/export`` streams at its client's pace. Read in short transactions
(:mod:`memory_chain.tiers.sql.export`), it holds a pooled connection only while a
conversation (or a user's facts, or a page of store items) is read, never while the client
reads. Here more slow readers than the pool has connections (10, and 10 more in overflow)
each start an export of several megabytes and stop reading after its first bytes, over a
socket with a small receive buffer, so the server's writes block; other requests (reads,
a write, another user's whole export) must then answer. With a connection pinned per
download they waited for the pool's timeout (30 s) and failed. Finally a whole export of the
slowly read user is checked: every conversation, whole, once.

A real ``memory-chain serve`` (uvicorn) on SQLite and on PostgreSQL; tier 3 and the LLM are
off (an export reads tier 2 only).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest

from memory_chain.config import MemorySettings
from memory_chain.schemas import NewTurn
from memory_chain.services import open_services
from tests.conftest import _fresh_postgres_database
from tests.postgres import free_port
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

READER, OTHER = "slow-reader", "someone-else"
CONVERSATIONS, TURNS, CHARS = 40, 10, 20_000  # about 8 MB of export
#: More than the pool's connections: 10, and as many again in overflow.
SLOW_READERS = 24
#: Generous, and below the pool's 30 s timeout that a pinned pool made requests wait for.
ANSWER_WITHIN = 20.0


def _seed(settings: MemorySettings) -> None:
    services = open_services(settings)
    try:
        for number in range(CONVERSATIONS):
            turns = [
                NewTurn(
                    "user" if turn % 2 == 0 else "assistant", f"c{number} t{turn} " * (CHARS // 8)
                )
                for turn in range(TURNS)
            ]
            services.store.append_turns(f"c{number:03d}", turns, user_id=READER)
        services.store.append_turns("mine", [NewTurn("user", "A short one.")], user_id=OTHER)
    finally:
        services.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp(f"slow-export-{request.param}") / "data"
    extra: dict[str, object] = {"memory_tier3_enabled": False}
    if request.param == "postgresql":
        extra["database_url"] = _fresh_postgres_database(request.getfixturevalue("postgres_url"))
    _seed(
        MemorySettings(
            data_dir=data_dir,
            database_url=extra.get("database_url"),
            memory_tier3_enabled=False,
            llm_fallback="off",
        )
    )
    no_llm = f"http://127.0.0.1:{free_port()}"
    running = RunningServer(data_dir, server_env(data_dir, no_llm, **extra)).start()
    yield running
    running.stop()


def _slow_reader(server: RunningServer) -> socket.socket:
    """An export started, its first bytes read, then left unread (a small receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(ANSWER_WITHIN)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(
        f"GET /v1/users/me/export HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"X-User-Id: {READER}\r\n\r\n".encode()
    )
    first = sock.recv(1024)
    assert first.startswith(b"HTTP/1.1 200"), first[:200]
    return sock


def test_slow_export_readers_leave_the_pool_to_other_requests(server: RunningServer) -> None:
    readers = [_slow_reader(server) for _ in range(SLOW_READERS)]
    try:
        with httpx.Client(base_url=server.url, timeout=ANSWER_WITHIN) as http:
            other = {"X-User-Id": OTHER}
            listed = http.get("/v1/conversations", headers=other)
            assert listed.status_code == 200, listed.text
            assert [c["conversation_id"] for c in listed.json()] == ["mine"]
            added = http.post("/v1/facts", json={"text": "I read fast."}, headers=other)
            assert added.status_code == 201, added.text
            export = http.get("/v1/users/me/export", headers=other)
            assert export.status_code == 200, export.text
            kinds = [json.loads(line)["format"] for line in export.text.splitlines()]
            assert kinds == ["memory-chain/conversation", "memory-chain/fact"]
            page = http.get(
                "/v1/conversations/c000/turns", params={"limit": 2}, headers={"X-User-Id": READER}
            )
            assert page.status_code == 200, page.text
            assert len(page.json()["turns"]) == 2
    finally:
        for sock in readers:
            sock.close()
    _a_whole_export_is_complete(server)


def _a_whole_export_is_complete(server: RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as http:
        export = http.get("/v1/users/me/export", headers={"X-User-Id": READER})
    assert export.status_code == 200
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert [line["conversation_id"] for line in lines] == [
        f"c{number:03d}" for number in range(CONVERSATIONS)
    ]
    for number, line in enumerate(lines):
        assert line["turn_count"] == TURNS
        assert [turn["turn_number"] for turn in line["turns"]] == list(range(1, TURNS + 1))
        assert line["turns"][3]["content"].startswith(f"c{number} t3 ")
