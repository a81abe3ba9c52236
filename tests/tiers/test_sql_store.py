"""Tier 2 behaviour, run on SQLite and on a real PostgreSQL (the ``sql_url`` fixture)."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, select

from memory_chain.errors import ConversationNotFoundError, InvalidInputError, SchemaNotReadyError
from memory_chain.schemas import NewTurn, TokenUsage
from memory_chain.tiers.sql import SQLStore, create_sql_engine
from memory_chain.tiers.sql.models import conversations, summaries, turns
from memory_chain.tiers.sql.search import keyword_search
from memory_chain.tiers.sql.term_stats import TermStats


def _snapshot(store: SQLStore) -> tuple[list[tuple[object, ...]], ...]:
    with store.engine.connect() as conn:
        return tuple(
            [tuple(row) for row in conn.execute(select(table).order_by(table.c.id))]
            for table in (conversations, turns, summaries)
        )


def test_append_numbers_turns_and_updates_conversation(store: SQLStore) -> None:
    first = store.append_turns(
        "conv-1",
        [NewTurn("user", "What is FastAPI?", tokens=TokenUsage(total=5))],
        user_id="alice",
    )
    second = store.append_turns(
        "conv-1",
        [
            NewTurn(
                "assistant",
                "A Python web framework.",
                tokens=TokenUsage(total=135, prompt=15, completion=120),
            ),
            NewTurn("user", "Thanks"),
        ],
        user_id="alice",
    )
    assert [t.turn_number for t in first + second] == [1, 2, 3]
    info = store.get_conversation("conv-1", user_id="alice")
    assert info is not None
    assert info.user_id == "alice"
    assert info.turn_count == 3
    # Each turn's own text: the reply counts its completion (120), not the call's bill (135).
    assert info.total_tokens == 5 + 120
    assert info.status == "active"
    assert info.last_message_at is not None
    assert info.last_message_at.tzinfo is not None

    stored = store.get_turns("conv-1", user_id="alice")
    assert [(t.turn_number, t.role, t.content) for t in stored] == [
        (1, "user", "What is FastAPI?"),
        (2, "assistant", "A Python web framework."),
        (3, "user", "Thanks"),
    ]
    assert stored[1].tokens == TokenUsage(total=135, prompt=15, completion=120)
    assert stored[2].tokens is None
    assert stored[0].timestamp.tzinfo is not None


def test_explicit_timestamps_round_trip_in_utc(store: SQLStore) -> None:
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC) + timedelta(hours=0)
    store.append_turns("conv-t", [NewTurn("user", "hello", timestamp=when)])
    (turn,) = store.get_turns("conv-t", user_id="default")
    assert turn.timestamp == when


def test_recent_turns_and_paging(store: SQLStore) -> None:
    store.append_turns("c", [NewTurn("user", f"message {i}") for i in range(1, 13)])
    assert [t.turn_number for t in store.recent_turns("c", 5, user_id="default")] == [
        8,
        9,
        10,
        11,
        12,
    ]
    assert [t.turn_number for t in store.get_turns("c", user_id="default", after=3, limit=4)] == [
        4,
        5,
        6,
        7,
    ]
    assert store.recent_turns("missing", 5, user_id="default") == []


def test_conversation_ids_are_each_users_own(store: SQLStore) -> None:
    store.append_turns("shared-id", [NewTurn("user", "alice's secret plan")], user_id="alice")
    assert store.get_conversation("shared-id", user_id="bob") is None
    assert store.get_turns("shared-id", user_id="bob") == []
    assert store.recent_turns("shared-id", 3, user_id="bob") == []
    assert store.search("secret plan", user_id="bob") == []
    assert store.list_conversations(user_id="bob") == []
    assert not store.delete_conversation("shared-id", user_id="bob")
    with pytest.raises(ConversationNotFoundError):
        store.set_status("shared-id", "archived", user_id="bob")
    # Bob's write under the same id creates his own conversation, as under a free id.
    (bobs,) = store.append_turns("shared-id", [NewTurn("user", "bob writes")], user_id="bob")
    assert (bobs.conversation_id, bobs.turn_number) == ("shared-id", 1)
    assert [t.content for t in store.get_turns("shared-id", user_id="bob")] == ["bob writes"]
    assert [t.content for t in store.get_turns("shared-id", user_id="alice")] == [
        "alice's secret plan"
    ]
    assert [c.conversation_id for c in store.list_conversations(user_id="bob")] == ["shared-id"]
    assert {h.text for h in store.search("plan writes", user_id="bob")} == {"bob writes"}
    inside = store.search("plan writes", user_id="alice", conversation_id="shared-id")
    assert {h.text for h in inside} == {"alice's secret plan"}
    assert store.delete_conversation("shared-id", user_id="bob")
    assert store.get_conversation("shared-id", user_id="alice") is not None


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        (NewTurn("user", ""), "empty"),
        (NewTurn("user", "   \n"), "empty"),
        (NewTurn("robot", "hello"), "unknown role"),  # type: ignore[arg-type]
        (NewTurn("user", "x" * 10_000_000), "more than"),
        (NewTurn("user", "nul \x00 byte"), "NUL"),
        (NewTurn("user", "lone surrogate \ud800"), "not valid Unicode"),
        (NewTurn("user", "hi", tokens=TokenUsage(total=-1)), "negative"),
    ],
)
def test_bad_turns_are_rejected_and_nothing_changes(
    store: SQLStore, turn: NewTurn, message: str
) -> None:
    store.append_turns("conv-1", [NewTurn("user", "kept")])
    before = _snapshot(store)
    with pytest.raises(InvalidInputError, match=message):
        # A good turn first: the whole batch must be refused, not just the bad turn.
        store.append_turns("conv-1", [NewTurn("user", "good"), turn])
    assert _snapshot(store) == before


@pytest.mark.parametrize(
    "conversation_id", ["", " ", "../etc/passwd", "a/b", "x" * 129, "conv\n1", "ünïcode", "-lead"]
)
def test_invalid_conversation_ids_are_rejected(store: SQLStore, conversation_id: str) -> None:
    with pytest.raises(InvalidInputError, match="invalid conversation id"):
        store.append_turns(conversation_id, [NewTurn("user", "hello")])
    assert _snapshot(store) == ([], [], [])


def test_summaries_are_stored_once_per_range(store: SQLStore) -> None:
    store.append_turns("c", [NewTurn("user", f"turn {i}") for i in range(10)], user_id="u")
    stored = store.add_summary(
        "c",
        "They talked about turns.",
        (1, 10),
        token_count=6,
        running_summary="Turns.",
        user_id="u",
    )
    assert stored is not None
    assert (stored.turn_range_start, stored.turn_range_end) == (1, 10)
    second = store.add_summary("c", "A second try.", (1, 10), running_summary="Other.", user_id="u")
    assert second is None
    assert [s.summary_text for s in store.get_summaries("c", user_id="u")] == [
        "They talked about turns."
    ]
    info = store.get_conversation("c", user_id="u")
    assert info is not None
    assert info.summary == "Turns."


def test_concurrent_summaries_of_one_range_write_one(store: SQLStore) -> None:
    store.append_turns("c", [NewTurn("user", f"turn {i}") for i in range(10)])
    results: list[object] = []
    barrier = threading.Barrier(8)

    def consolidate(i: int) -> None:
        barrier.wait()
        results.append(store.add_summary("c", f"summary {i}", (1, 10), user_id="default"))

    threads = [threading.Thread(target=consolidate, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(result is not None for result in results) == 1
    assert len(store.get_summaries("c", user_id="default")) == 1


@pytest.mark.parametrize(
    ("turn_range", "message"),
    [((0, 3), "invalid turn range"), ((5, 4), "invalid"), ((1, 99), "past")],
)
def test_bad_summary_ranges_are_rejected(
    store: SQLStore, turn_range: tuple[int, int], message: str
) -> None:
    store.append_turns("c", [NewTurn("user", "one"), NewTurn("assistant", "two")])
    with pytest.raises(InvalidInputError, match=message):
        store.add_summary("c", "summary", turn_range, user_id="default")
    assert store.get_summaries("c", user_id="default") == []


def test_summary_of_unknown_or_foreign_conversation(store: SQLStore) -> None:
    store.append_turns("c", [NewTurn("user", "one")], user_id="alice")
    with pytest.raises(ConversationNotFoundError):
        store.add_summary("missing", "summary", (1, 1), user_id="alice")
    with pytest.raises(ConversationNotFoundError):
        store.add_summary("c", "summary", (1, 1), user_id="bob")


def test_keyword_search_ranks_turns_and_summaries(store: SQLStore) -> None:
    store.append_turns(
        "c1",
        [
            NewTurn("user", "What is FastAPI?"),
            NewTurn("assistant", "FastAPI is a modern Python web framework for APIs."),
            NewTurn("user", "And what about the weather in Lisbon?"),
        ],
        user_id="u",
    )
    store.append_turns(
        "c2", [NewTurn("user", "Django or FastAPI for a REST backend?")], user_id="u"
    )
    store.add_summary("c1", "Discussed FastAPI, then Lisbon weather.", (1, 3), user_id="u")

    hits = store.search("What did we discuss about FastAPI?", user_id="u", conversation_id="c1")
    turn_hits = [h for h in hits if h.kind == "turn"]
    summary_hits = [h for h in hits if h.kind == "summary"]
    assert {h.turn_number for h in turn_hits[:2]} == {1, 2}
    # A turn is also found, ranked lower, by its previous turn's words (turn 3 follows the
    # answer about FastAPI; migrations 0003 and, on PostgreSQL, 0012).
    assert [h.turn_number for h in turn_hits[2:]] == [3]
    assert all(h.conversation_id == "c1" for h in hits)
    assert [h.turn_range for h in summary_hits] == [(1, 3)]
    assert all(a.score >= b.score for a, b in itertools.pairwise(turn_hits))

    everywhere = store.search("fastapi", user_id="u", kinds=("turn",))
    assert {(h.conversation_id, h.turn_number) for h in everywhere} == {
        ("c1", 1),
        ("c1", 2),
        ("c2", 1),
    } | {("c1", 3)}
    # Stemming: "frameworks" finds "framework" (FTS5 porter / PostgreSQL english). The turns
    # around it are found too, by their neighbour's words: the turn after it (the previous
    # turn's words, weight 1) above the turn before it (the next turn's, ½).
    framework = store.search("frameworks", user_id="u", kinds=("turn",))
    assert [h.turn_number for h in framework] == [2, 3, 1]
    assert store.search("lisbon", user_id="u", limit=1, kinds=("turn",))[0].turn_number == 3


def _bicycles_and_a_whale(store: SQLStore) -> None:
    """Thirteen of user u's turns, each scoring differently for "blue red car"."""
    store.append_turns(
        "c1",
        [NewTurn("user", "the blue bicycle" + " and the red car" * i) for i in range(12)],
        user_id="u",
    )
    store.append_turns("c2", [NewTurn("user", "a blue whale")], user_id="u")


