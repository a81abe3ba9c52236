"""The extraction benchmark scores a run's facts again without a model (``--rescore``), and
its combined call (a range's summary and facts in one) parses and carries the summary."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from memory_chain.bench import benchmarks_dir
from memory_chain.messages import message_text
from memory_chain.schemas import Turn
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from tests.bench_scripts import benchmark_module
from tests.fake_chat import Scripted


def _conversation(name: str, speaker: str, gold: list[str], found: list[str]) -> dict[str, object]:
    return {"name": name, "speaker": speaker, "sessions": [{"gold": gold, "found": found}]}


def test_a_run_s_facts_are_scored_one_to_one_on_held_out_thresholds(tmp_path: Path) -> None:
    conversations = [
        _conversation(
            "conv-a",
            "Ana",
            ["Ana works as a nurse at the city hospital.", "Ana has a dog named Rex."],
            # Three copies of one right fact: one-to-one, one of them counts.
            ["I work as a nurse at the city hospital."] * 3,
        ),
        _conversation(
            "conv-b",
            "Bo",
            ["Bo is learning to play the violin.", "Bo moved to Porto last year."],
            ["I am learning to play the violin.", "I moved to Porto last year."],
        ),
        _conversation(
            "conv-c",
            "Cy",
            ["Cy runs a small bakery downtown."],
            ["I like the color blue."],  # nothing like the observation
        ),
    ]
    earlier = tmp_path / "earlier.json"
    earlier.write_text(
        json.dumps({"results": {"models": {"scripted": {"conversations": conversations}}}})
    )
    out = tmp_path / "rescored.json"
    script = benchmarks_dir() / "bench_extraction.py"
    done = subprocess.run(
        [sys.executable, str(script), "--rescore", str(earlier), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=script.parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())["results"]["models"]["scripted"]
    counts = {fold["conversation"]: fold["counts"] for fold in figures["folds"]}
    assert counts["conv-a"] == {"matched": 1, "gold": 2, "found": 3}
    assert counts["conv-b"] == {"matched": 2, "gold": 2, "found": 2}
    assert counts["conv-c"] == {"matched": 0, "gold": 1, "found": 1}
    assert figures["precision"] == 3 / 6
    assert figures["recall"] == 3 / 5
    # The many-to-one rule at the same thresholds counts the copies: 5 of 6 facts correct.
    assert figures["lenient"]["precision"] == 5 / 6
    assert all(0.4 <= fold["threshold"] <= 0.8 for fold in figures["folds"])
    assert "pooled one-to-one: P 0.50, R 0.60" in done.stdout


def test_the_combined_call_writes_the_running_summary_and_files_the_facts(
    sqlite_store: SQLStore,
) -> None:
    combined = {
        "summary": "The user moved to Porto.",
        "facts": [
            {"text": "I moved to Porto.", "kind": "biography", "subject": "home", "turn": 1},
        ],
    }
    llm = Scripted(replies=[json.dumps(combined), '{"facts": []}'])
    chat = [
        Turn("c", 1, "user", "I moved to Porto last month.", datetime(2026, 5, 1, tzinfo=UTC)),
        Turn("c", 2, "assistant", "Nice!", datetime(2026, 5, 1, tzinfo=UTC)),
    ]
    with benchmark_module("combined_call") as module:
        extractor = module.CombinedExtractor(llm, FactStore(sqlite_store.database))
        found = extractor.extract("ana", chat)
        assert [f.text for f in found] == ["I moved to Porto."]
        # One call: the summary's rule, the earlier summary before the chat, the summary
        # asked first in the schema; the worked example's reply has a summary too.
        messages = llm.prompts[0]
        assert "summary" in message_text(messages[0])
        assert json.loads(message_text(messages[2]))["summary"]
        assert message_text(messages[3]).startswith("Earlier summary: (none)\n\nChat:\n[1] User:")
        # A reply without a summary (the second call) keeps the running one for the next.
        assert extractor.extract("ana", chat) == []
        assert extractor.summaries == ["The user moved to Porto.", None]
        assert message_text(llm.prompts[1][3]).startswith(
            "Earlier summary: The user moved to Porto.\n\n"
        )
