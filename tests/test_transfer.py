"""``memory-chain export`` / ``import`` / ``consolidate``, through the real CLI.

Real SQLite databases in temp folders, the real embedding model and embedded vector index for
the tier-3 rebuild, and the real local LLM for ``consolidate``. The store-level transfer
functions are also run on PostgreSQL (the ``store`` fixture). Users' facts travel as their
own lines, every status with its history; ``GET /v1/users/me/export`` is run in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from typer.testing import CliRunner, Result

from memory_chain.api import create_app
from memory_chain.cli import app
from memory_chain.config import MemorySettings
from memory_chain.facts.model import STATUSES, Fact, FactDraft, FactSource
from memory_chain.local_llm.model import MODEL_NAME
from memory_chain.schemas import NewTurn, TokenUsage
from memory_chain.services import open_services
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.export import read_conversations, read_export, read_facts
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.models import (
    conversations,
    fact_sources,
    facts,
    outbox,
    summaries,
    turns,
)
from memory_chain.tiers.sql.restore import ConversationExistsError, write_conversation
from memory_chain.tiers.sql.rows import ConversationRecord
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tiers.vectors.index import VectorFilter
from memory_chain.transfer import FACT_FORMAT, FORMAT, VERSION
from tests.postgres import free_port

T0 = datetime(2026, 5, 1, 9, 0, 0, 123456, tzinfo=UTC)
TRIP = [
    ("user", "I'm planning a holiday in Lisbon with my sister Marta, café included ☕."),
    ("assistant", "Lovely! When do you fly?"),
    ("user", "We fly from Berlin on the 3rd of May.\nBack on the 10th."),
    ("assistant", 'Noted: "3-10 May".'),
    ("user", "Our budget is 2000 euros in total."),
    ("assistant", "That is workable for a week."),
]


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    return {"MEMORY_CHAIN_DATA_DIR": str(data_dir), "MEMORY_CHAIN_LOG_LEVEL": "WARNING", **extra}


def _cli(data_dir: Path, *args: str, **extra: str) -> Result:
    """Run the CLI in this process (the embedding model stays loaded between runs)."""
    # None unsets: SQLite under data_dir whatever the environment of the test run says.
    env: dict[str, str | None] = {"MEMORY_CHAIN_DATABASE_URL": None, **_env(data_dir, **extra)}
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def _store(data_dir: Path, *, queue: bool = False) -> SQLStore:
    data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_sql_engine(f"sqlite:///{data_dir / 'memory.db'}")
    upgrade(engine)
    return SQLStore(engine, queue_embeddings=queue)


def _rows(store: SQLStore) -> dict[str, list[dict[str, object]]]:
    """Every row of the three tables, without the surrogate ``id`` keys, in a stable order."""
    orders = {
        "conversations": (conversations.c.conversation_id,),
        "conversation_turns": (turns.c.conversation_id, turns.c.turn_number),
        "conversation_summaries": (summaries.c.conversation_id, summaries.c.turn_range_start),
    }
    result: dict[str, list[dict[str, object]]] = {}
    with store.engine.connect() as conn:
        for table in (conversations, turns, summaries):
            rows = conn.execute(select(table).order_by(*orders[table.name])).mappings()
            result[table.name] = [{k: v for k, v in row.items() if k != "id"} for row in rows]
    return result


def _fill(store: SQLStore) -> None:
    """Three conversations of two users: tokens, summaries, statuses, odd characters."""
    trip = [
        NewTurn(
            role,  # type: ignore[arg-type]
            text,
            timestamp=T0 + timedelta(minutes=i, microseconds=i * 7),
            tokens=(
                None
                if i == 1
                else TokenUsage(total=10 + i, prompt=3 if i % 2 else None, completion=7 + i)
            ),
        )
        for i, (role, text) in enumerate(TRIP)
    ]
    store.append_turns("trip", trip[:4], user_id="ana")
    store.append_turns(
        "work",
        [NewTurn("user", "Don't forget: the quarterly report is due Friday.")],
        user_id="ana",
    )
    store.append_turns("trip", trip[4:], user_id="ana")
    store.add_summary(
        "trip",
        "Ana and her sister Marta go to Lisbon, 3-10 May.",
        (1, 4),
        token_count=14,
        running_summary="Ana plans a Lisbon trip with Marta, 3-10 May, 2000 euros.",
        user_id="ana",
    )
    store.set_status("work", "archived", user_id="ana")
    store.append_turns(
        "bob-1",
        [NewTurn("user", "My dog is called Rex."), NewTurn("assistant", "Hello Rex!")],
        user_id="bob",
    )


@pytest.fixture
def source(tmp_path: Path) -> Path:
    data_dir = tmp_path / "source"
    store = _store(data_dir)
    _fill(store)
    store.engine.dispose()
    return data_dir


def test_round_trip_is_exact_and_rebuilds_tier3(
    tmp_path: Path, source: Path, embeddings: SentenceEmbeddings
) -> None:
    first = tmp_path / "first.jsonl"
    exported = _cli(source, "export", str(first))
    assert exported.exit_code == 0, exported.output
    assert "exported 3 conversations (9 turns, 1 summaries)" in exported.stderr
    lines = first.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    trip = json.loads(lines[0])
    assert (trip["format"], trip["version"]) == (FORMAT, VERSION)
    assert trip["conversation_id"] == "trip"
    assert trip["user_id"] == "ana"
    assert trip["turn_count"] == 6
    # The turns' own text: each counted turn's completion, not its total.
    assert trip["total_tokens"] == sum(7 + i for i in range(6) if i != 1)
    assert trip["summary"] == "Ana plans a Lisbon trip with Marta, 3-10 May, 2000 euros."
    assert [t["turn_number"] for t in trip["turns"]] == [1, 2, 3, 4, 5, 6]
    assert trip["turns"][0]["content"] == TRIP[0][1]  # not \u-escaped, kept exactly
    assert "☕" in lines[0]
    assert trip["turns"][2]["timestamp"] == "2026-05-01T09:02:00.123470Z"
    assert trip["turns"][1]["tokens"] is None
    assert trip["turns"][3]["tokens"] == {"total": 13, "prompt": 3, "completion": 10}
    assert trip["summaries"] == [
        {
            "turn_range_start": 1,
            "turn_range_end": 4,
            "summary_text": "Ana and her sister Marta go to Lisbon, 3-10 May.",
            "token_count": 14,
            "created_at": trip["summaries"][0]["created_at"],
        }
    ]
    assert json.loads(lines[1])["status"] == "archived"

    target = tmp_path / "target"
    imported = _cli(target, "import", str(first))
    assert imported.exit_code == 0, imported.output
    assert "imported 3 conversations (9 turns, 1 summaries), skipped 0" in imported.stdout
    assert "embedded 9 turns" in imported.stdout

    second = tmp_path / "second.jsonl"
    again = _cli(target, "export", str(second))
    assert again.exit_code == 0, again.output
    assert second.read_bytes() == first.read_bytes()
    source_store, target_store = _store(source), _store(target)
    try:
        assert _rows(target_store) == _rows(source_store)
        with target_store.engine.connect() as conn:
            assert conn.execute(select(outbox)).all() == []  # every imported turn embedded
    finally:
        source_store.engine.dispose()
        target_store.engine.dispose()

    # Tier 3 was rebuilt: a paraphrase finds the imported turn, in a fresh process state.
    services = open_services(MemorySettings(data_dir=target, llm_fallback="off"))
    try:
        assert services.vectors is not None
        assert services.vectors.index.count() == 9
        vector = services.vectors.embeddings.embed_query("How much money can we spend?")
        hits = services.vectors.index.search(vector, VectorFilter(user_id="ana"), 3)
        assert hits[0].payload.conversation_id == "trip"
        assert hits[0].payload.turn_number == 5
        assert hits[0].payload.timestamp == T0 + timedelta(minutes=4, microseconds=28)
        assert services.vectors.index.search(vector, VectorFilter(user_id="nobody"), 3) == []
        # Facts come from the file's fact lines only (this one has none), not from the turns.
        assert services.manager.fact_store.count() == dict.fromkeys(STATUSES, 0)
        # Tier 2's keyword index (FTS triggers) sees imported turns too.
        keyword = services.store.search("Rex", user_id="bob")
        assert [hit.conversation_id for hit in keyword if hit.kind == "turn"] == ["bob-1", "bob-1"]
    finally:
        services.close()


def test_export_to_stdout_is_clean_jsonl_and_scoped(source: Path) -> None:
    cli = str(Path(sys.executable).parent / "memory-chain")
    env = {**os.environ, **_env(source)}
    env.pop("MEMORY_CHAIN_DATABASE_URL", None)
    result = subprocess.run(  # a real process: stdout and stderr are separate streams
        [cli, "export", "-", "--user", "ana"],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode("utf-8").splitlines()
    assert [json.loads(line)["conversation_id"] for line in lines] == ["trip", "work"]
    assert b"exported 2 conversations" in result.stderr

    one = _cli(source, "export", "--conversation", "bob-1")
    assert one.exit_code == 0
    assert [json.loads(line)["conversation_id"] for line in one.stdout.splitlines()] == ["bob-1"]
    assert "exported" not in one.stdout

    kept = source / "kept.jsonl"
    kept.write_text("earlier export\n")
    missing = _cli(source, "export", str(kept), "--conversation", "nope")
    assert missing.exit_code == 1
    assert "'nope' not found" in missing.stderr
    assert kept.read_text() == "earlier export\n"  # a failed export changes no file
    assert sorted(p.name for p in source.iterdir() if "kept" in p.name) == ["kept.jsonl"]

    fresh = source / "fresh.jsonl"
    assert _cli(source, "export", str(fresh)).exit_code == 0
    assert fresh.stat().st_mode & 0o777 == 0o600  # people's conversations: owner only


def _exported_lines(source: Path, tmp_path: Path) -> list[str]:
    path = tmp_path / "all.jsonl"
    assert _cli(source, "export", str(path)).exit_code == 0
    return path.read_text(encoding="utf-8").splitlines()


def _count(data_dir: Path) -> int:
    store = _store(data_dir)
    try:
        with store.engine.connect() as conn:
            return len(conn.execute(select(conversations)).all())
    finally:
        store.engine.dispose()


def test_malformed_line_names_the_line_and_imports_nothing(tmp_path: Path, source: Path) -> None:
    lines = _exported_lines(source, tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], lines[1][:-5], lines[2]]) + "\n", encoding="utf-8")
    target = tmp_path / "target"
    result = _cli(target, "import", str(bad), MEMORY_CHAIN_MEMORY_TIER3_ENABLED="false")
    assert result.exit_code == 1
    assert "line 2: not valid JSON" in result.stderr
    assert "each line must be one JSON object" in result.stderr
    assert _count(target) == 0  # line 1 was fine, but the file is checked before writing


def _edited(line: str, **changes: object) -> str:
    obj = json.loads(line)
    obj.update(changes)
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"version": VERSION + 1}, f"format version {VERSION + 1} is not supported"),
        ({"format": "something-else"}, "is this a file written by `memory-chain export`"),
        ({"conversation_id": "has space"}, "invalid conversation id 'has space'"),
        ({"user_id": None}, "user_id must be a string"),
        ({"status": "gone"}, "unknown status 'gone'"),
        ({"turn_count": 7}, "turn_count is 7 but there are 6 turns"),
        ({"title": "Lisbon"}, "unknown field 'title'"),
        ({"turns": [{"role": "bot", "content": "hi"}]}, "turns[0].role 'bot' is unknown"),
        ({"turns": [{"role": "user", "content": "  "}]}, "message 0: content is empty"),
        (
            {"turns": [{"role": "user", "content": "a", "timestamp": "yesterday"}]},
            "turns[0].timestamp 'yesterday' is not an ISO 8601 timestamp",
        ),
        (
            {"turns": [{"role": "user", "content": "a", "turn_number": 2}]},
            "turns must be numbered 1, 2, 3",
        ),
    ],
)
def test_invalid_conversation_is_refused_with_what_to_fix(
    tmp_path: Path, source: Path, change: dict[str, object], expected: str
) -> None:
    lines = _exported_lines(source, tmp_path)
    if "turns" in change:
        change = {**change, "turn_count": 1, "summaries": [], "total_tokens": 0}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[2] + "\n\n" + _edited(lines[0], **change) + "\n", encoding="utf-8")
    target = tmp_path / "target"
    result = _cli(target, "import", str(bad), MEMORY_CHAIN_MEMORY_TIER3_ENABLED="false")
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: line 3: ")
    assert expected in errors[0]
    assert _count(target) == 0


def test_conflicts_fail_by_default_and_can_be_skipped(tmp_path: Path, source: Path) -> None:
    lines = _exported_lines(source, tmp_path)
    target = tmp_path / "target"
    off = {"MEMORY_CHAIN_MEMORY_TIER3_ENABLED": "false"}
    partial = tmp_path / "partial.jsonl"
    partial.write_text(lines[1] + "\n", encoding="utf-8")
    assert _cli(target, "import", str(partial), **off).exit_code == 0
    store = _store(target)
    before = _rows(store)

    everything = tmp_path / "all.jsonl"
    conflict = _cli(target, "import", str(everything), **off)
    assert conflict.exit_code == 1
    assert "line 2: conversation 'work' already exists" in conflict.stderr
    assert "--on-conflict skip" in conflict.stderr
    assert "nothing was imported" in conflict.stderr
    assert _rows(store) == before

    skipped = _cli(target, "import", str(everything), "--on-conflict", "skip", **off)
    assert skipped.exit_code == 0, skipped.output
    assert "imported 2 conversations (8 turns, 1 summaries), skipped 1" in skipped.stdout
    source_store = _store(source)
    try:
        assert _rows(store) == _rows(source_store)
    finally:
        source_store.engine.dispose()
        store.engine.dispose()

    twice = tmp_path / "twice.jsonl"
    twice.write_text(f"{lines[2]}\n{lines[2]}\n", encoding="utf-8")
    result = _cli(tmp_path / "other", "import", str(twice), **off)
    assert result.exit_code == 1
    assert (
        "line 2: conversation 'bob-1' of user 'bob' comes twice (first on line 1)" in result.stderr
    )


def test_store_level_write_is_exact_and_all_or_nothing(store: SQLStore) -> None:
    """On SQLite and PostgreSQL: read → delete → write gives the same records and rows."""
    _fill(store)
    records = list(read_conversations(store.engine))
    assert [r.info.conversation_id for r in records] == ["trip", "work", "bob-1"]
    rows = _rows(store)
    queued = SQLStore(store.engine, queue_embeddings=True)
    for record in records:
        with pytest.raises(ConversationExistsError, match="already exists"):
            write_conversation(queued, record, max_chars=1000)
        assert not write_conversation(queued, record, max_chars=1000, on_conflict="skip")
    assert _rows(store) == rows
    for record in records:
        info = record.info
        assert store.delete_conversation(info.conversation_id, user_id=info.user_id or "")
        assert write_conversation(queued, record, max_chars=1000)
    assert list(read_conversations(store.engine)) == records
    assert _rows(store) == rows
    with store.engine.connect() as conn:
        assert len(conn.execute(select(outbox)).all()) == 9  # queued for tier 3
    # A record the store would not accept changes nothing (checked before the transaction).
    store.delete_conversation("bob-1", user_id="bob")
    inconsistent = replace(records[2], turns=records[2].turns[:1])
    with pytest.raises(ValueError, match="turn_count is 2 but there are 1 turns"):
        write_conversation(queued, inconsistent, max_chars=1000)
    assert store.get_conversation("bob-1", user_id="bob") is None


@pytest.mark.slow
def test_consolidate_summarizes_with_the_real_model(tmp_path: Path, local_llm_url: str) -> None:
    data_dir = tmp_path / "data"
    store = _store(data_dir)
    store.append_turns(
        "trip",
        [NewTurn(role, text) for role, text in TRIP[:4]],
        user_id="ana",  # type: ignore[arg-type]
    )
    llm = {
        "MEMORY_CHAIN_OLLAMA_BASE_URL": local_llm_url,
        "MEMORY_CHAIN_OLLAMA_SUMMARY_MODEL": MODEL_NAME,
        "MEMORY_CHAIN_OLLAMA_CHAT_MODEL": MODEL_NAME,
        "MEMORY_CHAIN_LLM_FALLBACK": "off",
        "MEMORY_CHAIN_LLM_MAX_TOKENS": "60",
        "MEMORY_CHAIN_MEMORY_TIER3_ENABLED": "false",
        # The summaries are what is checked; facts are learnt in tests/facts/test_extract.py.
        "MEMORY_CHAIN_CONSOLIDATION_LEARN_FACTS": "false",
    }
    neither = _cli(data_dir, "consolidate", **llm)
    assert neither.exit_code == 2
    assert "--conversation ID" in neither.output
    missing = _cli(data_dir, "consolidate", "--conversation", "trip", "--user", "bob", **llm)
    assert missing.exit_code == 1
    assert "'trip' not found" in missing.stderr

    result = _cli(data_dir, "consolidate", "--conversation", "trip", "--user", "ana", **llm)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("trip (ana) turns 1-4: ")
    assert "1 summaries written (1 conversations checked)" in result.stdout
    stored = store.get_summaries("trip", user_id="ana")
    assert [(s.turn_range_start, s.turn_range_end) for s in stored] == [(1, 4)]
    assert stored[0].summary_text in result.stdout
    assert "Lisbon" in stored[0].summary_text
    info = store.get_conversation("trip", user_id="ana")
    assert info is not None
    assert info.summary == stored[0].summary_text

    again = _cli(data_dir, "consolidate", "--all", **llm)
    assert again.exit_code == 0, again.output
    assert again.stdout == "0 summaries written (1 conversations checked)\n"
    store.engine.dispose()


def test_import_with_tier3_held_elsewhere_queues_the_turns(
    tmp_path: Path, source: Path, embeddings: SentenceEmbeddings
) -> None:
    lines = _exported_lines(source, tmp_path)
    target = tmp_path / "target"
    server = open_services(MemorySettings(data_dir=target, llm_fallback="off"))  # holds vectors/
    try:
        result = _cli(target, "import", str(tmp_path / "all.jsonl"))
        assert result.exit_code == 0, result.output
        assert f"imported {len(lines)} conversations (9 turns" in result.stdout
        assert "warning: tier 3 is unavailable" in result.stderr
        assert "memory-chain reindex" in result.stderr
        assert server.vectors is not None
        assert server.vectors.indexer.outbox.count() == 9
        assert server.vectors.indexer.drain() == 9  # what a running server's backfill does
        assert server.vectors.index.count(VectorFilter(user_id="bob")) == 2
    finally:
        server.close()


def test_two_users_with_one_conversation_id_export_and_import(tmp_path: Path) -> None:
    source = tmp_path / "source"
    store = _store(source)
    for user, text in (("ana", "Ana's notes."), ("bob", "Bob's notes.")):
        store.append_turns("notes", [NewTurn("user", text)], user_id=user)
    store.engine.dispose()
    both = _cli(source, "export", "--conversation", "notes")  # that id of every user
    assert both.exit_code == 0, both.output
    lines = [json.loads(line) for line in both.stdout.splitlines()]
    assert [(line["user_id"], line["conversation_id"]) for line in lines] == [
        ("ana", "notes"),
        ("bob", "notes"),
    ]
    only_bob = _cli(source, "export", "--conversation", "notes", "--user", "bob")
    assert [json.loads(line)["user_id"] for line in only_bob.stdout.splitlines()] == ["bob"]
    path = tmp_path / "notes.jsonl"
    path.write_text(both.stdout, encoding="utf-8")
    target = tmp_path / "target"
    off = {"MEMORY_CHAIN_MEMORY_TIER3_ENABLED": "false"}
    assert _cli(target, "import", str(path), **off).exit_code == 0
    imported = _store(target)
    try:
        for user, text in (("ana", "Ana's notes."), ("bob", "Bob's notes.")):
            assert [t.content for t in imported.get_turns("notes", user_id=user)] == [text]
    finally:
        imported.engine.dispose()
    again = _cli(target, "import", str(path), **off)
    assert again.exit_code == 1
    assert "line 1: conversation 'notes' already exists" in again.stderr


# -- facts -------------------------------------------------------------------------------------

OFF = {"MEMORY_CHAIN_MEMORY_TIER3_ENABLED": "false"}


def _fill_facts(store: SQLStore) -> dict[str, str]:
    """Facts of ana and bob, with history: superseded by a newer value and by an edit, dismissed.

    Returns:
        The facts' ids by name.
    """
    fact_store = FactStore(store.database)
    seat = fact_store.add(
        "ana",
        FactDraft(
            "My seat is 14C.",
            origin="explicit",
            conversation_id="trip",
            turns=(3, 3),
            valid_from=T0 + timedelta(minutes=2),
        ),
    ).fact
    porto = fact_store.add(
        "ana",
        FactDraft("I live in Porto.", kind="biography", subject="home city", confidence=0.75),
    ).fact
    moved = fact_store.add(
        "ana",
        FactDraft(
            "I live in Berlin.",
            kind="biography",
            origin="extracted",
            subject="Home city",
            conversation_id="trip",
            turns=(1, 2),
            confidence=0.9,
        ),
    )
    assert moved.action == "superseded"
    assert moved.replaced is not None
    assert moved.replaced.id == porto.id
    # Said again in another conversation: one more source, no new fact.
    again = FactDraft("I live in Berlin.", origin="extracted", conversation_id="work", turns=(1, 1))
    assert fact_store.add("ana", again).action == "same"
    assert fact_store.edit("ana", seat.id, text="My seat is 15A.") is not None
    sister = fact_store.add("ana", FactDraft("My sister is Marta.", kind="relationship")).fact
    assert fact_store.dismiss("ana", sister.id) is not None
    rex = fact_store.add(
        "bob",
        FactDraft("My dog is called Rex.", conversation_id="bob-1", turns=(1, 1)),
    ).fact
    return {
        "seat": seat.id,
        "porto": porto.id,
        "berlin": moved.fact.id,
        "sister": sister.id,
        "rex": rex.id,
    }


def _source_rows(store: SQLStore) -> list[tuple[object, ...]]:
    """Every ``fact_sources`` row."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(fact_sources).order_by(*fact_sources.primary_key.columns))
        return [tuple(row) for row in rows]


