"""The migrated schema has the tables, columns and indexes the stores use (SQLite, PostgreSQL)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from memory_chain.errors import SchemaNotReadyError
from memory_chain.tiers.sql import check_schema, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.migrate import current_revision, downgrade, head_revision
from memory_chain.tiers.sql.models import Base

SCHEMA_COLUMNS = {
    "conversations": [
        "id", "conversation_id", "user_id", "created_at", "last_message_at", "turn_count",
        "total_tokens", "summary", "status",
    ],
    "conversation_turns": [
        "id", "conversation_id", "turn_number", "role", "content", "timestamp",
        "tokens_prompt", "tokens_completion", "tokens_total",
    ],
    "conversation_summaries": [
        "id", "conversation_id", "summary_text", "turn_range_start", "turn_range_end",
        "created_at", "token_count",
    ],
}  # fmt: skip


def test_tables_columns_and_indexes_are_as_documented(engine: Engine) -> None:
    inspector = inspect(engine)
    for table, columns in SCHEMA_COLUMNS.items():
        assert [c["name"] for c in inspector.get_columns(table)] == columns
    indexes = {i["name"]: i for i in inspector.get_indexes("conversation_turns")}
    assert indexes["idx_conversation_id"]["column_names"] == ["conversation_id"]
    assert indexes["idx_timestamp"]["column_names"] == ["timestamp"]
    summary_indexes = {i["name"]: i for i in inspector.get_indexes("conversation_summaries")}
    assert summary_indexes["idx_summary_conv"]["column_names"] == ["conversation_id"]
    uniques = inspector.get_unique_constraints("conversation_turns")
    assert any(u["column_names"] == ["conversation_id", "turn_number"] for u in uniques)
    nullable = {c["name"]: c["nullable"] for c in inspector.get_columns("conversation_turns")}
    assert not nullable["content"]
    assert not nullable["role"]
    fks = inspector.get_foreign_keys("conversation_turns")
    assert fks[0]["referred_table"] == "conversations"
    assert fks[0]["referred_columns"] == ["conversation_id"]


def _not_vector_table(name: str | None, kind: str, _parent: object) -> bool:
    # Tier 3's pgvector tables are tier 3's (memory_chain.tiers.sql.vector_tables).
    return not (kind == "table" and name in {"vector_points", "vector_collections"})


def test_models_match_the_migrations(engine: Engine) -> None:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_name": _not_vector_table})
        diff = compare_metadata(context, Base.metadata)
    # Full-text tables/indexes live outside the models on purpose.
    relevant = [d for d in diff if "_fts" not in str(d)]
    assert relevant == []


def test_check_schema_and_round_trip(sql_url: str) -> None:
    engine = create_sql_engine(sql_url)
    try:
        with pytest.raises(SchemaNotReadyError, match="memory-chain migrate"):
            check_schema(engine)
        upgrade(engine)
        check_schema(engine)
        assert current_revision(engine) == head_revision()
        upgrade(engine)  # idempotent
        downgrade(engine, "base")
        assert current_revision(engine) is None
        assert inspect(engine).get_table_names() == ["alembic_version"]
        upgrade(engine)
        assert set(SCHEMA_COLUMNS) <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_sqlite_runs_in_wal_with_fts5(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "memory.db"
    engine = create_sql_engine(f"sqlite:///{path}")
    upgrade(engine)  # creates the folder
    engine.dispose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"conversation_turns_fts", "conversation_summaries_fts"} <= names


def test_in_memory_sqlite_is_refused() -> None:
    with pytest.raises(ValueError, match="file path"):
        create_sql_engine("sqlite://")


def test_sqlite_full_text_index_follows_inserts_and_deletes(tmp_path: Path) -> None:
    from memory_chain.schemas import NewTurn
    from memory_chain.tiers.sql import SQLStore

    path = tmp_path / "memory.db"
    engine = create_sql_engine(f"sqlite:///{path}")
    upgrade(engine)
    store = SQLStore(engine)
    store.append_turns("c1", [NewTurn("user", "zebra crossing")], user_id="u1")
    store.append_turns("c2", [NewTurn("user", "zebra stripes")], user_id="u2")
    store.add_summary("c1", "zebra talk", (1, 1), user_id="u1")

    def fts_count(table: str, match: str) -> int:
        with sqlite3.connect(path) as conn:
            query = f"SELECT count(*) FROM {table} WHERE {table} MATCH ?"
            return int(conn.execute(query, (match,)).fetchone()[0])

    assert fts_count("conversation_turns_fts", "body:zebra") == 2
    assert fts_count("conversation_turns_fts", f'scope:"c{b"u1/c1".hex()}" AND zebra') == 1
    assert fts_count("conversation_turns_fts", f'scope:"u{b"u2".hex()}" AND zebra') == 1
    assert store.delete_conversation("c1", user_id="u1")
    # The index dropped the rows (deleted by rowid: nothing stale is left behind).
    assert fts_count("conversation_turns_fts", "body:zebra") == 1
    assert fts_count("conversation_summaries_fts", "body:zebra") == 0
    engine.dispose()


def _turn_matches(path: Path, match: str) -> list[int]:
    with sqlite3.connect(path) as conn:
        query = "SELECT rowid FROM conversation_turns_fts WHERE conversation_turns_fts MATCH ?"
        return sorted(int(row[0]) for row in conn.execute(query, (match,)))


def test_turns_are_found_by_the_previous_turns_words(tmp_path: Path) -> None:
    from sqlalchemy import text

    from memory_chain.schemas import NewTurn
    from memory_chain.tiers.sql import SQLStore

    path = tmp_path / "memory.db"
    engine = create_sql_engine(f"sqlite:///{path}")
    upgrade(engine)
    store = SQLStore(engine)
    store.append_turns(
        "trip",
        [NewTurn("user", "What are your plans for the summer?"), NewTurn("assistant", "Hiking.")],
        user_id="ana",
    )
    store.append_turns("trip", [NewTurn("user", "Nice, where?")], user_id="ana")
    hits = store.search("summer plans", user_id="ana", limit=5)
    # The question first (its own words weigh double), then the answer found by its context.
    assert [h.turn_number for h in hits if h.kind == "turn"] == [1, 2]
    assert _turn_matches(path, "context:hiking") == [3]  # across append_turns calls
    # Editing a turn re-indexes it and the context of the next one.
    with engine.begin() as conn:
        conn.execute(text("UPDATE conversation_turns SET content = 'Sailing.' WHERE id = 2"))
    assert _turn_matches(path, "context:hiking") == []
    assert _turn_matches(path, "context:sailing") == [3]
    assert _turn_matches(path, "body:sailing") == [2]
    assert store.delete_conversation("trip", user_id="ana")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM conversation_turns_fts").fetchone() == (0,)
    engine.dispose()


def test_turns_are_found_by_the_next_turns_words(tmp_path: Path) -> None:
    from sqlalchemy import text

    from memory_chain.schemas import NewTurn
    from memory_chain.tiers.sql import SQLStore

    path = tmp_path / "memory.db"
    engine = create_sql_engine(f"sqlite:///{path}")
    upgrade(engine, "0003")
    store = SQLStore(engine)
    store.append_turns("trip", [NewTurn("user", "Any plans for the summer?")], user_id="ana")
    store.append_turns("trip", [NewTurn("assistant", "Kayaking in Norway.")], user_id="ana")
    upgrade(engine)  # 0004 indexes existing turns with their next turn
    assert _turn_matches(path, "next:kayaking") == [1]
    # A new turn fills its predecessor's next column, within and across append_turns calls.
    store.append_turns(
        "trip", [NewTurn("user", "Wow, Norway!"), NewTurn("assistant", "Fjords.")], user_id="ana"
    )
    assert _turn_matches(path, "next:wow") == [2]
    assert _turn_matches(path, "next:fjords") == [3]
    # Editing a turn re-indexes it and both neighbours' columns.
    with engine.begin() as conn:
        conn.execute(text("UPDATE conversation_turns SET content = 'Sailing.' WHERE id = 2"))
    assert _turn_matches(path, "next:sailing") == [1]
    assert _turn_matches(path, "context:sailing") == [3]
    assert _turn_matches(path, "next:kayaking") == []
    # The search ranks a turn's own words above its neighbours'.
    hits = store.search("sailing", user_id="ana", kinds=("turn",))
    assert [h.turn_number for h in hits] == [2, 3, 1]
    downgrade(engine, "0003")
    assert _turn_matches(path, "context:sailing") == [3]
    assert _turn_matches(path, "body:sailing") == [2]
    upgrade(engine)
    assert store.delete_conversation("trip", user_id="ana")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM conversation_turns_fts").fetchone() == (0,)
    engine.dispose()


def test_context_migration_indexes_existing_turns_and_downgrades(tmp_path: Path) -> None:
    from memory_chain.schemas import NewTurn
    from memory_chain.tiers.sql import SQLStore

    path = tmp_path / "memory.db"
    engine = create_sql_engine(f"sqlite:///{path}")
    upgrade(engine, "0002")
    store = SQLStore(engine)
    store.append_turns(
        "trip", [NewTurn("user", "Any plans?"), NewTurn("assistant", "Kayaking.")], user_id="ana"
    )
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    assert _turn_matches(path, "context:plans") == [2]
    assert _turn_matches(path, "body:kayaking") == [2]
    downgrade(engine, "0002")
    assert _turn_matches(path, "body:kayaking") == [2]
    store.append_turns("trip", [NewTurn("user", "Kayaking where?")], user_id="ana")
    assert _turn_matches(path, "body:kayaking") == [2, 3]
    with sqlite3.connect(path) as conn:  # this code's purge needs the newer tables
        conn.execute("DELETE FROM embedding_outbox")
        conn.execute("DELETE FROM conversation_turns")
    assert _turn_matches(path, "body:kayaking") == []
    engine.dispose()


def test_total_tokens_count_the_turns_own_text_and_0005_recounts(sql_url: str) -> None:
    from sqlalchemy import text

    from memory_chain.schemas import NewTurn, TokenUsage
    from memory_chain.tiers.sql import SQLStore

    engine = create_sql_engine(sql_url)
    try:
        upgrade(engine)
        store = SQLStore(engine)
        # A reply the model billed at 700 prompt + 5 completion tokens: its own text is 5.
        reply = NewTurn("assistant", "Noted.", tokens=TokenUsage(705, prompt=700, completion=5))
        store.append_turns(
            "trip", [NewTurn("user", "Fly Sunday.", tokens=TokenUsage(7)), reply], user_id="ana"
        )
        info = store.get_conversation("trip", user_id="ana")
        assert info is not None
        assert info.total_tokens == 12
        turns = store.get_turns("trip", user_id="ana")
        assert turns[1].tokens == TokenUsage(705, prompt=700, completion=5)  # the bill is kept

        # A database written before 0005 summed the bills; the migration recounts it.
        downgrade(engine, "0004")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT total_tokens FROM conversations")).scalar() == 712
        upgrade(engine)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT total_tokens FROM conversations")).scalar() == 12
    finally:
        engine.dispose()


def _vector_tables(engine: Engine) -> set[str]:
    return {"vector_points", "vector_collections"} & set(inspect(engine).get_table_names())


@pytest.mark.postgres
def test_0008_creates_the_pgvector_tables_and_downgrades(postgres_engine: Engine) -> None:
    from sqlalchemy import text

    assert _vector_tables(postgres_engine) == {"vector_points", "vector_collections"}
    indexes = {i["name"] for i in inspect(postgres_engine).get_indexes("vector_points")}
    assert {"ix_vector_points_user", "ix_vector_points_conversation"} <= indexes
    with postgres_engine.connect() as conn:
        hnsw = conn.execute(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_vector_points_hnsw_384'")
        ).scalar_one()
    assert "hnsw" in hnsw
    assert "vector(384)" in hnsw
    downgrade(postgres_engine, "0007")
    assert _vector_tables(postgres_engine) == set()
    upgrade(postgres_engine)
    assert _vector_tables(postgres_engine) == {"vector_points", "vector_collections"}


@pytest.mark.postgres
def test_a_role_that_may_not_create_the_extension_gets_the_tables_once_it_exists(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """pgvector needs a superuser to install: the migration skips it and says how to fix it,
    and the next `memory-chain migrate` after an administrator installed it creates them."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from tests.postgres import database_url

    name = f"plain_{id(caplog)}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{name}" LOGIN'))
        conn.execute(text(f'CREATE DATABASE "{name}" OWNER "{name}"'))
    owner_url = make_url(database_url(postgres_url, name)).set(username=name)
    engine = create_sql_engine(owner_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT current_user")).scalar() == name
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert _vector_tables(engine) == set()
        assert "CREATE EXTENSION vector" in caplog.text

        superuser = create_engine(database_url(postgres_url, name), isolation_level="AUTOCOMMIT")
        with superuser.connect() as conn:
            conn.execute(text("CREATE EXTENSION vector"))
        superuser.dispose()
        upgrade(engine)
        assert _vector_tables(engine) == {"vector_points", "vector_collections"}
    finally:
        engine.dispose()
        admin.dispose()


@pytest.mark.postgres
def test_replicas_starting_together_migrate_one_at_a_time(postgres_url: str) -> None:
    import threading

    from tests.conftest import _fresh_postgres_database

    url = _fresh_postgres_database(postgres_url)
    engines = [create_sql_engine(url) for _ in range(4)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(engines))

    def start(engine: Engine) -> None:
        try:
            barrier.wait()
            upgrade(engine)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(engine,)) for engine in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert current_revision(engines[0]) == head_revision()
    for engine in engines:
        engine.dispose()


