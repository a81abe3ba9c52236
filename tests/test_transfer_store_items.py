"""Store items (what agents keep in ``MemoryStore``) through ``export`` / ``import``.

Items are put through the real ``MemoryStore`` on SQLite and PostgreSQL, exported, imported
into an empty database and exported again (the same bytes), then found by ``get`` and
``search``; with the real embedding model they are embedded at their first search. A
malformed store-item line is refused with its line number, a stored item fails the import
or is skipped as a stored conversation is, and ``GET /v1/users/me/export`` carries the
caller's items only.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from memory_chain.api import create_app
from memory_chain.cli import app
from memory_chain.config import MemorySettings
from memory_chain.facts.model import FactDraft
from memory_chain.integrations.store import MemoryStore
from memory_chain.schemas import NewTurn
from memory_chain.services import Services, open_services
from memory_chain.tiers.sql.export import read_export, read_store_items
from memory_chain.tiers.sql.models import store_items
from memory_chain.tiers.sql.store_items import StoredItem, StoreItemExistsError
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.transfer import (
    FACT_FORMAT,
    FORMAT,
    STORE_ITEM_FORMAT,
    VERSION,
    ImportFileError,
    TransferReport,
    export_jsonl,
    import_jsonl,
)
from tests.conftest import _fresh_postgres_database
from tests.postgres import free_port

MAX_CHARS = 100_000
NOTES = ("ana", "notes")


def _settings(data_dir: Path, url: str | None = None, *, tier3: bool = False) -> MemorySettings:
    """Tier 2 at ``url`` (PostgreSQL) or in ``data_dir`` (SQLite); no LLM."""
    return MemorySettings(
        data_dir=data_dir,
        database_url=url if url is not None and url.startswith("postgresql") else None,
        memory_tier3_enabled=tier3,
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",  # no Ollama there
    )


@pytest.fixture
def opened() -> Iterator[Callable[[MemorySettings], tuple[Services, MemoryStore]]]:
    """Opens services and their ``MemoryStore``; closes them all at the end."""
    services: list[Services] = []

    def open_store(settings: MemorySettings) -> tuple[Services, MemoryStore]:
        services.append(open_services(settings))
        return services[-1], MemoryStore(services[-1])

    yield open_store
    for one in services:
        one.close()


def _fill(services: Services, store: MemoryStore) -> None:
    """A conversation and a fact of ana, and items of ana and bob in several namespaces."""
    services.store.append_turns("trip", [NewTurn("user", "We fly to Lisbon.")], user_id="ana")
    services.manager.fact_store.add("ana", FactDraft("I am vegan.", kind="preference"))
    store.put(NOTES, "diet", {"text": "vegan, no nuts ☕", "since": 2019})
    store.put(NOTES, "diet", {"text": "vegan, no nuts, no soy ☕", "since": 2019})  # updated
    store.put(NOTES, "seat", {"text": "window seat", "row": 14, "tags": ["flight", None]})
    store.put(("ana", "notes", "trips"), "lisbon", {"text": "3-10 May", "nested": {"a": [1.5]}})
    store.put(("ana", "prefs"), "secret", {"text": "not searched"}, index=False)
    store.put(("bob", "notes"), "diet", {"text": "Bob eats everything."})


def _export(engine: Engine, **scope: Any) -> tuple[str, TransferReport]:
    out = io.StringIO()
    report = export_jsonl(engine, out, **scope)
    return out.getvalue(), report


def _item_rows(engine: Engine) -> list[dict[str, Any]]:
    """Every ``store_items`` row, every column but the vector, in key order."""
    order = (store_items.c.user_id, store_items.c.namespace, store_items.c.key)
    with engine.connect() as conn:
        rows = conn.execute(select(store_items).order_by(*order)).mappings()
        return [{k: v for k, v in row.items() if k != "embedding"} for row in rows]


@pytest.fixture
def target_url(sql_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A second empty database of the kind ``sql_url`` is."""
    if sql_url.startswith("postgresql"):
        return _fresh_postgres_database(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path / 'target' / 'memory.db'}"