def _fact_rows(store: SQLStore) -> list[dict[str, object]]:
    """Every ``facts`` row, every column but the vector, by id."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(facts).order_by(facts.c.id)).mappings()
        return [{k: v for k, v in row.items() if k != "embedding"} for row in rows]


@pytest.fixture
def with_facts(source: Path) -> dict[str, str]:
    """``source``, with :func:`_fill_facts`'s facts."""
    store = _store(source)
    try:
        return _fill_facts(store)
    finally:
        store.engine.dispose()


def test_round_trip_keeps_every_fact_with_its_history(
    tmp_path: Path, source: Path, with_facts: dict[str, str]
) -> None:
    ids = with_facts
    first = tmp_path / "first.jsonl"
    exported = _cli(source, "export", str(first))
    assert exported.exit_code == 0, exported.output
    assert "exported 3 conversations (9 turns, 1 summaries) and 6 facts" in exported.stderr
    lines = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines()]
    # The conversations first, then the facts: each user's (ana, bob), oldest first.
    assert [line["format"] for line in lines] == [FORMAT] * 3 + [FACT_FORMAT] * 6
    assert {line["version"] for line in lines} == {VERSION} == {3}
    fact_lines = lines[3:]
    assert [f["user_id"] for f in fact_lines] == ["ana"] * 5 + ["bob"]
    assert [f["created_at"] for f in fact_lines[:5]] == sorted(
        f["created_at"] for f in fact_lines[:5]
    )
    by_id = {f["id"]: f for f in fact_lines}
    assert by_id[ids["porto"]] == {
        "format": FACT_FORMAT,
        "version": VERSION,
        "id": ids["porto"],
        "user_id": "ana",
        "text": "I live in Porto.",
        "kind": "biography",
        "origin": "api",
        "status": "superseded",
        "subject": "home city",
        "conversation_id": None,
        "turns": None,
        "confidence": 0.75,
        "created_at": by_id[ids["porto"]]["created_at"],
        "valid_from": by_id[ids["porto"]]["created_at"],
        "invalidated_at": by_id[ids["berlin"]]["created_at"],
        "superseded_by": ids["berlin"],
    }
    seat = by_id[ids["seat"]]
    assert (seat["text"], seat["status"], seat["turns"]) == ("My seat is 15A.", "current", [3, 3])
    # Said in one conversation, its own fields say where (and, unedited, when: rex's line
    # has no sources); the edit moved valid_from, so the line says when it was said.
    assert "sources" not in by_id[ids["rex"]]
    assert seat["sources"] == [
        {"conversation_id": "trip", "turns": [3, 3], "said_at": "2026-05-01T09:02:00.123456Z"}
    ]
    berlin = by_id[ids["berlin"]]
    assert [(s["conversation_id"], s["turns"]) for s in berlin["sources"]] == [
        ("trip", [1, 2]),
        ("work", [1, 1]),
    ]
    (old_seat,) = [f for f in fact_lines if f["superseded_by"] == ids["seat"]]  # the edit's copy
    assert (old_seat["text"], old_seat["status"]) == ("My seat is 14C.", "superseded")
    assert old_seat["valid_from"] == "2026-05-01T09:02:00.123456Z"
    sister = by_id[ids["sister"]]
    assert (sister["status"], sister["superseded_by"]) == ("dismissed", None)
    assert sister["invalidated_at"] is not None

    target = tmp_path / "target"
    imported = _cli(target, "import", str(first), **OFF)
    assert imported.exit_code == 0, imported.output
    assert (
        "imported 3 conversations (9 turns, 1 summaries), skipped 0 already stored; "
        "imported 6 facts, skipped 0 already stored" in imported.stdout
    )
    second = tmp_path / "second.jsonl"
    assert _cli(target, "export", str(second)).exit_code == 0
    assert second.read_bytes() == first.read_bytes()
    source_store, target_store = _store(source), _store(target)
    try:
        # Ids, statuses, history links, dates, provenance: every column but the vector.
        assert _fact_rows(target_store) == _fact_rows(source_store)
        assert _source_rows(target_store) == _source_rows(source_store)
        assert len(_source_rows(source_store)) == 5  # seat, its copy, berlin twice, rex
        assert _rows(target_store) == _rows(source_store)
        restored = FactStore(target_store.database)
        assert [f.text for f in restored.of_user("ana")] == ["My seat is 15A.", "I live in Berlin."]
        history = restored.of_user("ana", statuses=STATUSES)
        assert {(f.text, f.status) for f in history} == {
            ("My seat is 15A.", "current"),
            ("My seat is 14C.", "superseded"),
            ("I live in Berlin.", "current"),
            ("I live in Porto.", "superseded"),
            ("My sister is Marta.", "dismissed"),
        }

        # Importing again adds nothing (facts are matched by id, whatever --on-conflict says).
        again = _cli(target, "import", str(first), "--on-conflict", "skip", **OFF)
        assert again.exit_code == 0, again.output
        assert (
            "imported 0 conversations (0 turns, 0 summaries), skipped 3 already stored; "
            "imported 0 facts, skipped 6 already stored" in again.stdout
        )
        assert _fact_rows(target_store) == _fact_rows(source_store)
    finally:
        source_store.engine.dispose()
        target_store.engine.dispose()