def test_search_turns_scores_many_more_turns_than_it_reads(store: SQLStore) -> None:
    _bicycles_and_a_whale(store)
    store.append_turns("c3", [NewTurn("user", "blue skies")], user_id="v")

    every = store.search("blue red car", user_id="u", kinds=("turn",), limit=100)
    # Every turn scores differently (more of the words, or a shorter text): no ties to break.
    hits, scores = store.search_turns("blue red car", user_id="u", limit=3, scored=100)
    assert [(h.conversation_id, h.turn_number, h.text) for h in hits] == [
        (h.conversation_id, h.turn_number, h.text) for h in every[:3]
    ]
    assert [h.score for h in hits] == pytest.approx([h.score for h in every[:3]])
    assert scores == pytest.approx(
        {(h.conversation_id, h.turn_number or 0): h.score for h in every}
    )
    assert ("c3", 1) not in scores  # another user's
    hits, scores = store.search_turns("blue red car", user_id="u", limit=5, scored=2)
    assert len(hits) == 5
    assert set(scores) == {(h.conversation_id, h.turn_number or 0) for h in every[:5]}
    hits, scores = store.search_turns("blue", user_id="u", conversation_id="c2")
    assert [h.text for h in hits] == ["a blue whale"]
    assert set(scores) == {("c2", 1)}
    assert store.search_turns("", user_id="u") == ([], {})
    assert store.search_turns("blue", user_id="u", limit=0, scored=0) == ([], {})