def test_0007_gives_each_user_their_own_conversation_ids(sql_url: str) -> None:
    from sqlalchemy import text

    from memory_chain.schemas import NewTurn
    from memory_chain.tiers.sql import SQLStore

    engine = create_sql_engine(sql_url)
    try:
        upgrade(engine, "0006")
        # Data as 0006 stored it: ids global, ana's "c1" and bob's "c2".
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO conversations (conversation_id, user_id, turn_count, "
                    "total_tokens, status, summary) VALUES ('c1', 'ana', 2, 4, 'active', 'S'), "
                    "('c2', 'bob', 1, 2, 'archived', NULL)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO conversation_turns (conversation_id, turn_number, role, "
                    "content) VALUES ('c1', 1, 'user', 'Remember this: zebra crossing'), "
                    "('c1', 2, 'assistant', 'Noted zebra'), ('c2', 1, 'user', 'zebra stripes')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO conversation_summaries (conversation_id, summary_text, "
                    "turn_range_start, turn_range_end) VALUES ('c1', 'zebra talk', 1, 2)"
                )
            )
            conn.execute(
                text("INSERT INTO dismissed_facts (conversation_id, turn_number) VALUES ('c1', 1)")
            )
        upgrade(engine)
        store = SQLStore(engine, queue_embeddings=True)
        ana = store.get_conversation("c1", user_id="ana")
        assert ana is not None
        assert (ana.turn_count, ana.summary, ana.status) == (2, "S", "active")
        assert [t.content for t in store.get_turns("c1", user_id="ana")][1] == "Noted zebra"
        assert store.get_summaries("c1", user_id="ana")[0].summary_text == "zebra talk"
        # The "remember this" turn, dismissed as a fact, carried over as a dismissed fact
        # (migration 0010), in the conversation's id as ana knows it.
        (fact,) = FactStore(store.database).of_user("ana", statuses=("current", "dismissed"))
        assert (fact.text, fact.status, fact.origin) == ("zebra crossing", "dismissed", "explicit")
        assert (fact.conversation_id, fact.turns) == ("c1", (1, 1))
        assert store.get_conversation("c1", user_id="bob") is None
        bob = store.get_conversation("c2", user_id="bob")
        assert bob is not None
        assert bob.status == "archived"
        # Keyword search, within a user and within one conversation (the index's scopes).
        hits = store.search("zebra", user_id="ana", limit=10)
        assert {(h.kind, h.conversation_id) for h in hits} == {("turn", "c1"), ("summary", "c1")}
        inside = store.search("zebra", user_id="ana", conversation_id="c1", kinds=("turn",))
        assert sorted(h.turn_number for h in inside) == [1, 2]
        assert store.search("zebra", user_id="bob", conversation_id="c1") == []
        # Tier 3 re-embeds both conversations under point ids that include their owner.
        tasks = [(t.kind, t.user_id, t.conversation_id) for t in store.tasks().pending()]
        assert tasks == [("forget", "ana", "c1"), ("forget", "bob", "c2")]
        # Bob can now have a "c1" of his own.
        store.append_turns("c1", [NewTurn("user", "bob's own c1")], user_id="bob")
        assert [t.content for t in store.get_turns("c1", user_id="bob")] == ["bob's own c1"]
        with pytest.raises(RuntimeError, match="2 users have a conversation 'c1'"):
            downgrade(engine, "0006")
        assert store.delete_conversation("c1", user_id="bob")
        downgrade(engine, "0006")
        with engine.connect() as conn:
            ids = conn.execute(text("SELECT conversation_id FROM conversations ORDER BY id"))
            assert [row[0] for row in ids] == ["c1", "c2"]
            owners = conn.execute(text("SELECT DISTINCT conversation_id FROM conversation_turns"))
            assert sorted(row[0] for row in owners) == ["c1", "c2"]
    finally:
        engine.dispose()