def test_scoped_exports_carry_their_facts(source: Path, with_facts: dict[str, str]) -> None:
    ids = with_facts
    bob = _cli(source, "export", "--user", "bob")
    assert bob.exit_code == 0, bob.output
    lines = [json.loads(line) for line in bob.stdout.splitlines()]
    assert [(line["format"], line["user_id"]) for line in lines] == [
        (FORMAT, "bob"),
        (FACT_FORMAT, "bob"),
    ]
    assert lines[1]["id"] == ids["rex"]
    assert "exported 1 conversations (2 turns, 0 summaries) and 1 facts" in bob.stderr
    # One conversation: the facts learnt in it (the edit's copy keeps where it was learnt).
    trip = _cli(source, "export", "--conversation", "trip", "--user", "ana")
    assert trip.exit_code == 0, trip.output
    lines = [json.loads(line) for line in trip.stdout.splitlines()]
    assert lines[0]["conversation_id"] == "trip"
    assert {(f["text"], f["status"]) for f in lines[1:]} == {
        ("My seat is 15A.", "current"),
        ("My seat is 14C.", "superseded"),
        ("I live in Berlin.", "current"),
    }
    assert all(f["format"] == FACT_FORMAT and f["conversation_id"] == "trip" for f in lines[1:])
    # A fact said there too, though learnt first elsewhere.
    work = _cli(source, "export", "--conversation", "work", "--user", "ana")
    lines = [json.loads(line) for line in work.stdout.splitlines()]
    assert [(f["text"], f["conversation_id"]) for f in lines[1:]] == [("I live in Berlin.", "trip")]