def test_search_turns_scores_only_turns_above_a_floor(store: SQLStore) -> None:
    """Past the hits, a turn scoring under ``floor`` times the best is left out."""
    _bicycles_and_a_whale(store)
    every = store.search("blue red car", user_id="u", kinds=("turn",), limit=100)
    share = every[len(every) // 2].score / every[0].score
    hits, scores = store.search_turns("blue red car", user_id="u", limit=2, scored=100, floor=share)
    kept = every[:2] + [h for h in every[2:] if h.score >= share * every[0].score]
    assert 2 < len(kept) < len(every)
    assert scores == pytest.approx({(h.conversation_id, h.turn_number or 0): h.score for h in kept})
    assert [h.text for h in hits] == [h.text for h in every[:2]]
    # The hits themselves are kept whatever they score.
    hits, scores = store.search_turns("blue red car", user_id="u", limit=13, scored=100, floor=1.0)
    assert [h.text for h in hits] == [h.text for h in every]
    assert len(scores) == len(every)


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        "NEAR(a b)",
        "a AND OR NOT",
        "col:value",
        "x* ^y",
        "100% _wild_ \\ escape",
        "'; DROP TABLE conversation_turns; --",
        "!(a & b) | c:*",
        "",
        "???",
        "a" * 5000,
    ],
)
def test_search_metacharacters_are_plain_text(store: SQLStore, query: str) -> None:
    store.append_turns("c", [NewTurn("user", "escape the wild value 100 percent")], user_id="u")
    before = _snapshot(store)
    hits = store.search(query, user_id="u")
    assert isinstance(hits, list)
    assert _snapshot(store) == before


