"""A user's facts are bounded, and reading or adding them does not read them all.

On SQLite and PostgreSQL:

* **The limit** (``max_facts``, ``memory_max_facts_per_user``): a change that would make one
  more current fact of a user at the limit is refused (:class:`FactLimitError`, nothing
  changed), whoever asks; one that adds none (the same fact again, a newer value of a
  subject, history) is not; dismissing makes room; concurrent adds cannot pass it together.
* **The cache of each user's vectors** (:mod:`memory_chain.tiers.sql.fact_matrix`): a read
  that finds the user's version unchanged reads one row and the page it shows; a change made
  through another store on the same database (a stand-in for another replica), a purge, or
  an UPDATE by hand is seen at the next read. The matrix an add keeps is the one a fresh
  read gives.
* **No unbounded IN lists**: ``profile(limit=None)``, ``retired`` and ``restore`` bind their
  ids a chunk at a time, tested past one chunk (and past SQLite's 32,766 variables).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, event, text

from memory_chain.errors import FactLimitError
from memory_chain.facts.model import Fact, FactDraft
from memory_chain.tiers.sql import SQLStore, create_sql_engine
from memory_chain.tiers.sql import rows as sql_rows
from memory_chain.tiers.sql.fact_matrix import read_matrix, read_version
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings

_DAY = timedelta(days=1)


def _word(word: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
    return np.random.default_rng(seed).normal(size=64)


def _embed(texts: list[str]) -> list[list[float]]:
    """A stand-in model: the sum of a fixed random vector per word (facts sharing words are
    related, "I live in Porto." / "I live in Lisbon." 0.75), normalized."""
    out = []
    for said in texts:
        vector = sum(_word(w) for w in said.lower().strip(".").split())
        out.append((vector / np.linalg.norm(vector)).tolist())
    return out


@pytest.fixture
def facts(store: SQLStore) -> FactStore:
    """Three facts per user at most; no model (the subject alone decides a newer value)."""
    return FactStore(store.database, max_facts=3)


class Statements:
    """The SQL statements an engine runs, with their bound parameters."""

    def __init__(self, engine: Engine) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.engine = engine

    def __enter__(self) -> Statements:
        event.listen(self.engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._record)

    def _record(
        self, _conn: Any, _cursor: Any, statement: str, params: Any, _context: Any, many: bool
    ) -> None:
        if "fact" in statement and not many:  # not the pool's pings, nor an INSERT's rows
            self.seen.append((" ".join(statement.split()), params))

    def binds(self) -> int:
        """The most parameters one statement bound."""
        sizes = [len(p) if isinstance(p, dict | tuple | list) else 0 for _, p in self.seen]
        return max(sizes, default=0)


# -- the limit ---------------------------------------------------------------------------------


def test_a_user_at_the_limit_gets_no_new_fact_and_is_told_what_to_do(facts: FactStore) -> None:
    for said in ("I live in Porto.", "My wife is Ana.", "I swim."):
        assert facts.add("ana", FactDraft(said, subject="home" if "live" in said else None))
    with pytest.raises(FactLimitError) as refused:
        facts.add("ana", FactDraft("I play the cello."))
    message = str(refused.value)
    assert "has 3 current facts" in message
    assert "DELETE /v1/facts/{id}" in message
    assert "MEMORY_CHAIN_MEMORY_MAX_FACTS_PER_USER" in message
    assert len(facts.of_user("ana")) == 3
    # What adds no current fact is not refused: the same fact, a newer value, history.
    assert facts.add("ana", FactDraft("i swim")).action == "same"
    moved = facts.add("ana", FactDraft("I live in Lisbon.", subject="home"))
    assert moved.action == "superseded"
    old = datetime(2020, 1, 1, tzinfo=UTC)
    past = facts.add("ana", FactDraft("I live in Oslo.", subject="home", valid_from=old))
    assert past.action == "history"
    assert len(facts.of_user("ana")) == 3
    # Other users are not limited by ana's facts; a dismissed fact makes room.
    assert facts.add("bob", FactDraft("I play the cello.")).action == "added"
    swim = next(f for f in facts.of_user("ana") if f.text == "I swim.")
    facts.dismiss("ana", swim.id)
    assert facts.add("ana", FactDraft("I play the cello.")).action == "added"


def test_a_store_key_at_the_limit_edits_its_fact_but_adds_none(facts: FactStore) -> None:
    facts.put("ana", "diet", "I am vegan.", kind=None, subject=None)
    facts.add("ana", FactDraft("I swim."))
    facts.add("ana", FactDraft("I run."))
    assert facts.put("ana", "diet", "I am vegetarian.", kind=None, subject=None).text == (
        "I am vegetarian."
    )
    with pytest.raises(FactLimitError):
        facts.put("ana", "car", "I drive a Volvo.", kind=None, subject=None)
    assert facts.by_key("ana", "car") is None


def test_concurrent_adds_cannot_pass_the_limit_together(store: SQLStore) -> None:
    limited = FactStore(store.database, embed=_embed, max_facts=5)
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def add(number: int) -> None:
        start.wait()
        try:
            limited.add("ana", FactDraft(f"Fact number {number}."))
            outcomes.append("added")
        except FactLimitError:
            outcomes.append("refused")

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["added"] * 5 + ["refused"] * 3
    assert len(limited.of_user("ana")) == 5


def test_restore_refuses_current_facts_past_the_limit_and_stores_none(facts: FactStore) -> None:
    facts.add("ana", FactDraft("I swim."))
    now = datetime.now(UTC)

    def fact(number: int, status: str) -> Fact:
        return Fact(
            id=f"{number:032x}",
            user_id="ana",
            text=f"Fact number {number}.",
            kind="other",
            origin="api",
            status=status,  # type: ignore[arg-type]
            created_at=now,
            valid_from=now,
        )

    # History does not count: two current ones fit beside "I swim.", three do not.
    history = [fact(n, "dismissed") for n in range(10)]
    with pytest.raises(FactLimitError, match="3 more would pass the 3"):
        facts.restore([*history, fact(10, "current"), fact(11, "current"), fact(12, "current")])
    assert facts.count("ana") == {"current": 1, "superseded": 0, "dismissed": 0}
    assert facts.restore([*history, fact(10, "current"), fact(11, "current")]) == 12


# -- the cache of each user's vectors, and other replicas -----------------------------------


@pytest.fixture
def replica(sql_url: str, engine: Engine) -> Iterator[FactStore]:
    """A FactStore on its own engine of the same database: another replica's."""
    other = create_sql_engine(sql_url)
    yield FactStore(SQLStore(other).database, embed=_embed, max_facts=100)
    other.dispose()