def test_version_1_files_without_facts_still_import(tmp_path: Path, source: Path) -> None:
    lines = _exported_lines(source, tmp_path)
    assert len(lines) == 3  # no facts in this database: conversation lines only
    old = tmp_path / "old.jsonl"
    hand_written = {  # as docs/cli.md showed version 1, shortest form
        "format": FORMAT,
        "version": 1,
        "conversation_id": "c1",
        "user_id": "cleo",
        "turns": [{"role": "user", "content": "Hi"}],
    }
    old.write_text(
        "".join(_edited(line, version=1) + "\n" for line in lines) + json.dumps(hand_written),
        encoding="utf-8",
    )
    target = tmp_path / "target"
    result = _cli(target, "import", str(old), **OFF)
    assert result.exit_code == 0, result.output
    assert (
        "imported 4 conversations (10 turns, 1 summaries), skipped 0 already stored; "
        "imported 0 facts" in result.stdout
    )
    again = tmp_path / "again.jsonl"
    assert _cli(target, "export", str(again), "--user", "ana").exit_code == 0
    assert again.read_text(encoding="utf-8").splitlines() == lines[:2]  # now written as version 3
    store = _store(target)
    try:
        assert _fact_rows(store) == []
    finally:
        store.engine.dispose()


def test_hand_written_fact_takes_the_defaults(tmp_path: Path) -> None:
    fact_id = "5b0c6f1e9d7a4c3b8e2f1a0d9c8b7a65"
    line = {
        "format": FACT_FORMAT,
        "version": VERSION,
        "id": fact_id,
        "user_id": "ana",
        "text": "Prefers window seats.",
    }
    path = tmp_path / "hand.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    target = tmp_path / "target"
    before = datetime.now(UTC)
    result = _cli(target, "import", str(path), **OFF)
    assert result.exit_code == 0, result.output
    assert "imported 1 facts, skipped 0 already stored" in result.stdout
    store = _store(target)
    try:
        fact = FactStore(store.database).get("ana", fact_id)
    finally:
        store.engine.dispose()
    assert fact is not None
    assert (fact.kind, fact.origin, fact.status, fact.subject, fact.turns) == (
        "other",
        "api",
        "current",
        None,
        None,
    )
    assert before <= fact.created_at == fact.valid_from <= datetime.now(UTC)