def test_search_finds_words_inside_metacharacters(store: SQLStore) -> None:
    store.append_turns("c", [NewTurn("user", "the deploy key is in vault")], user_id="u")
    hits = store.search('"vault" OR (deploy*)', user_id="u", kinds=("turn",))
    assert [h.turn_number for h in hits] == [1]


def test_delete_removes_every_row_and_archive_keeps_them(store: SQLStore) -> None:
    store.append_turns("gone", [NewTurn("user", "delete me")], user_id="u")
    store.add_summary("gone", "summary", (1, 1), user_id="u")
    store.append_turns("kept", [NewTurn("user", "keep me")], user_id="u")
    store.set_status("kept", "archived", user_id="u")

    assert store.delete_conversation("gone", user_id="u")
    assert not store.delete_conversation("gone", user_id="u")
    assert store.get_conversation("gone", user_id="u") is None
    assert store.get_turns("gone", user_id="u") == []
    assert store.get_summaries("gone", user_id="u") == []
    assert store.search("delete", user_id="u") == []

    info = store.get_conversation("kept", user_id="u")
    assert info is not None
    assert info.status == "archived"
    assert [
        c.conversation_id for c in store.list_conversations(user_id="u", status="archived")
    ] == ["kept"]
    # A deleted conversation id starts again at turn 1.
    assert store.append_turns("gone", [NewTurn("user", "again")], user_id="u")[0].turn_number == 1


def test_list_conversations_most_recent_first_with_paging(store: SQLStore) -> None:
    base = datetime(2025, 1, 1, tzinfo=UTC)
    for i in range(5):
        store.append_turns(
            f"c{i}", [NewTurn("user", "hi", timestamp=base + timedelta(days=i))], user_id="u"
        )
    store.append_turns("other", [NewTurn("user", "hi")], user_id="someone-else")
    listed = store.list_conversations(user_id="u")
    assert [c.conversation_id for c in listed] == ["c4", "c3", "c2", "c1", "c0"]
    assert [
        c.conversation_id for c in store.list_conversations(user_id="u", limit=2, offset=1)
    ] == [
        "c3",
        "c2",
    ]
    assert len(store.list_conversations(user_id=None)) == 6


def test_concurrent_writers_get_contiguous_turn_numbers(store: SQLStore) -> None:
    writers, per_writer = 32, 5
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            barrier.wait()
            for i in range(per_writer):
                batch = [NewTurn("user", f"w{writer} m{i}"), NewTurn("assistant", f"r{writer} {i}")]
                store.append_turns("hot", batch)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = store.get_turns("hot", user_id="default")
    total = writers * per_writer * 2
    assert [t.turn_number for t in stored] == list(range(1, total + 1))
    # Each batch stays together: a user turn is followed by its own reply.
    for user_turn, reply in zip(stored[::2], stored[1::2], strict=True):
        assert user_turn.content.replace("w", "r", 1).replace(" m", " ") == reply.content
    info = store.get_conversation("hot", user_id="default")
    assert info is not None
    assert info.turn_count == total


def test_unmigrated_database_says_how_to_fix(sql_url: str) -> None:
    engine = create_sql_engine(sql_url)
    try:
        store = SQLStore(engine)
        with pytest.raises(SchemaNotReadyError, match="memory-chain migrate"):
            store.append_turns("c", [NewTurn("user", "hello")])
        with pytest.raises(SchemaNotReadyError, match="memory-chain migrate"):
            store.get_turns("c", user_id="default")
    finally:
        engine.dispose()