def test_0010_carries_the_turn_based_facts_over_and_drops_the_misfires(sql_url: str) -> None:
    from sqlalchemy import text

    from memory_chain.tiers.sql import SQLStore

    engine = create_sql_engine(sql_url)
    try:
        upgrade(engine, "0009")
        said = [
            (1, "user", "We fly to Lisbon on 3 May."),
            (2, "assistant", "Noted."),
            (3, "user", "Remember this."),  # about the previous user message
            (4, "user", "I don't remember that movie."),  # matched by the old rule
            (5, "user", "Please remember this: my seat is 14C."),
            (6, "user", "Keep in mind that I am vegan."),
            (7, "assistant", "Remember this: an assistant turn is no request."),
        ]
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO conversations (conversation_id, user_id, turn_count, "
                    "total_tokens, status) VALUES ('ana/trip', 'ana', 7, 0, 'active')"
                )
            )
            for number, role, content in said:
                conn.execute(
                    text(
                        "INSERT INTO conversation_turns (conversation_id, turn_number, role, "
                        "content) VALUES ('ana/trip', :n, :role, :content)"
                    ),
                    {"n": number, "role": role, "content": content},
                )
            conn.execute(
                text(
                    "INSERT INTO dismissed_facts (conversation_id, turn_number) "
                    "VALUES ('ana/trip', 6)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO vector_tasks (kind, user_id, conversation_id, first_turn, "
                    "last_turn) VALUES ('forget_fact', 'ana', 'trip', 6, 6), "
                    "('refresh', 'ana', 'trip', 1, 2)"
                )
            )
        upgrade(engine)
        store = SQLStore(engine, queue_embeddings=True)
        facts = FactStore(store.database).of_user(
            "ana", statuses=("current", "superseded", "dismissed")
        )
        carried = sorted((f.turns, f.text, f.status, f.origin) for f in facts)
        assert carried == [
            ((3, 3), "We fly to Lisbon on 3 May.", "current", "explicit"),
            ((5, 5), "my seat is 14C.", "current", "explicit"),
            ((6, 6), "I am vegan.", "dismissed", "explicit"),
        ]
        assert all(f.conversation_id == "trip" for f in facts)
        assert [t.kind for t in store.tasks().pending()] == ["refresh"]
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        assert "dismissed_facts" not in tables
        downgrade(engine, "0009")  # and back: the old table is there again, empty
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        assert {"dismissed_facts"} <= tables
        assert "facts" not in tables
    finally:
        engine.dispose()


