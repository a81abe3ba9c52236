"""Persistence across a process restart: what one process stored, the next one reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.deprecated_doors import USES_DEPRECATED_HISTORIES

pytestmark = USES_DEPRECATED_HISTORIES

WRITER = textwrap.dedent(
    """
    import os, sys
    from langchain_core.messages import AIMessage, HumanMessage
    from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
    from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade

    engine = create_sql_engine(sys.argv[1])
    upgrade(engine)
    store = SQLStore(engine)
    history = BufferChatMessageHistory(TurnBuffer(max_turns=4), "trip", source=store, user_id="ana")
    for i in range(1, 7):
        history.add_messages([HumanMessage(f"question {i}"), AIMessage(f"answer {i}")])
    store.add_summary(
        "trip", "Ana asked six questions.", (1, 12), running_summary="Six Qs.", user_id="ana"
    )
    print("ACK", flush=True)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), 9)  # no clean shutdown: nothing is flushed on exit
    """
)

READER = textwrap.dedent(
    """
    import json, sys
    from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
    from memory_chain.tiers.sql import SQLStore, check_schema, create_sql_engine

    engine = create_sql_engine(sys.argv[1])
    check_schema(engine)
    store = SQLStore(engine)
    history = BufferChatMessageHistory(TurnBuffer(max_turns=4), "trip", source=store, user_id="ana")
    info = store.get_conversation("trip", user_id="ana")
    print(json.dumps({
        "tier1": [m.content for m in history.messages],
        "turns": [t.turn_number for t in store.get_turns("trip", user_id="ana")],
        "summary": info.summary,
        "summaries": [s.summary_text for s in store.get_summaries("trip", user_id="ana")],
    }))
    """
)


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_conversation_survives_restart(sql_url: str, ending: str) -> None:
    written = _run(WRITER, sql_url, ending)
    assert "ACK" in written.stdout, written.stderr
    if ending == "kill":
        assert written.returncode == -signal.SIGKILL
    else:
        assert written.returncode == 0, written.stderr
    read = _run(READER, sql_url)
    assert read.returncode == 0, read.stderr
    state = json.loads(read.stdout)
    assert state["turns"] == list(range(1, 13))
    assert state["tier1"] == ["question 5", "answer 5", "question 6", "answer 6"]
    assert state["summary"] == "Six Qs."
    assert state["summaries"] == ["Ana asked six questions."]