def test_round_trip_is_exact_and_found_by_get_and_search(
    sql_url: str,
    target_url: str,
    tmp_path: Path,
    opened: Callable[[MemorySettings], tuple[Services, MemoryStore]],
) -> None:
    source, source_store = opened(_settings(tmp_path, sql_url))
    _fill(source, source_store)
    first, exported = _export(source.store.engine)
    assert (exported.conversations, exported.facts, exported.store_items) == (1, 1, 5)
    lines = [json.loads(line) for line in first.splitlines()]
    # Conversations, then facts, then store items by user, namespace and key.
    assert [line["format"] for line in lines] == [FORMAT, FACT_FORMAT] + [STORE_ITEM_FORMAT] * 5
    assert {line["version"] for line in lines} == {VERSION} == {3}
    items = lines[2:]
    assert [i["user_id"] for i in items] == ["ana"] * 4 + ["bob"]
    (diet,) = [i for i in items if i["user_id"] == "ana" and i["key"] == "diet"]
    assert diet == {
        "format": STORE_ITEM_FORMAT,
        "version": VERSION,
        "user_id": "ana",
        "namespace": ["notes"],
        "key": "diet",
        "value": {"text": "vegan, no nuts, no soy ☕", "since": 2019},
        "index": True,
        "created_at": diet["created_at"],
        "updated_at": diet["updated_at"],
    }
    assert diet["updated_at"] > diet["created_at"]  # put twice: the first put's date kept
    assert "☕" in first  # not \u-escaped
    (secret,) = [i for i in items if i["key"] == "secret"]
    assert secret["index"] is False

    path = tmp_path / "first.jsonl"
    path.write_text(first, encoding="utf-8")
    target, target_store = opened(_settings(tmp_path / "target", target_url))
    report = import_jsonl(target.store, path, max_chars=MAX_CHARS)
    assert (report.conversations, report.facts, report.store_items) == (1, 1, 5)
    assert report.skipped_store_items == 0
    second, _ = _export(target.store.engine)
    assert second == first
    # Every column but the vector, the searched text included (the values' strings).
    assert _item_rows(target.store.engine) == _item_rows(source.store.engine)

    got = target_store.get(NOTES, "diet")
    want = source_store.get(NOTES, "diet")
    assert got is not None
    assert want is not None
    assert got.value == want.value == {"text": "vegan, no nuts, no soy ☕", "since": 2019}
    assert (got.created_at, got.updated_at) == (want.created_at, want.updated_at)
    # No embedding model here: a query ranks by the share of its words an item holds.
    hits = target_store.search(("ana",), query="window seat")
    assert hits[0].key == "seat"
    assert hits[0].score == 1.0
    assert [i.key for i in target_store.search(("ana", "notes"), filter={"row": 14})] == ["seat"]
    ranked = target_store.search(("ana", "prefs"), query="not searched")
    assert [(i.key, i.score) for i in ranked] == [("secret", None)]  # listed, never scored
    assert {i.key for i in target_store.search(("bob",))} == {"diet"}
    assert target_store.get(("bob", "notes"), "diet") is not None


def test_scoped_exports_carry_their_users_items(
    tmp_path: Path, opened: Callable[[MemorySettings], tuple[Services, MemoryStore]]
) -> None:
    services, store = opened(_settings(tmp_path))
    _fill(services, store)
    engine = services.store.engine
    bob, report = _export(engine, user_id="bob")
    assert [
        (json.loads(line)["format"], json.loads(line)["user_id"]) for line in bob.splitlines()
    ] == [(STORE_ITEM_FORMAT, "bob")]
    assert report.store_items == 1
    # One conversation's export: its facts, no store items (they belong to no conversation).
    trip, report = _export(engine, user_id="ana", conversation_id="trip")
    assert [json.loads(line)["format"] for line in trip.splitlines()] == [FORMAT]
    assert report.store_items == 0
    assert not any(
        isinstance(item, StoredItem) for item in read_export(engine, conversation_id="trip")
    )
    # By namespace as stored (a JSON array: on SQLite '["notes",' sorts before '["notes"]').
    assert [i.key for i in read_store_items(engine, user_id="ana")] == [
        "lisbon",
        "diet",
        "seat",
        "secret",
    ]


def test_imported_items_are_embedded_at_their_first_search(
    tmp_path: Path,
    embeddings: SentenceEmbeddings,
    opened: Callable[[MemorySettings], tuple[Services, MemoryStore]],
) -> None:
    source, source_store = opened(_settings(tmp_path / "source", tier3=True))
    for key, text in (
        ("diet", "Ana is vegan and allergic to nuts."),
        ("car", "Ana drives a red bicycle to work."),
        ("pet", "Ana has a cat called Miso."),
    ):
        source_store.put(NOTES, key, {"text": text})
    path = tmp_path / "items.jsonl"
    path.write_text(_export(source.store.engine)[0], encoding="utf-8")
    target, target_store = opened(_settings(tmp_path / "target", tier3=True))
    assert import_jsonl(target.store, path, max_chars=MAX_CHARS).store_items == 3
    stored = {i.key: i for i in read_store_items(target.store.engine)}
    assert all(item.embedding is None for item in stored.values())  # not in the file

    hits = target_store.search(NOTES, query="What food can she not eat?")
    assert hits[0].key == "diet"
    assert all(hit.score is not None for hit in hits)  # scored by cosine, not by words
    before = {i.key: i for i in read_store_items(source.store.engine)}
    for item in read_store_items(target.store.engine):
        assert item.embedding is not None  # stored by that search
        again = np.frombuffer(item.embedding, dtype="<f4")
        original = np.frombuffer(before[item.key].embedding or b"", dtype="<f4")
        assert float(again @ original) > 0.999  # the vector the put computed


