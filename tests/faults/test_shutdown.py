"""SIGTERM with a backlog: the server exits within its grace period and resumes at the next start.

A real server (``memory-chain serve``, the embedded stores, the real embedding model) and a
fake Ollama whose summaries take 60 s. Three conversations of 100 turns each are posted, which
queues a consolidation per conversation (each summarizes 40 turns per call) and 300 turns for
the tier-3 backfill. Once a summary is being generated, the server gets SIGTERM, as a
container runtime sends it: it must exit within ``shutdown_grace_seconds`` (and well before
the 10 s after which a runtime kills it), start no summary after the signal, and lose
nothing: at the next start the backlog is summarized and embedded without any request.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.faults.chat import health, wait_for
from tests.faults.fake_llm import FakeOllama
from tests.faults.stores import check_points, check_sql, read_stores
from tests.servers import RunningServer

pytestmark = pytest.mark.slow

GRACE = 3.0
CONVERSATIONS = ("backlog-a", "backlog-b", "backlog-c")
TURNS = 100


def _post_turns(http: httpx.Client, conversation_id: str) -> None:
    for start in range(0, TURNS, 50):
        turns = [
            {"role": "user" if n % 2 == 0 else "assistant", "content": f"{conversation_id} {n}"}
            for n in range(start, start + 50)
        ]
        response = http.post(f"/v1/conversations/{conversation_id}/turns", json={"turns": turns})
        assert response.status_code == 201, response.text


def _summarized_through(http: httpx.Client, conversation_id: str) -> int:
    response = http.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    return max((s["turn_range_end"] for s in response.json()["summaries"]), default=0)


def test_sigterm_with_a_backlog_exits_within_the_grace_period_and_resumes(
    tmp_path: Path, fake_llm: FakeOllama, make_server: Callable[..., RunningServer]
) -> None:
    fake_llm.summary_delay = 60.0
    server = make_server(tmp_path / "data", shutdown_grace_seconds=GRACE).start()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for conversation_id in CONVERSATIONS:
            _post_turns(http, conversation_id)
        wait_for(lambda: fake_llm.summaries_in_flight > 0, 30, "a summary in flight")
    assert server.process is not None
    assert server.log is not None
    first_log = server.log
    signalled = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        pytest.fail(f"the server was still running 30 s after SIGTERM:\n{first_log.read_text()}")
    exited = time.monotonic() - signalled
    server.process = None
    log = first_log.read_text()
    print(f"exited {exited:.2f} s after SIGTERM (grace {GRACE} s)")
    assert exited < GRACE + 2.0, log[-3000:]
    assert not [start for start in fake_llm.summary_starts if start > signalled]
    after_signal = log.split("Shutting down", 1)[1]
    assert "consolidating" not in after_signal, after_signal
    assert "abandoning" in after_signal, after_signal

    # Nothing was lost: every turn is stored; nothing was summarized yet.
    stores = read_stores(server.data_dir)
    check_sql(stores)
    check_points(stores, settled=False)
    assert {cid: len(turns) for cid, turns in stores.turns.items()} == dict.fromkeys(
        CONVERSATIONS, TURNS
    )
    assert not stores.summary_ranges

    # The next start resumes the backlog on its own: summaries and embeddings.
    fake_llm.summary_delay = 0.0
    server.start()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for conversation_id in CONVERSATIONS:
            wait_for(
                lambda c=conversation_id: _summarized_through(http, c) > TURNS - 10,
                120,
                f"{conversation_id} to be summarized after the restart",
            )
        wait_for(lambda: health(http)["tier3"]["queued_turns"] == 0, 120, "the backfill")
    server.stop()
    final = read_stores(server.data_dir)
    check_sql(final)
    check_points(final, settled=True)