def test_0011_adds_store_items_and_downgrades(sql_url: str) -> None:
    from sqlalchemy import text

    from memory_chain.tiers.sql import SQLStore
    from memory_chain.tiers.sql.store_items import StoreItems

    engine = create_sql_engine(sql_url)
    try:
        upgrade(engine, "0010")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO facts (id, user_id, text, kind, origin, status, created_at, "
                    "valid_from) VALUES ('f1', 'ana', 'I am vegan', 'preference', 'api', "
                    "'current', '2026-12-05 10:00:00', '2026-12-05 10:00:00')"
                )
            )
        upgrade(engine)
        columns = [c["name"] for c in inspect(engine).get_columns("store_items")]
        assert columns == [
            "user_id", "namespace", "key", "value", "search_text", "embedding", "created_at",
            "updated_at",
        ]  # fmt: skip
        key = inspect(engine).get_pk_constraint("store_items")["constrained_columns"]
        assert key == ["user_id", "namespace", "key"]
        store = SQLStore(engine)
        # Kept (and, since 0013, under the store key "f1" with an id of its own).
        assert FactStore(store.database).by_key("ana", "f1") is not None
        items = StoreItems(store.database)
        items.put("ana", ("notes", "work"), "k1", {"text": "standup at 9"}, search_text="x")
        items.put("ana", ("notes",), "k2", {"text": "oat milk"})
        items.put("bob", ("notes",), "k1", {"text": "bob's"})
        items.put("ana", ("notes",), "k2", {"text": "rye bread"})  # replaces
        assert items.get("ana", ("notes",), "k2").value == {"text": "rye bread"}
        assert {(i.namespace, i.key) for i in items.under("ana", ("notes",))} == {
            (("notes", "work"), "k1"),
            (("notes",), "k2"),
        }
        assert items.under("ana", ("note",)) == []  # a prefix is whole labels
        assert sorted(items.namespaces()) == [
            ("ana", ("notes",)),
            ("ana", ("notes", "work")),
            ("bob", ("notes",)),
        ]
        assert store.delete_user("ana") == 0  # no conversations; the items go all the same
        assert items.namespaces() == [("bob", ("notes",))]
        downgrade(engine, "0010")
        tables = set(inspect(engine).get_table_names())
        assert "store_items" not in tables
        assert "facts" in tables
    finally:
        engine.dispose()