def _exported_lines(
    tmp_path: Path, opened: Callable[..., tuple[Services, MemoryStore]]
) -> list[str]:
    services, store = opened(_settings(tmp_path / "source"))
    _fill(services, store)
    return _export(services.store.engine)[0].splitlines()


def _edited(line: str, **changes: object) -> str:
    obj = json.loads(line)
    obj.update(changes)
    return json.dumps(obj)  # ASCII: a lone surrogate can be written (escaped)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"version": 2}, "format version 2 is not supported for store items"),
        ({"version": VERSION + 1}, f"format version {VERSION + 1} is not supported"),
        ({"colour": "blue"}, "unknown field 'colour'"),
        ({"user_id": "has space"}, "invalid user id 'has space'"),
        ({"namespace": "notes"}, "namespace must be a JSON array, got str"),
        ({"namespace": []}, "namespace is empty"),
        ({"namespace": ["notes", 7]}, "namespace[1] must be a string, got 7"),
        ({"namespace": ["has space"]}, "invalid namespace label 'has space'"),
        ({"namespace": ["facts"]}, 'namespace ["facts"] is where MemoryStore shows'),
        ({"namespace": ["conversations", "trip"]}, "give the item another namespace"),
        ({"key": None}, "key must be a string, got None"),
        ({"key": "has space"}, "invalid key 'has space'"),
        ({"value": "vegan"}, "value must be a JSON object, got str"),
        ({"value": {"text": "x", "n": float("nan")}}, "an item's value must be JSON"),
        ({"value": {"text": "x" * 70_000}}, "more than 64,000"),
        ({"value": {"text": "a\x00b"}}, "the value['text'] contains a NUL character (\\x00)"),
        ({"value": {"text": "a\ud800"}}, "the value['text'] is not valid Unicode"),
        ({"value": {"text": "ok", "tags": ["a\x00"]}}, "the value['tags'][0] contains a NUL"),
        ({"index": "yes"}, "index must be true or false, got 'yes'"),
        ({"value": {"n": 1}}, "index is true but the value holds no text to search"),
        ({"created_at": "yesterday"}, "created_at 'yesterday' is not an ISO 8601 timestamp"),
        ({"updated_at": "2020-01-01T00:00:00Z"}, "is before created_at"),
    ],
)
def test_invalid_store_item_is_refused_with_its_line_and_what_to_fix(
    tmp_path: Path,
    opened: Callable[[MemorySettings], tuple[Services, MemoryStore]],
    change: dict[str, object],
    expected: str,
) -> None:
    lines = _exported_lines(tmp_path, opened)
    (diet,) = [line for line in lines if '"key":"diet"' in line and '"ana"' in line]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n\n" + _edited(diet, **change) + "\n", encoding="utf-8")
    target, _ = opened(_settings(tmp_path / "target"))
    with pytest.raises(ImportFileError) as raised:
        import_jsonl(target.store, bad, max_chars=MAX_CHARS)
    assert raised.value.line == 3
    message = str(raised.value)
    assert message.startswith("line 3: store item "), message
    assert expected in message
    assert list(read_export(target.store.engine)) == []  # line 1 was fine: nothing imported


