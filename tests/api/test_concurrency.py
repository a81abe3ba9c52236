"""Concurrent chat clients against a real server: no errors, contiguous unique turn numbers.

20 clients send 10 chat requests each to 4 shared conversations at once (``POST
/v1/chat/completions``, only the new message and a ``conversation_id``), on SQLite and on
PostgreSQL. The chat model is the stub LLM of ``benchmarks/loadgen.py`` (a fixed reply at
once): turns are only stored by chatting, and what is tested is the server's writes, not a
model. Afterwards every conversation must hold turns numbered exactly 1..N, N = 2 x the
acknowledged requests, each acknowledged message once and followed by its reply.
``benchmarks/bench_load.py`` is the full-size version (50 clients x 100 turns).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.loadgen import StubOllama, check_conversations, run_clients
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

CLIENTS, TURNS, CONVERSATIONS = 20, 10, 4
USER = "concurrency-user"


@pytest.fixture(scope="module")
def stub_llm_url() -> Iterator[str]:
    with StubOllama() as stub:
        yield stub.url


@pytest.fixture
def server(sql_url: str, tmp_path: Path, stub_llm_url: str) -> Iterator[RunningServer]:
    data_dir = tmp_path / "data"
    env = server_env(data_dir, stub_llm_url, database_url=sql_url, log_level="WARNING")
    running = RunningServer(data_dir, env).start()
    yield running
    running.stop()


def test_concurrent_clients_get_no_errors_and_contiguous_turns(server: RunningServer) -> None:
    ids = [f"shared-{n}" for n in range(CONVERSATIONS)]
    outcome = asyncio.run(run_clients(server.url, USER, ids, clients=CLIENTS, turns=TURNS))

    assert outcome.error_count == 0, (dict(outcome.errors), outcome.error_examples)
    acknowledged = dict(outcome.acknowledged)
    assert sum(len(texts) for texts in acknowledged.values()) == CLIENTS * TURNS
    assert sorted(acknowledged) == sorted(ids)
    check = check_conversations(server.url, USER, acknowledged)
    assert check["ok"], check["problems"]
    assert check["turns_checked"] == 2 * CLIENTS * TURNS
    log = server.log.read_text() if server.log else ""
    assert "Traceback" not in log, log[-3000:]
