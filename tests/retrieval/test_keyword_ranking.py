"""Keyword ranking is BM25 over a turn and its neighbours' words, on SQLite and on PostgreSQL.

Every test runs on both databases (the ``store`` fixture) and expects the same order: FTS5's
``bm25()`` on SQLite and the SQL BM25 over ``conversation_turns_fts`` on PostgreSQL
(migration 0012) rank alike.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, event, text

from memory_chain.schemas import NewTurn
from memory_chain.tiers.sql import SQLStore, upgrade
from memory_chain.tiers.sql.migrate import downgrade
from memory_chain.tiers.sql.pg_terms import bm25_idf
from memory_chain.tiers.sql.search import keyword_search
from memory_chain.tiers.sql.term_stats import TermStats
from tests.retrieval.trip import TRIP


def _order(store: SQLStore, query: str, **scope: str) -> list[int]:
    hits = store.search(query, user_id="u", kinds=("turn",), limit=50, **scope)
    return [hit.turn_number or 0 for hit in hits]


def _others(store: SQLStore, turns: int = 40) -> None:
    """Another user's turns, sharing no word with the tests': BM25 counts rows in the whole
    index (as FTS5 does), so these keep the tests' words rare enough to rank."""
    store.append_turns(
        "other", [NewTurn("user", f"unrelated{n} chatter{n}") for n in range(turns)], user_id="v"
    )


def test_rare_words_and_repeated_words_rank_first(store: SQLStore) -> None:
    _others(store)
    texts = [
        "the violin lesson moved to thursday",  # 1: violin (rare) and lesson
        "filler about gardening",
        "filler about cooking",
        "lesson notes, lesson plans, lesson times",  # 4: lesson thrice
        "filler about travel",
        "filler about music",
        "a lesson",  # 7: lesson once
        "filler about weather",
        "filler about sport",
    ]
    store.append_turns("c", [NewTurn("user", t) for t in texts], user_id="u")
    store.append_turns("d", [NewTurn("user", f"another lesson {n}") for n in range(6)], user_id="u")
    # "violin" is in 2 rows (turn 1 and, as its previous turn's word, turn 2), "lesson" in
    # many more: the rare word decides.
    assert _order(store, "violin lesson", conversation_id="c")[:2] == [1, 2]
    order = _order(store, "lesson", conversation_id="c")
    assert order[0] == 4  # three times in its own words
    # Its own words count twice as much as the previous turn's, four times the next turn's.
    assert order.index(7) < order.index(8) < order.index(6)
    assert set(order) == {1, 2, 3, 4, 5, 6, 7, 8}


def test_a_turn_is_found_by_its_neighbours_words_below_its_own(store: SQLStore) -> None:
    _others(store)
    store.append_turns(
        "c",
        [
            NewTurn("user", "What are your plans for the summer?"),  # 1: the question
            NewTurn("assistant", "Researching adoption agencies."),  # 2: the answer
            NewTurn("user", "That sounds exciting."),  # 3
            NewTurn("assistant", "Something unrelated entirely."),  # 4
            NewTurn("user", "My summer was quiet."),  # 5: says summer itself
            NewTurn("assistant", "Filler words here."),  # 6
        ],
        user_id="u",
    )
    # Both words in its own text, then both in the previous turn's (the answer is found by
    # its question), one in its own, one in the previous turn's, one in the next turn's.
    assert _order(store, "summer plans", conversation_id="c") == [1, 2, 5, 6, 4]
    # "adoption" is in turn 2; turn 3 (after it) and turn 1 (before it) follow.
    assert _order(store, "adoption", conversation_id="c") == [2, 3, 1]


def test_scores_are_bm25(store: SQLStore) -> None:
    """A word once in a turn's own text scores BM25 of a term frequency of 2 (its weight)."""
    _others(store)
    texts = ["kayak", "x1 y1", "x2 y2", "x3 y3", "x4 y4", "kayak", "x5 y5"]
    store.append_turns("c", [NewTurn("user", t) for t in texts], user_id="u")
    hits = store.search("kayak", user_id="u", kinds=("turn",))
    # Turn 1 has no previous turn: its document is the shortest. Then the previous turn's
    # word (7 is shorter than 2, which has a next turn too), then the next turn's (5).
    assert [h.turn_number for h in hits] == [1, 6, 7, 2, 5]
    # Five of 47 rows hold "kayak" (two in their own words, three in a neighbour's). With a
    # document of average length, BM25 is idf * f * 2.2 / (f + 1.2) for f = 2: 1.375 idf;
    # these documents are a little shorter than the average.
    idf = bm25_idf(47, 5)
    assert all(1.3 < hit.score / idf < 1.7 for hit in hits[:2]), [h.score / idf for h in hits]