def _stored_counts(data_dir: Path) -> tuple[int, int]:
    store = _store(data_dir)
    try:
        with store.engine.connect() as conn:
            return (
                len(conn.execute(select(conversations)).all()),
                len(conn.execute(select(facts)).all()),
            )
    finally:
        store.engine.dispose()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"version": 1}, "format version 1 is not supported for facts"),
        ({"version": VERSION + 1}, f"format version {VERSION + 1} is not supported for facts"),
        # (An id such as "porto" is a store key of an older file: read as the key.)
        ({"id": "por to"}, "fact id 'por to' is not 32 lowercase hexadecimal digits"),
        ({"id": None}, "id must be a string, got None"),
        ({"user_id": "has space"}, "invalid user id 'has space'"),
        ({"text": " "}, "a fact's text must not be empty"),
        ({"text": 7}, "text must be a string, got 7"),
        ({"kind": "mood"}, "unknown fact kind 'mood'"),
        ({"origin": "rumour"}, "unknown fact origin 'rumour'"),
        ({"status": "gone"}, "unknown fact status 'gone'"),
        ({"colour": "blue"}, "unknown field 'colour'"),
        ({"key": "a\x00b"}, "key contains a NUL character"),
        ({"key": ""}, "key is a non-empty string"),
        ({"conversation_id": "has space"}, "invalid conversation id 'has space'"),
        ({"turns": [3]}, "turns must be [first, last]"),
        ({"turns": [4, 2]}, "1 <= first <= last"),
        ({"turns": [1, "2"]}, "turns[1] must be a whole number"),
        ({"confidence": 1.5}, "confidence 1.5 must be between 0 and 1"),
        ({"confidence": "high"}, "confidence must be a number"),
        ({"created_at": "yesterday"}, "created_at 'yesterday' is not an ISO 8601 timestamp"),
        ({"superseded_by": None}, "a superseded fact needs superseded_by"),
        ({"superseded_by": "ber lin"}, "superseded_by 'ber lin' is not a fact id"),
        ({"invalidated_at": None}, "a superseded fact needs invalidated_at"),
        ({"status": "current"}, "a current fact has no invalidated_at and no superseded_by"),
        ({"status": "dismissed"}, "a dismissed fact has no superseded_by"),
        ({"sources": "trip"}, "sources must be a JSON array"),
        ({"sources": [{"conversation_id": "a b"}]}, "invalid conversation id 'a b'"),
        ({"sources": [{"conversation_id": "x", "turns": [2, 1]}]}, "sources[0].turns [2, 1]"),
        ({"sources": [{"conversation_id": "x", "colour": 1}]}, "sources[0]: unknown field"),
        ({"sources": [{"conversation_id": "x"}] * 2}, "conversation 'x' comes twice"),
        (
            {"conversation_id": "y", "sources": [{"conversation_id": "x"}]},
            "conversation_id 'y' is not among the fact's sources",
        ),
    ],
)
def test_invalid_fact_is_refused_with_its_line_and_what_to_fix(
    tmp_path: Path,
    source: Path,
    with_facts: dict[str, str],
    change: dict[str, object],
    expected: str,
) -> None:
    lines = _exported_lines(source, tmp_path)
    (porto,) = [line for line in lines if "I live in Porto." in line]  # a superseded fact
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[2] + "\n\n" + _edited(porto, **change) + "\n", encoding="utf-8")
    target = tmp_path / "target"
    result = _cli(target, "import", str(bad), **OFF)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: line 3: fact")
    assert expected in errors[0]
    assert _stored_counts(target) == (0, 0)  # line 1 was fine: nothing half-imported