def test_a_change_by_another_replica_is_seen_at_the_next_read(
    store: SQLStore, replica: FactStore
) -> None:
    here = FactStore(store.database, embed=_embed, max_facts=100)
    query = np.asarray(_embed(["I swim every morning."])[0], dtype="<f4")
    here.add("ana", FactDraft("I swim every morning."))
    assert [r.fact.text for r in here.profile("ana", query)] == ["I swim every morning."]

    added = replica.add("ana", FactDraft("My wife is Ana.")).fact
    assert {r.fact.text for r in here.profile("ana", query)} == {
        "I swim every morning.",
        "My wife is Ana.",
    }
    replica.edit("ana", added.id, text="My wife is Anna.")
    assert "My wife is Anna." in [r.fact.text for r in here.profile("ana", query)]
    replica.add("ana", FactDraft("my wife is anna", subject="wife", kind="relationship"))
    wife = next(r.fact for r in here.profile("ana", query) if r.fact.id == added.id)
    assert (wife.subject, wife.kind) == ("wife", "relationship")  # filled in elsewhere
    replica.dismiss("ana", added.id)
    assert [r.fact.text for r in here.profile("ana", query)] == ["I swim every morning."]
    # A write that is no FactStore's (a purge, a hand-made UPDATE) changes the version too.
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE facts SET embedding = NULL WHERE user_id = 'ana'"))
    assert [r.score for r in here.profile("ana", query)] == [None]
    replica.delete_user("ana")
    assert here.profile("ana", query) == []
    # The user's version row went with the last fact; a new fact makes a new one.
    with store.engine.connect() as conn:
        assert read_version(conn, "ana") is None
    replica.add("ana", FactDraft("I run."))
    assert [r.fact.text for r in here.profile("ana", query)] == ["I run."]