def test_0013_gives_store_keys_their_own_column_and_downgrades(sql_url: str) -> None:
    from sqlalchemy import text

    from memory_chain.facts.model import keyed_id
    from memory_chain.tiers.sql import SQLStore

    engine = create_sql_engine(sql_url)
    hexed = "a" * 32
    try:
        upgrade(engine, "0012")
        rows = [  # the key "diet" was the id; a superseded copy points to it
            ("diet", "current", None, "I am vegan."),
            ("b" * 32, "superseded", "diet", "I am vegetarian."),
            (hexed, "current", None, "My seat is 14C."),  # an id, or a 32-digit key
        ]
        with engine.begin() as conn:
            for fact_id, status, superseded_by, said in rows:
                conn.execute(
                    text(
                        "INSERT INTO facts (id, user_id, text, kind, origin, status, "
                        "created_at, valid_from, invalidated_at, superseded_by) VALUES (:id, "
                        "'ana', :text, 'other', 'api', :status, '2026-12-05 10:00:00', "
                        "'2026-12-05 10:00:00', :gone, :by)"
                    ),
                    {
                        "id": fact_id,
                        "text": said,
                        "status": status,
                        "by": superseded_by,
                        "gone": "2026-12-06 10:00:00" if superseded_by else None,
                    },
                )
        upgrade(engine)
        facts = FactStore(SQLStore(engine).database)
        diet = facts.by_key("ana", "diet")
        assert diet is not None
        assert (diet.id, diet.key) == (keyed_id("ana", "diet"), "diet")
        past = facts.get("ana", "b" * 32)
        assert past is not None
        assert past.superseded_by == diet.id
        seat = facts.by_key("ana", hexed)  # found by its id, as before
        assert seat is not None
        assert (seat.id, seat.key) == (hexed, None)
        indexes = {i["name"]: i for i in inspect(engine).get_indexes("facts")}
        assert indexes["uq_facts_user_store_key"]["unique"]
        downgrade(engine, "0012")  # the key is the id again, and the links follow
        with engine.connect() as conn:
            back = dict(conn.execute(text("SELECT id, superseded_by FROM facts")).all())
        assert back == {"diet": None, "b" * 32: "diet", hexed: None}
    finally:
        engine.dispose()