def test_fact_conflicts_are_refused_before_anything_is_written(
    tmp_path: Path, source: Path, with_facts: dict[str, str]
) -> None:
    ids = with_facts
    lines = _exported_lines(source, tmp_path)
    (porto,) = [line for line in lines if ids["porto"] in line and "Porto" in line]
    (rex,) = [line for line in lines if "Rex" in line and FACT_FORMAT in line]
    target = tmp_path / "target"

    twice = tmp_path / "twice.jsonl"
    twice.write_text(f"{lines[0]}\n{rex}\n{rex}\n", encoding="utf-8")
    result = _cli(target, "import", str(twice), **OFF)
    assert result.exit_code == 1
    assert f"line 3: fact {ids['rex']!r} comes twice (first on line 2)" in result.stderr
    assert "nothing was imported" in result.stderr

    # Ana's fact superseded by one of another user's in the file.
    crossed = tmp_path / "crossed.jsonl"
    crossed.write_text(
        "\n".join(
            [line for line in lines if FACT_FORMAT in line and "Porto" not in line]
            + [_edited(porto, user_id="carol")]
        )
        + "\n",
        encoding="utf-8",
    )
    result = _cli(target, "import", str(crossed), **OFF)
    assert result.exit_code == 1
    assert f"line 6: fact {ids['porto']!r} of user 'carol' is superseded by fact" in result.stderr
    assert "of user 'ana'" in result.stderr
    assert _stored_counts(target) == (0, 0)

    # A fact id another user has in the database.
    assert _cli(target, "import", str(tmp_path / "all.jsonl"), **OFF).exit_code == 0
    stored = _stored_counts(target)
    stolen = tmp_path / "stolen.jsonl"
    stolen.write_text(_edited(rex, user_id="carol") + "\n", encoding="utf-8")
    result = _cli(target, "import", str(stolen), **OFF)
    assert result.exit_code == 1
    assert f"line 1: fact {ids['rex']!r} is already stored for another user" in result.stderr
    assert _stored_counts(target) == stored


