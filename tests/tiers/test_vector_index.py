"""Contract tests of the tier-3 VectorIndex backends.

Every contract test runs on EdgeIndex (qdrant-edge in a temp folder), on QdrantIndex over
``QdrantClient(":memory:")`` and on PgVectorIndex over the test run's PostgreSQL with pgvector;
the last tests cover what only one backend has: the folder lock, persistence and kill -9
durability of EdgeIndex, an unreachable server for QdrantIndex and PgVectorIndex.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qdrant_client import QdrantClient
from sqlalchemy import Engine, text

from memory_chain.errors import InvalidInputError, VectorStoreError, VectorStoreUnavailableError
from memory_chain.tiers.vectors.edge import EdgeIndex
from memory_chain.tiers.vectors.index import (
    TurnPayload,
    VectorFilter,
    VectorIndex,
    VectorPoint,
    point_id,
)
from memory_chain.tiers.vectors.pgvector import PgVectorIndex
from memory_chain.tiers.vectors.qdrant import QdrantIndex
from tests.tiers.vector_points import DIM, T0, make_point, unit_vectors

#: (user, conversation) pairs of the standard data set: u1 has two conversations, u2 one.
CONVERSATIONS = [("u1", "c1"), ("u1", "c2"), ("u2", "c3")]
TURNS = 6


@dataclass
class Backend:
    name: str
    make: Callable[[int], VectorIndex]


@pytest.fixture(params=["edge", "qdrant-memory", "pgvector"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "edge":
        yield Backend("edge", lambda dim: EdgeIndex(tmp_path / "vectors", dimension=dim))
        return
    if request.param == "pgvector":
        engine: Engine = request.getfixturevalue("postgres_engine")
        yield Backend("pgvector", lambda dim: PgVectorIndex(engine, dimension=dim))
        return
    client = QdrantClient(":memory:")
    yield Backend("qdrant-memory", lambda dim: QdrantIndex(client, dimension=dim))
    client.close()


@pytest.fixture
def index(backend: Backend) -> Iterator[VectorIndex]:
    index = backend.make(DIM)
    index.open()
    yield index
    index.close()


def standard_points(seed: int = 7) -> list[VectorPoint]:
    """Six turns per conversation, one minute apart, conversations an hour apart."""
    vectors = unit_vectors(np.random.default_rng(seed), len(CONVERSATIONS) * TURNS)
    return [
        make_point(user, conv, turn, vectors[c * TURNS + turn], minutes=60 * c + turn)
        for c, (user, conv) in enumerate(CONVERSATIONS)
        for turn in range(TURNS)
    ]


def ids(points: Iterator[VectorPoint] | list[VectorPoint]) -> set[str]:
    return {p.id for p in points}


def as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def selects(where: VectorFilter, payload: TurnPayload) -> bool:
    """The reference semantics of VectorFilter (naive datetimes are UTC)."""
    return (
        (where.user_id is None or payload.user_id == where.user_id)
        and (where.conversation_id is None or payload.conversation_id == where.conversation_id)
        and (where.roles is None or payload.role in where.roles)
        and (where.since is None or payload.timestamp >= as_utc(where.since))
        and (where.until is None or payload.timestamp <= as_utc(where.until))
        and (where.tags is None or bool(set(payload.tags) & set(where.tags)))
        and (
            where.ids is None
            or point_id(payload.user_id, payload.conversation_id, payload.turn_number) in where.ids
        )
    )


# --- search -----------------------------------------------------------------------------------


def test_backends_implement_the_protocol(index: VectorIndex) -> None:
    assert isinstance(index, VectorIndex)
    assert index.dimension == DIM


def test_search_returns_nearest_first_with_cosine_scores(index: VectorIndex) -> None:
    points = standard_points()
    index.upsert(points)
    target = points[3]
    u1 = [p for p in points if p.payload.user_id == "u1"]

    hits = index.search(target.vector, VectorFilter("u1"), k=5)

    assert hits[0].id == target.id
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].payload == target.payload
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    matrix = np.array([p.vector for p in u1])
    exact = matrix @ np.asarray(target.vector)
    expected = [u1[i].id for i in np.argsort(-exact)[:5]]
    assert [h.id for h in hits] == expected
    np.testing.assert_allclose(scores, np.sort(exact)[::-1][:5], atol=1e-5)


def test_search_score_is_cosine_for_unnormalized_queries(index: VectorIndex) -> None:
    point = standard_points()[0]
    index.upsert([point])
    hits = index.search([7.5 * x for x in point.vector], VectorFilter("u1"), k=1)
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    opposite = index.search([-x for x in point.vector], VectorFilter("u1"), k=1)
    assert opposite[0].score == pytest.approx(-1.0, abs=1e-5)


def test_search_needs_a_user_and_valid_arguments(index: VectorIndex) -> None:
    index.upsert(standard_points())
    query = [1.0] + [0.0] * (DIM - 1)
    with pytest.raises(InvalidInputError, match="user"):
        index.search(query, VectorFilter(None, conversation_id="c1"), k=3)
    with pytest.raises(InvalidInputError, match="dimensions"):
        index.search(query[:-1], VectorFilter("u1"), k=3)
    with pytest.raises(InvalidInputError):
        index.search(query, VectorFilter("u1"), k=-1)
    assert index.search(query, VectorFilter("u1"), k=0) == []
    assert index.search(query, VectorFilter("nobody"), k=3) == []


def test_upsert_rejects_wrong_dimension_and_bad_ids(index: VectorIndex) -> None:
    good = standard_points()[0]
    with pytest.raises(InvalidInputError, match="dimensions"):
        index.upsert([VectorPoint(good.id, good.vector[:-1], good.payload)])
    with pytest.raises(InvalidInputError, match="UUID"):
        index.upsert([VectorPoint("turn-1", good.vector, good.payload)])
    assert index.count() == 0
    index.upsert([])
    assert index.count() == 0


def test_upserting_an_id_twice_keeps_one_point(index: VectorIndex) -> None:
    first = standard_points()[0]
    vector = unit_vectors(np.random.default_rng(1), 1)[0]
    second = make_point("u1", "c1", 0, vector, minutes=5)
    assert second.id == first.id

    index.upsert([first])
    index.upsert([second])

    assert index.count() == 1
    (stored,) = index.scroll()
    assert stored.payload == second.payload
    np.testing.assert_allclose(stored.vector, vector, atol=1e-6)


# --- filters, count, delete, scroll ------------------------------------------------------------

FILTERS = {
    "user": VectorFilter("u1"),
    "other user": VectorFilter("u2"),
    "conversation": VectorFilter("u1", conversation_id="c2"),
    "another user's conversation": VectorFilter("u1", conversation_id="c3"),
    "one role": VectorFilter("u1", roles=("user",)),
    "two roles": VectorFilter("u1", roles=("user", "assistant")),
    "no role": VectorFilter("u1", roles=()),
    "since (inclusive)": VectorFilter("u1", since=T0 + timedelta(minutes=62)),
    "until (inclusive)": VectorFilter("u1", until=T0 + timedelta(minutes=3)),
    "window": VectorFilter("u1", since=T0 + timedelta(minutes=2), until=T0 + timedelta(minutes=61)),
    "window in other timezones": VectorFilter(
        "u1",
        since=(T0 + timedelta(minutes=2)).astimezone(timezone(timedelta(hours=2))),
        until=(T0 + timedelta(minutes=61)).astimezone(timezone(timedelta(hours=-5))),
    ),
    "naive window (taken as UTC)": VectorFilter(
        "u1",
        since=(T0 + timedelta(minutes=2)).replace(tzinfo=None),
        until=(T0 + timedelta(minutes=61)).replace(tzinfo=None),
    ),
    "everything": VectorFilter("u1", "c1", ("assistant",), T0, T0 + timedelta(minutes=4)),
    # Point ids: another user's id and an id of no point are ignored; none matches nothing.
    "point ids": VectorFilter(
        "u1",
        ids=(
            point_id("u1", "c1", 1),
            point_id("u1", "c2", 4),
            point_id("u2", "c3", 2),
            "9a1f6b6e-0000-4000-8000-000000000000",
        ),
    ),
    "point ids and roles": VectorFilter(
        "u1", roles=("user",), ids=(point_id("u1", "c1", 1), point_id("u1", "c1", 2))
    ),
    "no point ids": VectorFilter("u1", ids=()),
    # Tags: any of them (the odd turns are tagged "travel" and "t<turn>").
    "one tag": VectorFilter("u1", tags=("travel",)),
    "two tags": VectorFilter("u1", tags=("t2", "t3")),
    "tags and roles": VectorFilter("u1", roles=("assistant",), tags=("travel",)),
    "no tags": VectorFilter("u1", tags=()),
}


@pytest.mark.parametrize("name", FILTERS)
def test_filters_restrict_search_count_and_scroll(index: VectorIndex, name: str) -> None:
    where = FILTERS[name]
    points = standard_points()
    index.upsert(points)
    expected = {p.id for p in points if selects(where, p.payload)}

    hits = index.search(points[0].vector, where, k=len(points))

    assert {h.id for h in hits} == expected
    assert all(selects(where, h.payload) for h in hits)
    assert index.count(where) == len(expected)
    assert ids(index.scroll(where)) == expected


def test_point_ids_must_be_uuids(index: VectorIndex) -> None:
    index.upsert(standard_points())
    with pytest.raises(InvalidInputError, match="not a UUID"):
        index.search([1.0] * DIM, VectorFilter("u1", ids=("turn-1",)), 3)
    with pytest.raises(InvalidInputError, match="not one string"):
        index.search([1.0] * DIM, VectorFilter("u1", ids=point_id("u1", "c1", 1)), 3)  # type: ignore[arg-type]


def test_count_with_and_without_filters(index: VectorIndex) -> None:
    assert index.count() == 0
    index.upsert(standard_points())
    assert index.count() == len(CONVERSATIONS) * TURNS
    assert index.count(None) == index.count(VectorFilter(None))
    assert index.count(VectorFilter("u1")) == 2 * TURNS
    assert index.count(VectorFilter(None, conversation_id="c3")) == TURNS
    assert index.count(VectorFilter(None, roles=("assistant",))) == len(CONVERSATIONS) * TURNS // 2


def test_delete_by_conversation_removes_exactly_its_points(index: VectorIndex) -> None:
    points = standard_points()
    index.upsert(points)
    index.delete(VectorFilter("u1", conversation_id="c1"))
    assert ids(index.scroll()) == {p.id for p in points if p.payload.conversation_id != "c1"}


def test_delete_by_user_removes_exactly_their_points(index: VectorIndex) -> None:
    points = standard_points()
    index.upsert(points)
    index.delete(VectorFilter("u1"))
    assert ids(index.scroll()) == {p.id for p in points if p.payload.user_id != "u1"}
    index.delete(VectorFilter(None))
    assert index.count() == 0


def test_scroll_returns_every_point_with_payload_and_vector(index: VectorIndex) -> None:
    rng = np.random.default_rng(3)
    vectors = unit_vectors(rng, 600)  # more than one scroll page
    points = [make_point(f"u{i % 3}", f"c{i % 7}", i, vectors[i]) for i in range(600)]
    index.upsert(points)

    stored = {p.id: p for p in index.scroll()}

    assert stored.keys() == ids(points)
    for point in points:
        assert stored[point.id].payload == point.payload
        np.testing.assert_allclose(stored[point.id].vector, point.vector, atol=1e-6)
    assert ids(index.scroll(VectorFilter("u1"))) == {
        p.id for p in points if p.payload.user_id == "u1"
    }


def test_payloads_and_scores_read_the_users_points_by_id(index: VectorIndex) -> None:
    points = standard_points()
    index.upsert(points)
    by_id = {p.id: p for p in points}
    u1_c1 = [point_id("u1", "c1", turn) for turn in (0, 3, 5)]
    wanted = [
        *u1_c1,
        point_id("u2", "c3", 2),
        point_id("u1", "c1", 99),
    ]  # another user's, one never stored
    query = unit_vectors(np.random.default_rng(11), 1)[0]

    payloads = index.payloads("u1", wanted)
    scores = index.scores(query.tolist(), "u1", wanted)

    assert sorted(payloads, key=lambda p: p.turn_number) == [by_id[i].payload for i in u1_c1]
    assert scores.keys() == set(u1_c1)
    for point_key, score in scores.items():
        assert score == pytest.approx(float(np.dot(query, by_id[point_key].vector)), abs=1e-5)
    assert index.payloads("u1", []) == []
    assert index.scores(query.tolist(), "u1", []) == {}
    assert index.payloads("nobody", u1_c1) == []
    assert index.scores(query.tolist(), "x", u1_c1) == {}
    with pytest.raises(InvalidInputError):
        index.scores([1.0, 0.0], "u1", u1_c1)
    with pytest.raises(InvalidInputError):
        index.scores(query.tolist(), "u1", ["not-a-uuid"])


# --- lifecycle ------------------------------------------------------------------------------


def test_open_twice_and_drop_then_open_gives_an_empty_collection(index: VectorIndex) -> None:
    index.upsert(standard_points())
    index.open()
    assert index.count() == len(CONVERSATIONS) * TURNS
    index.drop()
    index.drop()
    index.open()
    assert index.count() == 0
    assert list(index.scroll()) == []


def test_calls_after_close_raise_vector_store_error(backend: Backend) -> None:
    index = backend.make(DIM)
    with pytest.raises(VectorStoreError):
        index.count()  # not opened yet (QdrantIndex: no collection)
    index.open()
    index.close()
    index.close()
    with pytest.raises(VectorStoreError):
        index.upsert(standard_points()[:1])
    with pytest.raises(VectorStoreError):
        index.payloads("u1", [point_id("u1", "c1", 1)])


def test_reopening_with_another_dimension_is_refused(backend: Backend) -> None:
    first = backend.make(DIM)
    first.open()
    first.upsert(standard_points()[:1])
    if backend.name == "edge":
        first.close()
    with pytest.raises(VectorStoreError, match="16"):
        backend.make(DIM * 2).open()


def test_local_mode_open_does_not_warn() -> None:
    index = QdrantIndex(QdrantClient(":memory:"), dimension=DIM)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        index.open()
    index.close()


def test_concurrent_upserts_and_searches(index: VectorIndex) -> None:
    vectors = unit_vectors(np.random.default_rng(5), 400)
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            for i in range(worker, 400, 4):
                index.upsert([make_point(f"u{worker}", f"w{worker}", i, vectors[i])])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader(worker: int) -> None:
        try:
            for i in range(100):
                for hit in index.search(vectors[i].tolist(), VectorFilter(f"u{worker}"), k=3):
                    assert hit.payload.user_id == f"u{worker}"
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=reader, args=(w,)) for w in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert index.count() == 400


# --- property: never another user's points, and exact top-k -----------------------------------


@st.composite
def datasets(draw: st.DrawFn) -> tuple[list[VectorPoint], VectorFilter, np.ndarray, int]:
    n = draw(st.integers(min_value=1, max_value=40))
    seed = draw(st.integers(min_value=0, max_value=2**32 - 1))
    rng = np.random.default_rng(seed)
    vectors = unit_vectors(rng, n + 1)
    points = []
    for i in range(n):
        owner = draw(st.sampled_from(["ann", "bob", "cy"]))
        # Conversation ids shared across users: the user filter must still hold.
        shared = draw(st.sampled_from(["c0", "c1", "c2"]))
        points.append(make_point(owner, shared, i, vectors[i], minutes=i))
    user = draw(st.sampled_from(["ann", "bob", "cy"]))
    conversation: str | None = draw(st.one_of(st.none(), st.sampled_from(["c0", "c1"])))
    k = draw(st.integers(min_value=1, max_value=10))
    return points, VectorFilter(user, conversation_id=conversation), vectors[n], k


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=datasets())
def test_search_is_exact_top_k_within_the_callers_scope(
    index: VectorIndex, data: tuple[list[VectorPoint], VectorFilter, np.ndarray, int]
) -> None:
    points, where, query, k = data
    index.delete(VectorFilter(None))
    index.upsert(points)

    hits = index.search(query.tolist(), where, k)

    for hit in hits:
        assert hit.payload.user_id == where.user_id
        if where.conversation_id is not None:
            assert hit.payload.conversation_id == where.conversation_id
    allowed = [p for p in points if selects(where, p.payload)]
    assert len(hits) == min(k, len(allowed))
    if not allowed:
        return
    exact = {p.id: float(np.dot(p.vector, query)) for p in allowed}
    ranked = sorted(exact.values(), reverse=True)
    for hit in hits:
        assert hit.score == pytest.approx(exact[hit.id], abs=1e-4)
        assert exact[hit.id] >= ranked[len(hits) - 1] - 1e-4
    if len(allowed) <= k or ranked[k - 1] - ranked[k] > 1e-4:
        top = sorted(exact, key=exact.__getitem__, reverse=True)[:k]
        assert {h.id for h in hits} == set(top)


# --- EdgeIndex only: persistence, durability, the folder lock ---------------------------------


def test_edge_points_persist_across_close_and_reopen(tmp_path: Path) -> None:
    points = standard_points()
    first = EdgeIndex(tmp_path, dimension=DIM)
    first.open()
    first.upsert(points)
    first.close()

    second = EdgeIndex(tmp_path, dimension=DIM)
    second.open()
    stored = {p.id: p for p in second.scroll()}
    second.close()

    assert stored.keys() == ids(points)
    for point in points:
        assert stored[point.id].payload == point.payload
        np.testing.assert_allclose(stored[point.id].vector, point.vector, atol=1e-6)


def _run_python(code: str, *, stdin: int | None = None) -> subprocess.Popen[str]:
    """Run ``code`` in a fresh interpreter from the project root (``tests`` importable)."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        text=True,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_edge_upserts_survive_kill_9(tmp_path: Path) -> None:
    n = 500
    child = _run_python(
        f"""
        import os, signal
        from pathlib import Path
        import numpy as np
        from tests.tiers.vector_points import make_point, unit_vectors, DIM
        from memory_chain.tiers.vectors.edge import EdgeIndex

        index = EdgeIndex(Path({str(tmp_path)!r}), dimension=DIM)
        index.open()
        vectors = unit_vectors(np.random.default_rng(11), {n})
        points = [make_point("u1", f"c{{i % 5}}", i, vectors[i]) for i in range({n})]
        index.upsert(points[:400])             # one batch
        for point in points[400:]:             # and single upserts
            index.upsert([point])
        print("ACK", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, stderr
    assert stdout.strip() == "ACK"

    index = EdgeIndex(tmp_path, dimension=DIM)
    index.open()
    assert index.count() == n
    assert ids(index.scroll()) == {point_id("u1", f"c{i % 5}", i) for i in range(n)}
    index.close()


def test_edge_folder_held_by_another_process_is_unavailable(tmp_path: Path) -> None:
    holder = _run_python(
        f"""
        import sys
        from pathlib import Path
        from memory_chain.tiers.vectors.edge import EdgeIndex

        index = EdgeIndex(Path({str(tmp_path)!r}), dimension={DIM})
        index.open()
        print("READY", flush=True)
        sys.stdin.read()
        index.close()
        """,
        stdin=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "READY"
        index = EdgeIndex(tmp_path, dimension=DIM)
        with pytest.raises(VectorStoreUnavailableError, match="another process"):
            index.open()
        with pytest.raises(VectorStoreUnavailableError):
            index.drop()
        assert (tmp_path / "conversation_memory").is_dir()
    finally:
        holder.communicate(input="", timeout=30)
    assert holder.returncode == 0
    index.open()  # released
    index.close()


def test_edge_second_index_on_one_folder_in_one_process(tmp_path: Path) -> None:
    first = EdgeIndex(tmp_path, dimension=DIM)
    first.open()
    with pytest.raises(VectorStoreUnavailableError):
        EdgeIndex(tmp_path, dimension=DIM).open()
    first.close()


def test_edge_constructor_does_no_io_and_checks_names(tmp_path: Path) -> None:
    EdgeIndex(tmp_path / "missing", dimension=DIM)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(InvalidInputError):
        EdgeIndex(tmp_path, collection="../escape")
    with pytest.raises(InvalidInputError):
        EdgeIndex(tmp_path, dimension=0)


# --- QdrantIndex only: an unreachable server ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_qdrant_unreachable_server_is_unavailable_quickly() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    index = QdrantIndex.from_url(url, collection="memories", dimension=DIM, timeout=2)
    assert index.client.init_options["check_compatibility"] is False
    started = time.monotonic()
    with pytest.raises(VectorStoreUnavailableError, match="unreachable") as caught:
        index.open()
    assert time.monotonic() - started < 5
    assert url in str(caught.value)
    index.close()
    index.close()


# --- PgVectorIndex only: exact or HNSW, dimensions, schema --------------------------------------


@pytest.mark.postgres
def test_pgvector_searches_large_scopes_through_hnsw_with_the_same_results(
    postgres_engine: Engine,
) -> None:
    points = standard_points()
    exact = PgVectorIndex(postgres_engine, dimension=DIM)
    hnsw = PgVectorIndex(postgres_engine, dimension=DIM, exact_limit=3)
    exact.open()
    hnsw.open()
    exact.upsert(points)
    u1 = VectorFilter("u1")
    assert exact.search_mode(u1) == "exact"
    assert hnsw.search_mode(u1) == "hnsw"  # 12 points > 3
    assert hnsw.search_mode(VectorFilter("u1", conversation_id="c9")) == "exact"  # empty scope
    for where in (u1, VectorFilter("u1", roles=("user",)), VectorFilter("u2")):
        for point in points[::5]:
            found = hnsw.search(point.vector, where, k=4)
            expected = exact.search(point.vector, where, k=4)
            # A graph this small is searched whole: the same hits, the filter held.
            assert [h.id for h in found] == [h.id for h in expected]
            assert all(selects(where, h.payload) for h in found)
            assert [h.score for h in found] == pytest.approx([h.score for h in expected])
    with postgres_engine.connect() as conn:
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                text(
                    "EXPLAIN SELECT id FROM vector_points WHERE collection = 'c' AND "
                    f"vector_dims(embedding) = {DIM} ORDER BY embedding::vector({DIM}) <#> "
                    f"'[{','.join(['0.5'] * DIM)}]'::vector({DIM}) LIMIT 5"
                )
            )
        )
    assert f"ix_vector_points_hnsw_{DIM}" in plan  # open() made the index of this dimension


@pytest.mark.postgres
def test_pgvector_collections_of_several_dimensions_share_the_table(
    postgres_engine: Engine,
) -> None:
    small = PgVectorIndex(postgres_engine, collection="small", dimension=DIM)
    large = PgVectorIndex(postgres_engine, collection="large", dimension=2 * DIM)
    small.open()
    large.open()
    rng = np.random.default_rng(4)
    small.upsert([make_point("u1", "c1", 1, unit_vectors(rng, 1)[0])])
    large.upsert([make_point("u1", "c1", 1, unit_vectors(rng, 1, 2 * DIM)[0])])
    assert small.count() == large.count() == 1
    hits = large.search(unit_vectors(rng, 1, 2 * DIM)[0].tolist(), VectorFilter("u1"), 3)
    assert len(hits) == 1
    small.drop()
    assert large.count() == 1


def test_pgvector_needs_postgresql(tmp_path: Path) -> None:
    from memory_chain.tiers.sql import create_sql_engine

    engine = create_sql_engine(f"sqlite:///{tmp_path / 'memory.db'}")
    with pytest.raises(InvalidInputError, match="PostgreSQL"):
        PgVectorIndex(engine, dimension=DIM)
    engine.dispose()


@pytest.mark.postgres
def test_pgvector_on_an_unmigrated_database_says_what_to_do(postgres_url: str) -> None:
    from memory_chain.tiers.sql import create_sql_engine
    from tests.conftest import _fresh_postgres_database

    engine = create_sql_engine(_fresh_postgres_database(postgres_url))
    with pytest.raises(VectorStoreError, match="memory-chain migrate"):
        PgVectorIndex(engine, dimension=DIM).open()
    engine.dispose()


@pytest.mark.postgres
def test_pgvector_replicas_opening_at_once_agree(postgres_engine: Engine) -> None:
    """Replicas starting together register one collection and build one HNSW index."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def open_one() -> None:
        try:
            barrier.wait()
            PgVectorIndex(postgres_engine, collection="shared", dimension=3 * DIM).open()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
