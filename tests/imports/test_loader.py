"""Storing imported history: dated, idempotent, resumable, no commands fired, facts learnt later.

The files are those of ``data/`` (written by hand in each format); the store is SQLite in a
temp folder; consolidation runs with fake models (a fixed summary, scripted facts).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from typer.testing import CliRunner

from memory_chain.cli import app
from memory_chain.imports import IMPORTS_NAMESPACE, history_progress, import_history
from memory_chain.manager import MemoryManager
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.store_items import StoreItems
from tests.imports.consolidating import TRIP, consolidate_trip

DATA = Path(__file__).parent / "samples"


@pytest.fixture
def manager(sqlite_store: SQLStore) -> MemoryManager:
    return MemoryManager(sqlite_store, TurnBuffer())


def test_chatgpt_import_keeps_times_and_titles_and_a_second_import_adds_nothing(
    manager: MemoryManager,
) -> None:
    report = import_history(manager, DATA / "chatgpt_conversations.json", user="ana")
    assert (report.conversations, report.turns) == (2, 7)
    assert (report.skipped_empty, report.skipped_other) == (2, 4)
    assert report.failed == []
    assert report.diverged == []
    turns = manager.turns(TRIP, "ana")
    assert [t.turn_number for t in turns] == [1, 2, 3, 4, 5]
    assert turns[0].timestamp == datetime(2024, 4, 25, 9, 0, tzinfo=UTC)
    info = manager.conversation(TRIP, "ana")
    assert info is not None
    assert info.last_message_at == datetime(2024, 4, 25, 9, 6, tzinfo=UTC)
    title = StoreItems(manager.store.database).get("ana", IMPORTS_NAMESPACE, TRIP)
    assert title is not None
    assert title.value == {
        "title": "Trip to Lisbon",
        "format": "chatgpt",
        "source_id": "6627a1b0-1111-4c2d-9e8f-0a1b2c3d4e5f",
    }

    again = import_history(manager, DATA / "chatgpt_conversations.json", user="ana")
    assert (again.conversations, again.turns, again.unchanged) == (0, 0, 2)
    assert len(manager.turns(TRIP, "ana")) == 5


def test_imported_remember_and_forget_sentences_file_nothing(manager: MemoryManager) -> None:
    manager.add_fact("ana", _draft("I grow basil on the balcony."))
    for name in ("chatgpt_conversations.json", "plain.jsonl", "open_webui_export.json"):
        import_history(manager, DATA / name, user="ana")
    # "Remember that my locker code is 4471." / "... the deadline is 14 October." filed
    # nothing; "Forget the basil" dismissed nothing.
    assert [f.text for f in manager.facts("ana")] == ["I grow basil on the balcony."]
    # Said now, the same sentence is a request (the chat's path is unchanged).
    manager.add_turns("now", "ana", [HumanMessage("Remember that my locker code is 4471.")])
    assert "my locker code is 4471." in {f.text.lower() for f in manager.facts("ana")}


def _draft(text: str) -> object:
    from memory_chain.facts.model import FactDraft

    return FactDraft(text)


def test_dry_run_stores_nothing_and_says_what_would_be(manager: MemoryManager) -> None:
    report = import_history(manager, DATA / "plain.csv", user="ana", dry_run=True)
    assert (report.conversations, report.turns, report.skipped_empty) == (2, 4, 1)
    assert "would import 4 turns in 2 conversations" in report.describe()
    assert manager.conversations("ana") == []


def test_open_webui_chats_go_to_each_account_as_the_proxy_names_it(
    manager: MemoryManager,
) -> None:
    report = import_history(manager, DATA / "open_webui_export.json", namespace="webui")
    ada = "webui:7d0e8f3a-5b1c-4a2d-9e6f-0b1c2d3e4f5a"
    assert report.users == {ada, "webui:2b3c4d5e-6f70-4a1b-8c9d-0e1f2a3b4c5d"}
    chat = "3f1c2b9e-0a4d-4e7f-8b6a-1c2d3e4f5a6b"
    assert next(t.content for t in manager.turns(chat, ada)).startswith("I planted 12 tomato")


def test_a_chat_continued_since_gets_its_new_turns_and_an_edited_one_is_left(
    manager: MemoryManager, tmp_path: Path
) -> None:
    chats = json.loads((DATA / "open_webui_export.json").read_text())
    piano = chats[1]
    # Held through the proxy already: the first exchange (whitespace aside).
    manager.add_turns(
        piano["id"],
        "bob",
        [HumanMessage("My piano teacher is called  Mrs Okafor-3390."), AIMessage("Lovely!")],
    )
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps([piano]))
    report = import_history(manager, edited, user="bob")
    assert report.diverged == [piano["id"]]
    assert len(manager.turns(piano["id"], "bob")) == 2

    manager.delete_conversation(piano["id"], "bob")
    manager.add_turns(
        piano["id"], "bob", [HumanMessage("My piano teacher is called Mrs Okafor-3390.")]
    )
    report = import_history(manager, edited, user="bob")
    assert (report.conversations, report.turns) == (1, 1)
    assert [t.role for t in manager.turns(piano["id"], "bob")] == ["user", "assistant"]


def test_a_failing_conversation_is_named_and_the_import_resumes(
    sqlite_store: SQLStore, tmp_path: Path
) -> None:
    rows = [
        {"conversation": "short", "role": "user", "content": "Fine."},
        {"conversation": "long", "role": "user", "content": "x" * 500},
        {"conversation": "after", "role": "user", "content": "Also fine."},
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    strict = MemoryManager(SQLStore(sqlite_store.engine, max_message_chars=100), TurnBuffer())
    report = import_history(strict, path, user="ana")
    assert (report.conversations, report.turns) == (2, 2)
    (failure,) = report.failed
    assert failure.conversation_id == "import-long"
    assert "500 characters" in failure.error
    assert "run the same import again to resume" in report.describe()

    relaxed = MemoryManager(sqlite_store, TurnBuffer())
    resumed = import_history(relaxed, path, user="ana")
    assert (resumed.conversations, resumed.turns, resumed.unchanged) == (1, 1, 2)


def test_facts_are_learnt_by_consolidating_the_imported_ranges_dated_by_them(
    manager: MemoryManager, sqlite_store: SQLStore
) -> None:
    import_history(manager, DATA / "chatgpt_conversations.json", user="ana")
    waiting = history_progress(sqlite_store, user_id="ana", queued=False)
    assert (waiting.to_consolidate, waiting.unsummarized_turns) == (2, 7)

    consolidate_trip(sqlite_store, manager)
    (learnt,) = manager.facts("ana")
    assert (learnt.text, learnt.origin, learnt.turns) == (
        "I stay at the Hotel Baixa-7733.",
        "extracted",
        (3, 3),
    )
    assert learnt.valid_from == datetime(2024, 4, 25, 9, 4, tzinfo=UTC)
    (summary,) = manager.summaries(TRIP, "ana")
    # Dated by the range it covers, not by when it was written.
    assert summary.created_at == datetime(2024, 4, 25, 9, 6, tzinfo=UTC)
    left = history_progress(sqlite_store, user_id="ana", queued=False)
    assert (left.to_consolidate, left.unsummarized_turns) == (1, 2)


def test_the_cli_imports_every_format_and_says_what_it_left_out(tmp_path: Path) -> None:
    env = {
        "MEMORY_CHAIN_DATA_DIR": str(tmp_path / "data"),
        "MEMORY_CHAIN_DATABASE_URL": None,
        "MEMORY_CHAIN_MEMORY_TIER3_ENABLED": "false",
        "MEMORY_CHAIN_LLM_FALLBACK": "off",
    }
    runner = CliRunner()
    dry = runner.invoke(
        app, ["import", str(DATA / "chatgpt_conversations.json"), "--dry-run"], env=env
    )
    assert dry.exit_code == 0, dry.output
    assert "would import 7 turns in 2 conversations (chatgpt, 1 users)" in dry.stdout
    assert "left out 2 empty messages and 4 others" in dry.stdout
    for name in ("chatgpt_conversations.json", "open_webui_export.json", "plain.csv"):
        result = runner.invoke(app, ["import", str(DATA / name), "--user", "ana"], env=env)
        assert result.exit_code == 0, result.output
        assert "imported" in result.stdout
    assert "wait to be consolidated" in result.stdout
    again = runner.invoke(app, ["import", str(DATA / "plain.jsonl"), "--user", "ana"], env=env)
    assert "imported 0 turns in 0 conversations" in again.stdout
    assert "2 conversations already stored" in again.stdout
    forced = runner.invoke(app, ["import", str(DATA / "plain.csv"), "--format", "chatgpt"], env=env)
    assert forced.exit_code == 1
    assert "error:" in forced.stderr

    engine = create_sql_engine(f"sqlite:///{tmp_path / 'data' / 'memory.db'}")
    upgrade(engine)
    store = SQLStore(engine)
    assert len(store.list_conversations(user_id="ana")) == 6
    engine.dispose()