def test_store_level_export_reads_facts_after_conversations(store: SQLStore) -> None:
    """On SQLite and PostgreSQL: one snapshot, conversations then facts; restore is exact."""
    _fill(store)
    ids = _fill_facts(store)
    items = list(read_export(store.engine))
    records = [item for item in items if isinstance(item, ConversationRecord)]
    assert items[:3] == records == list(read_conversations(store.engine))
    exported = [item for item in items[3:] if isinstance(item, Fact)]
    assert len(exported) == len(items) - 3
    assert exported == list(read_facts(store.engine))
    assert [f.user_id for f in exported] == ["ana"] * 5 + ["bob"]
    assert [f.id for f in read_facts(store.engine, user_id="bob")] == [ids["rex"]]
    bobs = list(read_export(store.engine, user_id="bob"))
    assert [type(item) for item in bobs] == [ConversationRecord, Fact]
    assert isinstance(bobs[1], Fact)
    assert bobs[1].id == ids["rex"]
    rows = _fact_rows(store)
    fact_store = FactStore(store.database)
    assert fact_store.restore(exported) == 0  # every id stored: nothing written
    assert fact_store.delete_user("ana") == 5
    assert fact_store.restore(exported) == 5
    assert list(read_facts(store.engine)) == exported
    assert _fact_rows(store) == rows


