"""Every driver error becomes an error that says what to do, and never an HTTP 500.

Against real databases (SQLite and PostgreSQL): a value the database refuses is bad input
(422), a key taken is a conflict (409), a missing table is a schema to migrate, a database
that is down or a pool with no free connection is a store unavailable (503). Then through
the API: a driver error that reaches a route unmapped gets the same statuses, and a
PostgreSQL server stopped under a running app answers 503.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, insert, literal, select, text
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from memory_chain.api import create_app
from memory_chain.api.errors import status_of
from memory_chain.config import MemorySettings
from memory_chain.errors import (
    InvalidInputError,
    SchemaNotReadyError,
    StorageConflictError,
    StorageError,
)
from memory_chain.tiers.sql import create_sql_engine
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.models import conversations
from memory_chain.tiers.sql.rows import storage_error
from tests.postgres import free_port, running_postgres


@pytest.fixture
def database(engine: Engine) -> Database:
    return Database(engine)


def _conversation(conversation_id: str) -> dict[str, Any]:
    return {"conversation_id": conversation_id, "user_id": "ana"}


def test_a_key_taken_is_a_conflict(database: Database) -> None:
    database.write(lambda conn: conn.execute(insert(conversations).values(_conversation("a/c"))))
    with pytest.raises(StorageConflictError, match="nothing was stored: send it again") as raised:
        database.write(
            lambda conn: conn.execute(insert(conversations).values(_conversation("a/c")))
        )
    assert isinstance(raised.value.__cause__, IntegrityError)
    assert status_of(raised.value) == 409


def test_a_nul_is_refused_by_postgresql_and_kept_by_sqlite(database: Database) -> None:
    # Kept by SQLite, it would make the export unimportable: the doors refuse it on both
    # (tests/api/test_storable_doors.py). Under the doors, PostgreSQL's refusal is bad input.
    def write(conn: Any) -> None:
        conn.execute(insert(conversations).values(_conversation("a\x00b")))

    if database.dialect == "sqlite":
        database.write(write)
        assert len(database.read(select(conversations))) == 1
        return
    with pytest.raises(InvalidInputError, match="refused a value") as raised:
        database.write(write)
    assert isinstance(raised.value.__cause__, DataError)
    assert status_of(raised.value) == 422
    assert database.read(select(conversations)) == []


def test_an_unpaired_surrogate_is_bad_input(database: Database) -> None:
    value = "lone \ud800"
    with pytest.raises(InvalidInputError) as raised:
        database.write(
            lambda conn: conn.execute(insert(conversations).values(_conversation(value)))
        )
    assert status_of(raised.value) == 422
    with pytest.raises(InvalidInputError):  # a read's parameter too
        database.read(select(conversations).where(conversations.c.conversation_id == value))
    assert database.read(select(conversations)) == []


@pytest.mark.postgres
def test_a_number_out_of_an_integer_column_is_bad_input(postgres_engine: Engine) -> None:
    database = Database(postgres_engine)
    row = {**_conversation("a/c"), "turn_count": 2**31}
    with pytest.raises(InvalidInputError, match="refused a value") as raised:
        database.write(lambda conn: conn.execute(insert(conversations).values(row)))
    assert isinstance(raised.value.__cause__, DataError)


def test_a_missing_table_asks_for_the_migration(sql_url: str) -> None:
    bare = create_sql_engine(sql_url)  # not migrated
    try:
        with pytest.raises(SchemaNotReadyError, match="memory-chain migrate"):
            Database(bare).read(select(conversations))
    finally:
        bare.dispose()


def test_a_database_that_cannot_be_reached_is_unavailable(tmp_path: Path) -> None:
    down = create_sql_engine(f"postgresql://memory@127.0.0.1:{free_port()}/memory")
    try:
        with pytest.raises(StorageError, match="tier-2 database error") as raised:
            Database(down).read(select(literal(1)))
    finally:
        down.dispose()
    assert isinstance(raised.value.__cause__, OperationalError)
    assert status_of(raised.value) == 503


def test_no_free_connection_in_the_pool_is_unavailable(tmp_path: Path) -> None:
    # One pooled connection and one overflow, both held by others.
    engine = create_sql_engine(f"sqlite:///{tmp_path / 'pool.db'}", pool_size=1, pool_timeout=0.2)
    database = Database(engine)
    held = [engine.connect(), engine.connect()]
    try:
        with pytest.raises(StorageError, match="no tier-2 database connection was free") as raised:
            database.read(select(literal(1)))
    finally:
        for conn in held:
            conn.close()
        engine.dispose()
    assert isinstance(raised.value.__cause__, PoolTimeoutError)
    assert status_of(raised.value) == 503


def test_only_driver_errors_are_mapped() -> None:
    assert storage_error(ValueError("not a driver error")) is None
    encode = UnicodeEncodeError("utf-8", "x\ud800", 1, 2, "surrogates not allowed")
    assert isinstance(storage_error(encode), InvalidInputError)


# -- through the API ------------------------------------------------------------------------


def _settings(tmp_path: Path, database_url: str | None = None) -> MemorySettings:
    return MemorySettings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        memory_tier3_enabled=False,
        llm_fallback="off",
        ollama_base_url=f"http://127.0.0.1:{free_port()}",  # no LLM: these routes need none
    )


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(_settings(tmp_path)), raise_server_exceptions=False) as opened:
        yield opened


@pytest.mark.parametrize(
    ("error", "status", "says"),
    [
        (DataError("INSERT ...", {}, Exception("invalid byte sequence 0x00")), 422, "0x00"),
        (IntegrityError("INSERT ...", {}, Exception("duplicate key value")), 409, "again"),
        (OperationalError("SELECT 1", {}, Exception("server closed the connection")), 503, ""),
        (PoolTimeoutError("QueuePool limit reached"), 503, "connection was free"),
    ],
    ids=["data", "integrity", "operational", "pool-timeout"],
)
def test_a_driver_error_that_reaches_a_route_is_mapped(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, error: Exception, status: int, says: str
) -> None:
    manager = client.app.state.services.manager  # type: ignore[attr-defined]

    def fail(*_args: object, **_kwargs: object) -> None:
        raise error

    monkeypatch.setattr(manager, "facts", fail)
    response = client.get("/v1/facts", headers={"X-User-Id": "ana"})
    assert response.status_code == status, response.text
    assert says in response.json()["detail"]


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_stopped_under_a_running_app_is_503(tmp_path: Path) -> None:
    with running_postgres() as server:
        app = create_app(_settings(tmp_path, server.url))
        with TestClient(app, raise_server_exceptions=False) as client:
            headers = {"X-User-Id": "ana"}
            turns = {"turns": [{"role": "user", "content": "We fly on 3 May."}]}
            assert client.post(
                "/v1/conversations/trip/turns", json=turns, headers=headers
            ).is_success
            server.stop()
            try:
                for method, path, body in [
                    ("GET", "/v1/conversations", None),
                    ("GET", "/v1/facts", None),
                    ("POST", "/v1/facts", {"text": "I like tea."}),
                    ("POST", "/v1/conversations/trip/turns", turns),
                ]:
                    response = client.request(method, path, json=body, headers=headers)
                    assert response.status_code == 503, (method, path, response.text)
                    assert response.json()["detail"], response.text
            finally:
                server.start()
            # Back: the pool's dead connections are replaced (pre-ping), requests succeed.
            assert client.get("/v1/conversations", headers=headers).status_code == 200


def test_a_refused_write_leaves_the_pool_usable(database: Database) -> None:
    failures: list[BaseException] = []

    def bad_write() -> None:
        try:
            database.write(
                lambda conn: conn.execute(insert(conversations).values(_conversation("x\ud800")))
            )
        except InvalidInputError as exc:
            failures.append(exc)

    for _ in range(3):  # in other threads, as the API's threadpool runs them
        thread = threading.Thread(target=bad_write)
        thread.start()
        thread.join()
    assert len(failures) == 3
    assert database.read(select(text("1"))) == [(1,)]


def test_a_driver_error_in_a_started_stream_is_reported_mapped() -> None:
    from memory_chain.api.openai_errors import stream_error_event

    event = stream_error_event(OperationalError("SELECT 1", {}, Exception("connection lost")))
    body = json.loads(event.removeprefix("data: "))
    assert body["error"]["code"] == 503
    assert "connection lost" in body["error"]["message"]