_PROCESS_WRITER = """
import sys, threading
from memory_chain.schemas import NewTurn
from memory_chain.tiers.sql import SQLStore, create_sql_engine

store = SQLStore(create_sql_engine(sys.argv[1]))
process = sys.argv[2]
barrier = threading.Barrier(8)

def write(thread):
    barrier.wait()
    for i in range(5):
        store.append_turns("shared", [NewTurn("user", f"p{process} t{thread} {i}"),
                                      NewTurn("assistant", f"reply p{process} t{thread} {i}")])

threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("done")
"""


def test_concurrent_processes_get_contiguous_turn_numbers(store: SQLStore, sql_url: str) -> None:
    """4 processes x 8 threads (32 writers, separate engines), as several API replicas would."""
    import subprocess
    import sys

    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _PROCESS_WRITER, sql_url, str(p)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(4)
    ]
    for process in processes:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err
        assert out.strip() == "done"
    stored = store.get_turns("shared", user_id="default")
    assert [t.turn_number for t in stored] == list(range(1, 4 * 8 * 5 * 2 + 1))
    for user_turn, reply in zip(stored[::2], stored[1::2], strict=True):
        assert reply.content == "reply " + user_turn.content


def test_words_in_half_of_the_rows_are_dropped_without_changing_the_ranking(
    sqlite_store: SQLStore,
) -> None:
    """FTS5's BM25 gives such words an IDF of ~0: dropping them only saves their cost."""
    for number in range(60):
        words = ["weather"]  # in every turn: dropped
        if number % 10 == 0:
            # With its neighbours' words (the context and next columns): 17 of 60 rows, kept.
            words.append("apple")
        if number in (7, 31):
            words.append("lisbon lisbon")
        sqlite_store.append_turns(
            f"c{number % 4}", [NewTurn("user", " ".join(words) + f" item{number}")], user_id="u"
        )
    now = [0.0]
    stats = TermStats(min_rows=10, ttl=60, clock=lambda: now[0])
    query = "weather lisbon apple"

    def search(term_stats: TermStats | None, text: str = query) -> list[tuple[str, int, float]]:
        with sqlite_store.engine.connect() as conn:
            hits = keyword_search(
                conn, text, user_id="u", kinds=("turn",), limit=60, term_stats=term_stats
            )
        return [(h.conversation_id, h.turn_number or 0, h.score) for h in hits]

    with sqlite_store.engine.connect() as conn:
        assert stats.informative(conn, "turn", ["weather", "lisbon", "apple"]) == [
            "lisbon",
            "apple",
        ]
    full, pruned = search(None), search(stats)
    informative = [hit for hit in full if hit[2] > 1e-3]
    assert len(full) == 60  # every turn matches "weather", at a score of ~0
    # 6 apple turns and their 11 neighbours, 2 lisbon turns and their 4 neighbours.
    assert len(pruned) == len(informative) == 23
    assert [hit[:2] for hit in pruned] == [hit[:2] for hit in informative]
    assert [hit[2] for hit in pruned] == pytest.approx([hit[2] for hit in informative], abs=1e-4)
    # A query of such words only finds what contains them, unranked, newest first.
    newest_first = [(f"c{n % 4}", n // 4 + 1, 0.0) for n in reversed(range(60))]
    assert search(stats, "weather") == newest_first

    # Counts are cached for `ttl` seconds: "apple" in most turns is dropped after that.
    sqlite_store.append_turns(
        "c9", [NewTurn("user", f"apple item{n}") for n in range(60)], user_id="u"
    )
    with sqlite_store.engine.connect() as conn:
        assert stats.informative(conn, "turn", ["apple", "lisbon"]) == ["apple", "lisbon"]
        now[0] = 61.0
        assert stats.informative(conn, "turn", ["apple", "lisbon"]) == ["lisbon"]
        assert stats.informative(conn, "turn", ["apple", "weather"]) == []


def test_a_small_index_keeps_every_word_without_counting(sqlite_store: SQLStore) -> None:
    first = [NewTurn("user", f"apple item{n}") for n in range(5)]
    sqlite_store.append_turns("c", first, user_id="u")
    now = [0.0]
    stats = TermStats(min_rows=10, ttl=60, clock=lambda: now[0])
    statements: list[str] = []
    with sqlite_store.engine.connect() as conn:
        event.listen(
            conn,
            "before_cursor_execute",
            lambda *args: args[2].startswith("SELECT") and statements.append(args[2]),
        )
        assert stats.informative(conn, "turn", ["apple", "pear"]) == ["apple", "pear"]
        assert len(statements) == 1  # the row bound (5), and the two counts
        sqlite_store.append_turns(
            "c", [NewTurn("user", f"apple item{n}") for n in range(5, 20)], user_id="u"
        )
        conn.rollback()  # end the read transaction: see the new rows
        # Under `min_rows` a minute ago: "apple", now in every row, is still kept, uncounted.
        assert stats.informative(conn, "turn", ["apple", "plum"]) == ["apple", "plum"]
        assert len(statements) == 1
        now[0] = 61.0
        assert stats.informative(conn, "turn", ["apple", "plum"]) == ["plum"]
        assert len(statements) == 2


def test_visible_conversations_by_status_cached_and_cleared(store: SQLStore) -> None:
    from memory_chain.tiers.sql.lifecycle import WITH_ARCHIVED
    from memory_chain.tiers.sql.term_stats import TTLCache

    now = [0.0]
    store.statuses = TTLCache(ttl=2.0, size=100, clock=lambda: now[0])
    for name in ("a", "b", "c"):
        store.append_turns(name, [NewTurn("user", name)], user_id="u")
    store.set_status("b", "archived", user_id="u")
    named = ["a", "b", "c", "never", "d"]
    assert store.visible_conversations("u", named) == {"a", "c"}
    assert store.visible_conversations("u", named, statuses=WITH_ARCHIVED) == {"a", "b", "c"}
    assert store.visible_conversations("someone-else", named) == set()
    # A change by this process shows at once; one by another process within the TTL.
    assert store.delete_conversation("c", user_id="u")
    assert store.visible_conversations("u", named) == {"a"}
    replica = SQLStore(store.engine)
    replica.set_status("a", "archived", user_id="u")
    assert store.visible_conversations("u", named) == {"a"}  # cached
    now[0] += 2.5
    assert store.visible_conversations("u", named) == set()
    # A conversation created since is found at once (what is missing is never cached).
    store.append_turns("d", [NewTurn("user", "d")], user_id="u")
    assert store.visible_conversations("u", named) == {"d"}


def test_common_words_come_from_the_scopes_recent_turns_on_either_database(
    store: SQLStore,
) -> None:
    from memory_chain.tiers.sql.term_stats import ScopeStats

    now = [0.0]
    store._scope_stats = ScopeStats(ttl=60.0, sample=80, clock=lambda: now[0])
    store.append_turns(
        "a", [NewTurn("user", f"Ana: note {i} on topic{i}") for i in range(60)], user_id="u"
    )
    store.append_turns("b", [NewTurn("user", f"Bo's entry {i}") for i in range(60)], user_id="u")
    store.append_turns("few", [NewTurn("user", "Cy: hi") for _ in range(10)], user_id="u")
    # One conversation: every turn counted.
    assert store.common_words("What did Ana say on topic7?", user_id="u", conversation_id="a") == {
        "ana"
    }
    assert store.common_words("Bo's entry", user_id="u", conversation_id="b") == {
        "bo",
        "s",
        "entry",
    }
    # The user's turns: only the 80 most recent (10 of "few", 60 of "b", 10 of "a").
    assert store.common_words("Ana, Bo or Cy?", user_id="u") == {"bo"}
    # Under 50 turns, shares say little: no common words.
    assert store.common_words("Cy", user_id="u", conversation_id="few") == set()
    assert store.common_words("Ana", user_id="someone-else") == set()
    # Counted again after the TTL, in the background: the query that finds the words old
    # gets them without waiting, a later one the new count.
    store.append_turns("c", [NewTurn("user", f"Cy: line {i}") for i in range(80)], user_id="u")
    assert store.common_words("Ana, Bo or Cy?", user_id="u") == {"bo"}
    now[0] = 61.0
    assert store.common_words("Ana, Bo or Cy?", user_id="u") == {"bo"}  # not waiting
    deadline = time.monotonic() + 10
    while store.common_words("Ana, Bo or Cy?", user_id="u") != {"cy"}:
        assert time.monotonic() < deadline, "the common words were never counted again"
        time.sleep(0.01)