def test_api_export_carries_the_callers_facts_only(tmp_path: Path) -> None:
    settings = MemorySettings(
        data_dir=tmp_path / "data",
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",  # no Ollama there
        memory_tier3_enabled=False,
    )
    ana, bob = {"X-User-Id": "ana"}, {"X-User-Id": "bob"}
    with TestClient(create_app(settings)) as client:
        for user, text in ((ana, "Please remember this: my seat is 14C."), (bob, "Hello.")):
            body = {"turns": [{"role": "user", "content": text}]}
            response = client.post("/v1/conversations/trip/turns", json=body, headers=user)
            assert response.status_code == 201, response.text
        for user, fact in (
            (ana, {"text": "I live in Porto.", "subject": "home city"}),
            (ana, {"text": "I live in Berlin.", "subject": "home city"}),
            (bob, {"text": "My locker is 12."}),
        ):
            response = client.post("/v1/facts", json=fact, headers=user)
            assert response.status_code == 201, response.text
        exported = client.get("/v1/users/me/export", headers=ana)
        assert exported.status_code == 200, exported.text
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert [(line["format"], line["user_id"]) for line in lines] == [(FORMAT, "ana")] + [
        (FACT_FORMAT, "ana")
    ] * 3
    assert [(f["text"], f["status"]) for f in lines[1:]] == [
        ("my seat is 14C.", "current"),
        ("I live in Porto.", "superseded"),
        ("I live in Berlin.", "current"),
    ]
    assert lines[2]["superseded_by"] == lines[3]["id"]
    # The same bytes as the command line's export of her, and they import into a fresh folder.
    cli = _cli(settings.data_dir, "export", "--user", "ana")
    assert cli.exit_code == 0, cli.output
    assert cli.stdout == exported.text
    path = tmp_path / "ana.jsonl"
    path.write_text(exported.text, encoding="utf-8")
    target = tmp_path / "target"
    result = _cli(target, "import", str(path), **OFF)
    assert result.exit_code == 0, result.output
    assert "imported 3 facts, skipped 0 already stored" in result.stdout
    source_store, target_store = _store(settings.data_dir), _store(target)
    try:
        ana_rows = [row for row in _fact_rows(source_store) if row["user_id"] == "ana"]
        assert _fact_rows(target_store) == ana_rows
    finally:
        source_store.engine.dispose()
        target_store.engine.dispose()


def test_a_fact_line_without_sources_imports_with_the_one_its_fields_name(tmp_path: Path) -> None:
    fact_id = "6c1d7f2e0a8b4d5c9f3a2b1e0d9c8b76"
    line = {  # as version 2 wrote it, before sources
        "format": FACT_FORMAT,
        "version": 2,
        "id": fact_id,
        "user_id": "ana",
        "text": "My seat is 14C.",
        "conversation_id": "trip",
        "turns": [3, 3],
        "created_at": "2026-05-01T09:05:00.000000Z",
        "valid_from": "2026-05-01T09:02:00.000000Z",
    }
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    target = tmp_path / "target"
    result = _cli(target, "import", str(path), **OFF)
    assert result.exit_code == 0, result.output
    store = _store(target)
    try:
        (fact,) = read_facts(store.engine, user_id="ana")
        assert fact.sources == (FactSource("trip", (3, 3), datetime(2026, 5, 1, 9, 2, tzinfo=UTC)),)
    finally:
        store.engine.dispose()
