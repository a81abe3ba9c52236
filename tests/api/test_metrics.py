"""``GET /metrics`` of a real server after real chats: what an operator's Prometheus scrapes.

A ``memory-chain serve`` process with API keys and a metrics key, the fake Ollama as its
model (instant replies and summaries); the test chats through the OpenAI-compatible API,
asks to remember something (which consolidates at once), waits for the tier-3 backfill,
then scrapes and reads the text format back with prometheus_client's own parser.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

USER_KEY = "key-ana"
METRICS_KEY = "key-prometheus"
CONVERSATION = "metrics-1"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    fake = FakeOllama().start()
    data_dir = tmp_path_factory.mktemp("metrics") / "data"
    env = server_env(data_dir, fake.url, api_keys={USER_KEY: "ana"}, metrics_api_key=METRICS_KEY)
    server = RunningServer(data_dir, env).start()
    yield server
    server.stop()
    fake.stop()


def _chat(server: RunningServer, text: str) -> None:
    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {USER_KEY}", "X-Conversation-Id": CONVERSATION},
        json={"stream": True, "messages": [{"role": "user", "content": text}]},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert "data: [DONE]" in response.text


def _scrape(server: RunningServer, key: str = METRICS_KEY) -> tuple[str, Samples]:
    response = httpx.get(
        f"{server.url}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return response.text, samples


def _value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name`` over the samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


def test_metrics_need_a_key_when_keys_are_set(server: RunningServer) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = httpx.get(f"{server.url}/metrics", headers=headers, timeout=30)
        assert response.status_code == 401
        assert "metrics_api_key" in response.json()["detail"]
    _scrape(server, METRICS_KEY)
    _scrape(server, USER_KEY)  # any API key will do


def test_a_scrape_after_chats_shows_each_tier_model_and_queue(
    server: RunningServer, tmp_path: Path
) -> None:
    _chat(server, "My sister Lena lives in Porto.")
    _chat(server, "Please remember this: my passport expires in May 2031.")  # consolidates
    _chat(server, "Where does Lena live?")

    # The explicit save consolidates in the background; the backfill embeds the turns.
    deadline = time.monotonic() + 120
    while True:
        text, samples = _scrape(server)
        done = _value(samples, "memory_chain_consolidations_total", outcome="stored") >= 1
        drained = _value(samples, "memory_chain_tier3_queue_turns") == 0
        if (done and drained) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    (tmp_path / "metrics.txt").write_text(text)

    chat = {"route": "/v1/chat/completions", "method": "POST", "status": "200"}
    assert _value(samples, "memory_chain_http_request_duration_seconds_count", **chat) == 3
    for tier in ("tier1", "tier2", "tier3", "facts"):
        assert _value(samples, "memory_chain_retrieval_duration_seconds_count", tier=tier) >= 3
    assert _value(samples, "memory_chain_embedding_duration_seconds_count", kind="query") >= 3
    assert _value(samples, "memory_chain_embedding_duration_seconds_count", kind="documents") >= 1
    llm = "memory_chain_llm_duration_seconds_count"
    assert _value(samples, llm, model_role="chat", outcome="ok") >= 3
    assert _value(samples, llm, model_role="summary", outcome="ok") >= 1
    assert _value(samples, "memory_chain_consolidations_total", outcome="stored") >= 1
    assert _value(samples, "memory_chain_consolidations_total", outcome="failed") == 0
    assert _value(samples, "memory_chain_consolidations_waiting") == 0
    assert _value(samples, "memory_chain_tier3_queue_turns") == 0
    assert _value(samples, "memory_chain_stored_rows", table="conversation_turns") == 6
    assert _value(samples, "memory_chain_stored_rows", table="conversations") == 1
    assert _value(samples, "memory_chain_vector_points", collection="conversation_memory") == 6
    assert _value(samples, "memory_chain_stored_rows", table="facts") == 1
    assert _value(samples, "memory_chain_info", tier2="sqlite") == 1


def test_unknown_routes_are_counted_without_their_path(server: RunningServer) -> None:
    response = httpx.get(f"{server.url}/no/such/path/123", timeout=30)
    assert response.status_code == 404
    _, samples = _scrape(server)
    assert _value(samples, "memory_chain_http_request_duration_seconds_count", route="unmatched")
    assert not any("/no/such" in dict(labels).get("route", "") for _, labels in samples)