def test_0014_gives_each_fact_its_sources_and_downgrades(sql_url: str) -> None:
    from sqlalchemy import text

    engine = create_sql_engine(sql_url)
    try:
        upgrade(engine, "0013")
        rows = [  # id, conversation, turns, created_at, valid_from
            ("a" * 32, "trip", (3, 4), "2026-12-05 10:00:00", "2026-12-01 09:00:00"),  # learnt
            ("b" * 32, "home", (1, 1), "2026-12-05 10:00:00", "2026-12-09 10:00:00"),  # edited
            ("c" * 32, None, None, "2026-12-05 10:00:00", "2026-12-05 10:00:00"),  # by hand
            ("d" * 32, None, None, "2026-12-01 10:00:00", "2026-12-01 10:00:00"),  # see below
        ]
        with engine.begin() as conn:
            for fact_id, conversation, turns, created, valid in rows:
                conn.execute(
                    text(
                        "INSERT INTO facts (id, user_id, text, kind, origin, status, "
                        "conversation_id, first_turn, last_turn, created_at, valid_from) VALUES "
                        "(:id, 'ana', 'a fact', 'other', 'api', 'current', :conversation, "
                        ":first, :last, :created, :valid)"
                    ),
                    {
                        "id": fact_id,
                        "conversation": conversation,
                        "first": turns[0] if turns else None,
                        "last": turns[1] if turns else None,
                        "created": created,
                        "valid": valid,
                    },
                )
            # Superseded by a fact a purge took (as purges did): it dangles.
            conn.execute(
                text(
                    "UPDATE facts SET status = 'superseded', superseded_by = :gone, "
                    "invalidated_at = '2026-12-02 10:00:00' WHERE id = :id"
                ),
                {"gone": "e" * 32, "id": "d" * 32},
            )
        upgrade(engine)
        with engine.connect() as conn:
            repaired = conn.execute(
                text("SELECT status, superseded_by FROM facts WHERE id = :id"), {"id": "d" * 32}
            ).one()
        assert tuple(repaired) == ("dismissed", None)  # as it was treated: nothing in its place
        query = text(
            "SELECT fact_id, user_id, conversation_id, first_turn, last_turn, said_at "
            "FROM fact_sources ORDER BY fact_id"
        )
        with engine.connect() as conn:
            sources = [(*row[:5], str(row[5])[:19]) for row in conn.execute(query)]
        assert sources == [
            ("a" * 32, "ana", "trip", 3, 4, "2026-12-01 09:00:00"),  # when it was said
            ("b" * 32, "ana", "home", 1, 1, "2026-12-05 10:00:00"),  # not when it was edited
        ]
        indexes = {i["name"]: i for i in inspect(engine).get_indexes("fact_sources")}
        columns = indexes["idx_fact_sources_user_conv"]["column_names"]
        assert columns == ["user_id", "conversation_id"]
        downgrade(engine, "0013")
        assert "fact_sources" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            kept = conn.execute(text("SELECT id, conversation_id FROM facts ORDER BY id")).all()
        assert [tuple(row) for row in kept] == [
            ("a" * 32, "trip"),
            ("b" * 32, "home"),
            ("c" * 32, None),
            ("d" * 32, None),
        ]
        upgrade(engine)
        with engine.connect() as conn:
            assert [row[0] for row in conn.execute(query)] == ["a" * 32, "b" * 32]
    finally:
        engine.dispose()