def test_editing_a_turn_reindexes_it_and_its_neighbours(store: SQLStore) -> None:
    store.append_turns(
        "c",
        [NewTurn("user", t) for t in ["first words", "middle words", "last words"]],
        user_id="u",
    )
    assert _order(store, "zeppelin") == []
    with store.engine.begin() as conn:
        conn.execute(
            text("UPDATE conversation_turns SET content = 'a zeppelin' WHERE turn_number = 2")
        )
    assert _order(store, "zeppelin")[0] == 2
    assert set(_order(store, "zeppelin")) == {1, 2, 3}
    assert _order(store, "middle") == []


def test_a_query_of_common_words_finds_their_rows_newest_first(store: SQLStore) -> None:
    store.append_turns("c", [NewTurn("user", f"weather item{n}") for n in range(20)], user_id="u")
    stats = TermStats(min_rows=10)
    with store.engine.connect() as conn:
        hits = keyword_search(
            conn, "weather", user_id="u", kinds=("turn",), limit=5, term_stats=stats
        )
        ranked = keyword_search(
            conn, "weather item3", user_id="u", kinds=("turn",), limit=5, term_stats=stats
        )
    assert [(h.turn_number, h.score) for h in hits] == [(n, 0.0) for n in (20, 19, 18, 17, 16)]
    assert ranked[0].turn_number == 4  # "item3" ranks; "weather" (in every row) is dropped


def test_the_migration_indexes_turns_stored_before_it(postgres_engine: Engine) -> None:
    """On PostgreSQL, turns stored before migration 0012 are indexed with their neighbours."""
    downgrade(postgres_engine, "0011")
    store = SQLStore(postgres_engine)
    store.append_turns(
        "c",
        [NewTurn("user", "Any plans for the summer?"), NewTurn("user", "Adoption agencies.")],
        user_id="u",
    )
    upgrade(postgres_engine)
    assert _order(store, "summer") == [1, 2]  # turn 2 by its previous turn's words
    assert _order(store, "adoption") == [2, 1]  # turn 1 by the next turn's
    downgrade(postgres_engine, "0011")  # and back: the old expression index again
    with postgres_engine.connect() as conn:
        indexes = conn.execute(
            text("SELECT indexname FROM pg_indexes WHERE tablename = 'conversation_turns'")
        ).scalars()
        assert "conversation_turns_fts" in set(indexes)


def test_sqlite_and_postgresql_rank_a_conversation_alike(
    sqlite_store: SQLStore, postgres_engine: Engine
) -> None:
    """The same turns and queries: the same hits in the same order on both databases."""
    texts = [
        *TRIP,
        "Eva loves the cat; she adopted him from a shelter in 2021.",
        "The shelter is near the airport, by the way.",
    ]
    queries = ["Who feeds the cat?", "airport taxi", "what to pack", "Lisbon flight", "shelter"]
    found: dict[str, list[list[int]]] = {}
    for name, store in {"sqlite": sqlite_store, "postgresql": SQLStore(postgres_engine)}.items():
        _others(store)
        store.append_turns("c", [NewTurn("user", t) for t in texts], user_id="u")
        found[name] = [_order(store, query) for query in queries]
    assert found["postgresql"] == found["sqlite"]
    # "shelter": turn 8 has it in its own words and in the previous turn's.
    assert [order[0] for order in found["sqlite"]] == [5, 2, 3, 1, 8]


def test_large_indexes_estimate_common_words_from_the_planners_statistics(
    postgres_engine: Engine,
) -> None:
    """Past ``exact_rows`` (PostgreSQL), the totals and the most common words' counts come
    from ANALYZE's statistics instead of reading the table; rarer words are still counted."""
    store = SQLStore(postgres_engine)
    texts = [f"weather report {n}" if n % 10 else f"rain item{n}" for n in range(300)]
    store.append_turns("c", [NewTurn("user", t) for t in texts], user_id="u")
    with postgres_engine.begin() as conn:
        conn.execute(text("ANALYZE conversation_turns_fts"))
    words = ["weather", "rain", "item30", "zebra"]
    with postgres_engine.connect() as conn:
        exact = TermStats(min_rows=10, exact_rows=1_000_000).bm25(conn, words)
        statements: list[str] = []
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        estimated = TermStats(min_rows=10, exact_rows=100).bm25(conn, words)
    assert "most_common_elems" in statements[1]  # after the planner's row estimate
    assert estimated.words == exact.words == ["rain", "item30", "zebra"]  # "weather": every row
    assert list(estimated.lexemes) == list(exact.lexemes) == ["rain", "item30", "zebra"]
    assert list(estimated.lexemes.values()) == pytest.approx(list(exact.lexemes.values()), abs=0.05)
    assert estimated.average_length == pytest.approx(exact.average_length, rel=0.05)


def test_idf_takes_a_stale_row_count_as_at_least_the_words_count() -> None:
    """The row count is cached and another replica may have added turns since: a word's
    fresh count above it once made the logarithm's argument negative (a 500 in the chat)."""
    assert bm25_idf(3, 10) == pytest.approx(1e-6)
    assert bm25_idf(1000, 10) > bm25_idf(1000, 100) > 1e-6
