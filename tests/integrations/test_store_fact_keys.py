"""The keys of ``(user_id, "facts")`` in ``MemoryStore``: each user's own, any string.

On SQLite and PostgreSQL: two users put the same key and each keeps their own fact; a key
deleted (its fact dismissed) can be put again; a keyed fact superseded by a newer value of
its subject hands the key on, so ``get`` answers what holds now; keys that are no fact id
("a/b", spaces, emoji, 512 characters) work through the store, are listed by REST and MCP
(whose routes take the facts' own ids), and travel through an export and an import; an
export written before keys had their own field (the key as the fact's id) still imports.
On PostgreSQL, a key taken by a writer that holds no lock is a conflict (409), not a 500.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text

from memory_chain.api import create_app
from memory_chain.api.errors import status_of
from memory_chain.config import MemorySettings
from memory_chain.errors import InvalidInputError, StorageConflictError
from memory_chain.facts.model import FactDraft, keyed_id
from memory_chain.integrations.mcp import MemoryTools
from memory_chain.integrations.store import MemoryStore
from memory_chain.services import Services, open_services
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.transfer import ImportFileError, export_jsonl, import_jsonl
from tests.postgres import free_port

FACTS = ("ana", "facts")
WEIRD_KEYS = [
    "diet",
    "a/b",
    "with space",
    "clé 🔑 ключ",
    str(uuid.UUID(int=7)),
    "../../etc/passwd?x=1#y",
    "k" * 512,
]


def _settings(data_dir: Path, url: str | None = None) -> MemorySettings:
    return MemorySettings(
        data_dir=data_dir,
        database_url=url if url is not None and url.startswith("postgresql") else None,
        memory_tier3_enabled=False,
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",  # no Ollama there
    )


@pytest.fixture
def opened() -> Iterator[Callable[[MemorySettings], tuple[Services, MemoryStore]]]:
    services: list[Services] = []

    def open_store(settings: MemorySettings) -> tuple[Services, MemoryStore]:
        services.append(open_services(settings))
        return services[-1], MemoryStore(services[-1])

    yield open_store
    for one in services:
        one.close()


@pytest.fixture
def plain(
    sql_url: str,
    tmp_path: Path,
    opened: Callable[[MemorySettings], tuple[Services, MemoryStore]],
) -> tuple[Services, MemoryStore]:
    return opened(_settings(tmp_path / "data", sql_url))


def _text(store: MemoryStore, namespace: tuple[str, ...], key: str) -> str | None:
    item = store.get(namespace, key)
    return None if item is None else str(item.value["text"])


def test_two_users_may_put_the_same_key(plain: tuple[Services, MemoryStore]) -> None:
    _, store = plain
    store.put(FACTS, "diet", {"text": "I am vegan."})
    store.put(("bob", "facts"), "diet", {"text": "I eat everything."})  # refused before
    assert _text(store, FACTS, "diet") == "I am vegan."
    assert _text(store, ("bob", "facts"), "diet") == "I eat everything."
    store.put(("bob", "facts"), "diet", {"text": "I eat fish."})  # bob's edit, bob's fact
    store.delete(("bob", "facts"), "diet")
    assert _text(store, ("bob", "facts"), "diet") is None
    assert _text(store, FACTS, "diet") == "I am vegan."
    assert [i.key for i in store.search(FACTS)] == ["diet"]


def test_a_deleted_key_can_be_put_again(plain: tuple[Services, MemoryStore]) -> None:
    services, store = plain
    store.put(FACTS, "seat", {"text": "My seat is 14C."})
    first = services.manager.fact_store.by_key("ana", "seat")
    store.delete(FACTS, "seat")
    assert store.get(FACTS, "seat") is None
    store.put(FACTS, "seat", {"text": "My seat is 15A."})  # refused before: "taken"
    assert _text(store, FACTS, "seat") == "My seat is 15A."
    facts = services.manager.fact_store
    assert first is not None
    assert facts.get("ana", first.id).status == "dismissed"  # the history keeps it
    assert [f.key for f in facts.of_user("ana", statuses=("current", "dismissed"))] == [
        "seat",
        "seat",
    ]


def test_a_newer_value_takes_the_key_of_the_fact_it_supersedes(
    plain: tuple[Services, MemoryStore],
) -> None:
    services, store = plain
    store.put(FACTS, "home", {"text": "I live in Porto.", "subject": "home"})
    porto = services.manager.fact_store.by_key("ana", "home")
    moved = services.manager.fact_store.add(
        "ana", FactDraft("I live in Berlin.", subject="home", origin="extracted")
    )
    assert (moved.action, moved.fact.key) == ("superseded", "home")
    # The key answers what holds now (before, it answered nothing once superseded).
    assert _text(store, FACTS, "home") == "I live in Berlin."
    assert porto is not None
    history = services.manager.fact_store.get("ana", porto.id)
    assert history is not None
    assert (history.status, history.superseded_by, history.key) == (
        "superseded",
        moved.fact.id,
        "home",
    )
    # A put of the key edits the fact that holds now.
    store.put(FACTS, "home", {"text": "I live in Berlin-Mitte.", "subject": "home"})
    assert services.manager.fact_store.get("ana", moved.fact.id).text == "I live in Berlin-Mitte."
    assert [f.text for f in services.manager.facts("ana")] == ["I live in Berlin-Mitte."]


def test_keys_that_are_no_fact_id_work_everywhere_and_travel(
    tmp_path: Path, opened: Callable[[MemorySettings], tuple[Services, MemoryStore]]
) -> None:
    settings = _settings(tmp_path / "data")
    services, store = opened(settings)
    for number, key in enumerate(WEIRD_KEYS):
        store.put(FACTS, key, {"text": f"Fact number {number} of mine."})
    assert {key: _text(store, FACTS, key) for key in WEIRD_KEYS} == {
        key: f"Fact number {n} of mine." for n, key in enumerate(WEIRD_KEYS)
    }
    assert {i.key for i in store.search(FACTS)} == set(WEIRD_KEYS)
    listed = MemoryTools(services.manager).facts("ana", include_history=False).facts
    assert {f.key for f in listed} == set(WEIRD_KEYS)  # MCP's list_facts
    with pytest.raises(InvalidInputError, match="more than 512"):
        store.put(FACTS, "k" * 513, {"text": "x"})
    with pytest.raises(InvalidInputError, match="NUL"):
        store.put(FACTS, "a\x00b", {"text": "x"})
    out = io.StringIO()
    export_jsonl(services.store.engine, out, user_id="ana")
    services.close()

    # REST lists every fact with its key, and takes each one's id (refused before for "a/b").
    with TestClient(create_app(settings)) as client:
        user = {"X-User-Id": "ana"}
        facts = client.get("/v1/facts", headers=user).json()["facts"]
        assert {f["key"] for f in facts} == set(WEIRD_KEYS)
        slash = next(f for f in facts if f["key"] == "a/b")
        assert client.get(f"/v1/facts/{slash['id']}", headers=user).json()["key"] == "a/b"
        edited = client.patch(
            f"/v1/facts/{slash['id']}", json={"text": "Edited by hand."}, headers=user
        )
        assert (edited.status_code, edited.json()["key"]) == (200, "a/b")
        assert client.delete(f"/v1/facts/{slash['id']}", headers=user).status_code == 204
    services, store = opened(settings)
    assert store.get(FACTS, "a/b") is None

    # Exported with their keys; imported into an empty database, found by them again.
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {line.get("key") for line in lines if line["format"] == "memory-chain/fact"} == set(
        WEIRD_KEYS
    )
    path = tmp_path / "ana.jsonl"
    path.write_text(out.getvalue(), encoding="utf-8")
    target, target_store = opened(_settings(tmp_path / "target"))
    report = import_jsonl(target.store, path, max_chars=100_000)
    assert report.facts == len(WEIRD_KEYS)
    assert {key: _text(target_store, FACTS, key) for key in WEIRD_KEYS} == {
        key: f"Fact number {n} of mine." for n, key in enumerate(WEIRD_KEYS)
    }
    again = io.StringIO()
    export_jsonl(target.store.engine, again, user_id="ana")
    assert again.getvalue() == out.getvalue()


def _line(**fields: Any) -> str:
    base = {
        "format": "memory-chain/fact",
        "version": 3,
        "user_id": "ana",
        "created_at": "2026-05-01T09:00:00.000000Z",
    }
    return json.dumps(base | fields)


def test_an_export_with_store_keys_as_fact_ids_still_imports(
    tmp_path: Path, opened: Callable[[MemorySettings], tuple[Services, MemoryStore]]
) -> None:
    # Written before keys had their own field: the key was the id (refused before).
    old = "\n".join(
        [
            _line(
                id="diet",
                text="I am vegan.",
                status="superseded",
                invalidated_at="2026-05-02T09:00:00.000000Z",
                superseded_by="c" * 32,
            ),
            _line(id="c" * 32, text="I am vegetarian."),
            _line(id="seat", text="My seat is 14C."),
        ]
    )
    path = tmp_path / "old.jsonl"
    path.write_text(old + "\n", encoding="utf-8")
    services, store = opened(_settings(tmp_path / "data"))
    assert import_jsonl(services.store, path, max_chars=100_000).facts == 3
    assert _text(store, FACTS, "seat") == "My seat is 14C."
    seat = services.manager.fact_store.by_key("ana", "seat")
    assert seat is not None
    assert seat.id == keyed_id("ana", "seat")
    past = services.manager.fact_store.get("ana", keyed_id("ana", "diet"))
    assert past is not None
    assert (past.key, past.status, past.superseded_by) == ("diet", "superseded", "c" * 32)
    # Importing it again adds nothing (the same derived ids).
    assert import_jsonl(services.store, path, max_chars=100_000).facts == 0


def test_a_key_taken_by_a_writer_holding_no_lock_is_a_conflict(
    postgres_engine: Engine,
) -> None:
    store = SQLStore(postgres_engine)
    facts = FactStore(store.database)
    raced: list[bool] = []

    def squat(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        # Just before the put inserts its fact, another writer (no lock) takes the key.
        if statement.startswith("INSERT INTO facts") and not raced:
            raced.append(True)
            with postgres_engine.connect() as other:
                other.execute(
                    text(
                        "INSERT INTO facts (id, user_id, text, kind, origin, status, "
                        "created_at, valid_from, store_key) VALUES (:id, 'ana', 'Squatted.', "
                        "'other', 'api', 'current', now(), now(), 'diet')"
                    ),
                    {"id": uuid.uuid4().hex},
                )
                other.commit()

    event.listen(postgres_engine, "before_cursor_execute", squat)
    try:
        with pytest.raises(StorageConflictError, match="send the change again") as raised:
            facts.put("ana", "diet", "I am vegan.", kind=None, subject=None)
    finally:
        event.remove(postgres_engine, "before_cursor_execute", squat)
    assert status_of(raised.value) == 409
    # Sent again, it is decided against what is stored now: the squatted fact is edited.
    assert facts.put("ana", "diet", "I am vegan.", kind=None, subject=None).text == "I am vegan."
    assert [f.text for f in facts.of_user("ana")] == ["I am vegan."]


def test_an_import_never_gives_a_key_two_current_facts(
    tmp_path: Path, opened: Callable[[MemorySettings], tuple[Services, MemoryStore]]
) -> None:
    services, store = opened(_settings(tmp_path / "data"))
    store.put(FACTS, "diet", {"text": "I am vegan."})
    stored = services.manager.fact_store.by_key("ana", "diet")
    assert stored is not None
    path = tmp_path / "in.jsonl"
    path.write_text(_line(id="d" * 32, text="I eat fish.", key="diet") + "\n", encoding="utf-8")
    with pytest.raises(ImportFileError, match="line 1: key 'diet' of user 'ana' names a current"):
        import_jsonl(services.store, path, max_chars=100_000)
    twice = [_line(id=c * 32, text=f"Fact {c}.", key="seat") for c in "ef"]
    path.write_text("\n".join(twice) + "\n", encoding="utf-8")
    with pytest.raises(ImportFileError, match=r"line 2: key 'seat' .* names another current"):
        import_jsonl(services.store, path, max_chars=100_000)
    assert [f.id for f in services.manager.facts("ana")] == [stored.id]  # nothing imported