def test_0015_keys_facts_by_their_words_and_subject_versions_users_and_downgrades(
    sql_url: str,
) -> None:
    from sqlalchemy import text

    from memory_chain.tiers.sql.fact_keys import subject_digest, text_key

    engine = create_sql_engine(sql_url)
    insert = text(
        "INSERT INTO facts (id, user_id, text, kind, origin, status, subject, created_at, "
        "valid_from) VALUES (:id, :user, :text, 'other', 'api', 'current', :subject, "
        "'2026-12-05 10:00:00', '2026-12-05 10:00:00')"
    )

    def version(user: str) -> str | None:
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT version FROM fact_versions WHERE user_id = :u"), {"u": user}
            ).scalar()
        return found if found is None else str(found)

    try:
        upgrade(engine, "0014")
        with engine.begin() as conn:
            conn.execute(
                insert,
                {
                    "id": "a" * 32,
                    "user": "ana",
                    "text": "I live in Porto.",
                    "subject": "The Home City",
                },
            )
            conn.execute(
                insert, {"id": "b" * 32, "user": "bob", "text": "I swim.", "subject": None}
            )
        upgrade(engine)
        with engine.connect() as conn:
            keys = {
                row[0]: (row[1], row[2])
                for row in conn.execute(text("SELECT id, text_key, subject_key FROM facts"))
            }
        assert keys["a" * 32] == (text_key("i live in porto"), subject_digest("home city"))
        assert keys["b" * 32] == (text_key("I swim"), None)
        indexes = {i["name"]: i["column_names"] for i in inspect(engine).get_indexes("facts")}
        assert indexes["idx_facts_user_text"] == ["user_id", "text_key"]
        assert indexes["idx_facts_user_subject"] == ["user_id", "subject_key"]
        assert indexes["idx_facts_user_conversation"] == ["user_id", "conversation_id"]
        # Every user with facts has a version; every change of one of theirs replaces it.
        first, bob = version("ana"), version("bob")
        assert first is not None
        assert bob is not None
        with engine.begin() as conn:
            conn.execute(insert, {"id": "c" * 32, "user": "ana", "text": "I run.", "subject": None})
        second = version("ana")
        assert second not in (None, first)
        with engine.begin() as conn:
            conn.execute(text("UPDATE facts SET kind = 'plan' WHERE id = :id"), {"id": "c" * 32})
        third = version("ana")
        assert third not in (None, second)
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM facts WHERE id = :id"), {"id": "c" * 32})
        assert version("ana") not in (None, third)
        assert version("bob") == bob  # another user's changes leave bob's version
        with engine.begin() as conn:  # the user's last fact: the row goes with it
            conn.execute(text("DELETE FROM facts WHERE user_id = 'ana'"))
        assert version("ana") is None
        downgrade(engine, "0014")
        assert "fact_versions" not in inspect(engine).get_table_names()
        columns = {c["name"] for c in inspect(engine).get_columns("facts")}
        assert not {"text_key", "subject_key"} & columns
        with engine.begin() as conn:  # no trigger left behind
            conn.execute(insert, {"id": "d" * 32, "user": "cyd", "text": "I row.", "subject": None})
        upgrade(engine)
        assert version("cyd") is not None
    finally:
        engine.dispose()