def test_conflicts_fail_by_default_and_can_be_skipped(
    tmp_path: Path, opened: Callable[[MemorySettings], tuple[Services, MemoryStore]]
) -> None:
    lines = _exported_lines(tmp_path, opened)
    path = tmp_path / "all.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    target, target_store = opened(_settings(tmp_path / "target"))
    target_store.put(NOTES, "seat", {"text": "aisle seat"})  # the same key, another value
    before = _item_rows(target.store.engine)

    with pytest.raises(ImportFileError) as raised:
        import_jsonl(target.store, path, max_chars=MAX_CHARS)
    (seat,) = [n for n, line in enumerate(lines, start=1) if '"key":"seat"' in line]
    assert raised.value.line == seat
    assert (
        f"line {seat}: store item 'seat' in namespace [\"notes\"] of user 'ana' already exists"
        in str(raised.value)
    )
    assert "--on-conflict skip" in str(raised.value)
    assert "nothing was imported" in str(raised.value)
    assert _item_rows(target.store.engine) == before
    assert target.store.get_conversation("trip", user_id="ana") is None

    report = import_jsonl(target.store, path, max_chars=MAX_CHARS, on_conflict="skip")
    assert (report.conversations, report.facts) == (1, 1)
    assert (report.store_items, report.skipped_store_items) == (4, 1)
    kept = target_store.get(NOTES, "seat")
    assert kept is not None
    assert kept.value == {"text": "aisle seat"}  # the stored one is left as it is
    again = import_jsonl(target.store, path, max_chars=MAX_CHARS, on_conflict="skip")
    assert (again.store_items, again.skipped_store_items, again.skipped_facts) == (0, 5, 1)

    # The command line says the same, and writes nothing.
    other = tmp_path / "other"
    other_services, other_store = opened(_settings(other))
    other_store.put(("bob", "notes"), "diet", {"text": "Bob eats anything."})
    env: dict[str, str | None] = {
        "MEMORY_CHAIN_DATABASE_URL": None,  # unset: SQLite in the data folder
        "MEMORY_CHAIN_DATA_DIR": str(other),
        "MEMORY_CHAIN_MEMORY_TIER3_ENABLED": "false",
    }
    result = CliRunner().invoke(app, ["import", str(path)], env=env, catch_exceptions=False)
    assert result.exit_code == 1
    assert f"error: line {len(lines)}: store item 'diet'" in result.stderr
    assert "of user 'bob' already exists" in result.stderr
    assert list(read_export(other_services.store.engine)) == list(
        read_store_items(other_services.store.engine)
    )  # bob's one item, nothing else


def test_a_store_item_twice_in_the_file_is_refused(
    tmp_path: Path, opened: Callable[[MemorySettings], tuple[Services, MemoryStore]]
) -> None:
    lines = _exported_lines(tmp_path, opened)
    (diet,) = [line for line in lines if '"key":"diet"' in line and '"ana"' in line]
    twice = tmp_path / "twice.jsonl"
    twice.write_text(f"{diet}\n{lines[0]}\n{_edited(diet, value={'text': 'x'})}\n", "utf-8")
    target, _ = opened(_settings(tmp_path / "target"))
    with pytest.raises(ImportFileError, match="line 3: store item 'diet' in namespace") as raised:
        import_jsonl(target.store, twice, max_chars=MAX_CHARS)
    assert "of user 'ana' comes twice (first on line 1)" in str(raised.value)
    assert list(read_export(target.store.engine)) == []


def test_restore_refuses_or_skips_a_stored_item(
    tmp_path: Path, opened: Callable[[MemorySettings], tuple[Services, MemoryStore]]
) -> None:
    services, store = opened(_settings(tmp_path))
    _fill(services, store)
    items = list(read_store_items(services.store.engine))
    with pytest.raises(StoreItemExistsError, match="already exists"):
        store.items.restore(items)
    assert store.items.restore(items, skip_existing=True) == 0
    assert store.items.delete("ana", ("notes",), "seat")
    rows = _item_rows(services.store.engine)
    assert store.items.restore(items, skip_existing=True) == 1
    assert len(_item_rows(services.store.engine)) == len(rows) + 1
    assert list(read_store_items(services.store.engine)) == items  # vectors (none) included


def test_api_export_carries_the_callers_items_only(
    tmp_path: Path, opened: Callable[[MemorySettings], tuple[Services, MemoryStore]]
) -> None:
    settings = _settings(tmp_path / "data")
    services = open_services(settings)
    try:
        _fill(services, MemoryStore(services))
    finally:
        services.close()
    with TestClient(create_app(settings)) as client:
        exported = client.get("/v1/users/me/export", headers={"X-User-Id": "ana"})
        assert exported.status_code == 200, exported.text
        bobs = client.get("/v1/users/me/export", headers={"X-User-Id": "bob"})
        assert bobs.status_code == 200, bobs.text
    lines = [json.loads(line) for line in exported.text.splitlines()]
    items = [line for line in lines if line["format"] == STORE_ITEM_FORMAT]
    assert [(i["user_id"], i["key"]) for i in items] == [
        ("ana", "lisbon"),
        ("ana", "diet"),
        ("ana", "seat"),
        ("ana", "secret"),
    ]
    assert [(i["user_id"], i["key"]) for i in map(json.loads, bobs.text.splitlines())] == [
        ("bob", "diet")
    ]
    # The same bytes as the export of her, and they import into an empty database.
    reopened, _ = opened(settings)
    assert exported.text == _export(reopened.store.engine, user_id="ana")[0]
    path = tmp_path / "ana.jsonl"
    path.write_text(exported.text, encoding="utf-8")
    target, target_store = opened(_settings(tmp_path / "target"))
    assert import_jsonl(target.store, path, max_chars=MAX_CHARS).store_items == 4
    assert target_store.get(("bob", "notes"), "diet") is None
    got = target_store.get(("ana", "notes", "trips"), "lisbon")
    assert got is not None
    assert got.value == {"text": "3-10 May", "nested": {"a": [1.5]}}