def test_a_read_with_the_version_unchanged_reads_one_row(store: SQLStore) -> None:
    many = FactStore(store.database, embed=_embed, max_facts=500)
    for number in range(200):
        many.add("ana", FactDraft(f"Fact number {number} about the garden."))
    query = np.asarray(_embed(["the garden"])[0], dtype="<f4")
    other = np.asarray(_embed(["the kitchen"])[0], dtype="<f4")
    with Statements(store.engine) as first:
        shown = many.profile("ana", query, limit=10)
    # The first read after the adds: the version, and the ten facts shown (by their ids).
    assert len(first.seen) == 2, first.seen
    version, page = (statement for statement, _ in first.seen)
    assert "FROM fact_versions" in version
    assert "embedding" not in page  # no vector is read whole
    assert first.binds() <= 10
    with Statements(store.engine) as again:
        assert many.profile("ana", query, limit=10) == shown
        many.profile("ana", other, limit=10)
    # Then the version only, and the facts not shown yet.
    assert "FROM fact_versions" in again.seen[0][0]
    assert len(again.seen) in (3, 4), again.seen


def test_a_turn_and_an_add_read_by_key_never_every_current_fact(tmp_path: Any) -> None:
    """SQLite's plan of every statement a warm read, ``retired`` and an add run."""
    from memory_chain.tiers.sql import upgrade

    engine = create_sql_engine(f"sqlite:///{tmp_path / 'plans.db'}")
    upgrade(engine)
    try:
        facts = FactStore(SQLStore(engine).database, embed=_embed, max_facts=500)
        for number in range(300):
            subject = "home" if number % 50 == 0 else None
            facts.add("ana", FactDraft(f"Fact number {number}.", subject=subject))
        query = np.asarray(_embed(["Fact number 7."])[0], dtype="<f4")
        facts.profile("ana", query)
        with Statements(engine) as seen:
            facts.profile("ana", query)
            facts.retired("ana", ["trip", "home"])
            facts.add("ana", FactDraft("I live in Lisbon.", subject="home", origin="extracted"))
        plans = []
        with engine.connect() as conn:
            for statement, params in seen.seen:
                if statement.startswith("SELECT"):
                    plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params).all()
                    plans.append((statement, " / ".join(str(row[3]) for row in plan)))
        assert len(plans) >= 6
        for statement, plan in plans:
            assert "USING INDEX idx_facts_user_status" not in plan, (statement, plan)
            assert not plan.startswith("SCAN"), (statement, plan)
    finally:
        engine.dispose()


def test_what_an_add_keeps_in_the_cache_is_what_a_fresh_read_gives(store: SQLStore) -> None:
    facts = FactStore(store.database, embed=_embed, max_facts=100)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    steps: list[tuple[str, FactDraft]] = [
        ("add", FactDraft("I live in Porto.", subject="home", valid_from=start)),
        ("bare", FactDraft("I swim.", valid_from=start)),  # the same time: ordered by id
        ("add", FactDraft("I live in Lisbon.", subject="home", valid_from=start + _DAY * 2)),
        ("add", FactDraft("I lived in Oslo.", subject="home", valid_from=start + _DAY)),  # history
        ("add", FactDraft("i swim", subject="sport", kind="preference")),  # fills "I swim."
        ("add", FactDraft("I run.", valid_from=start - _DAY * 9)),
        ("put", FactDraft("I am vegan.", subject="diet")),
        ("add", FactDraft("I am vegan", subject="diet")),  # the same: nothing changes
        ("add", FactDraft("I eat fish now.", subject="diet")),  # supersedes: the key moves
    ]
    bare = FactStore(store.database, max_facts=100)  # a fact without a vector
    query = np.asarray(_embed(["What do I eat?"])[0], dtype="<f4")
    for how, draft in steps:
        if how == "put":
            facts.put("ana", "diet", draft.text, kind=None, subject=draft.subject)
        else:
            (bare if how == "bare" else facts).add("ana", draft)
        facts.profile("ana", query, limit=None)  # what reads cache as they show facts
        with store.engine.connect() as conn:
            cached = facts.matrices.get(conn, "ana")
            fresh = read_matrix(conn, "ana", read_version(conn, "ana"))
        assert cached.ids == fresh.ids
        assert cached.version == fresh.version
        assert (cached.scored == fresh.scored).all()
        assert np.array_equal(cached.vectors, fresh.vectors)
        shown = facts.profile("ana", query, limit=None)
        assert shown == FactStore(store.database).profile("ana", query, limit=None)
    diet = facts.by_key("ana", "diet")
    assert diet is not None
    assert diet.text == "I eat fish now."


def test_the_cache_keeps_within_its_size(store: SQLStore) -> None:
    small = FactStore(store.database, embed=_embed, cache_bytes=4_000)
    for user in ("ana", "bob", "cyd", "dee"):
        for number in range(5):
            small.add(user, FactDraft(f"{user} fact {number}."))
        small.profile(user, None)
    assert small.matrices.nbytes <= 4_000
    assert 0 < len(small.matrices) < 4
    assert small.profile("ana", None)[0].fact.text == "ana fact 4."


# -- no unbounded IN lists -----------------------------------------------------------------------


def _restored(facts: FactStore, count: int, user: str = "ana") -> list[Fact]:
    now = datetime(2026, 5, 1, tzinfo=UTC)
    made = [
        Fact(
            id=f"{number:032x}",
            user_id=user,
            text=f"Fact number {number}.",
            kind="other",
            origin="extracted",
            status="current" if number % 2 == 0 else "dismissed",
            created_at=now,
            valid_from=now - timedelta(seconds=number),
            conversation_id=f"c{number}",
        )
        for number in range(count)
    ]
    assert facts.restore(made) == count
    return made


def test_every_list_of_ids_is_bound_a_chunk_at_a_time(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_rows, "IN_CHUNK", 7)
    facts = FactStore(store.database, max_facts=100)
    with Statements(store.engine) as seen:
        made = _restored(facts, 40)
        everything = facts.profile("ana", None, limit=None)
        retired = facts.retired("ana", [fact.conversation_id or "" for fact in made])
    assert [r.fact.id for r in everything] == [f.id for f in made if f.status == "current"]
    assert len(retired) == 20
    # Each statement bound one chunk of ids at most (plus its other parameters).
    assert seen.binds() <= 7 + 3, max(seen.seen, key=lambda s: len(s[1] or ()))


def test_more_ids_than_sqlite_binds_in_one_statement(tmp_path: Any) -> None:
    from memory_chain.tiers.sql import upgrade

    engine = create_sql_engine(f"sqlite:///{tmp_path / 'many.db'}")

    @event.listens_for(engine, "connect")
    def upstream_limit(dbapi: Any, _record: Any) -> None:
        # SQLite's own default since 3.32 (Debian's build raises it to 250,000).
        dbapi.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 32_766)

    upgrade(engine)
    try:
        facts = FactStore(SQLStore(engine).database, max_facts=40_000)
        now = datetime(2026, 5, 1, tzinfo=UTC)
        many = [
            Fact(f"{n:032x}", "ana", f"Fact {n}.", "other", "api", "current", now, now)
            for n in range(33_000)  # past SQLite's 32,766 variables
        ]
        assert facts.restore(many) == 33_000
        assert len(facts.profile("ana", None, limit=None)) == 33_000
        assert facts.retired("ana", [f"c{n}" for n in range(40_000)]) == []
    finally:
        engine.dispose()


def test_the_real_model_ranks_from_the_cache(
    store: SQLStore, embeddings: SentenceEmbeddings
) -> None:
    ranked = FactStore(store.database, embed=embeddings.embed_documents)
    for said in ("I am allergic to peanuts.", "I drive a Volvo.", "My daughter Mia is 7."):
        ranked.add("ana", FactDraft(said))
    question = embeddings.embed_query("Which foods must I avoid?")
    for _ in range(2):  # a miss, then a hit
        assert ranked.profile("ana", question)[0].fact.text == "I am allergic to peanuts."
