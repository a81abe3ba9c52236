"""Time expressions in queries as windows of turn timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_chain.retrieval.timeframes import (
    asks_when,
    mentioned_windows,
    mentions_time,
    resolved_mentions,
    time_windows,
)

NOW = datetime(2024, 3, 13, 15, 30, tzinfo=UTC)  # a Wednesday


def _spans(query: str, now: datetime | None = NOW) -> list[tuple[str, str]]:
    return [
        (w.start.date().isoformat(), w.end.date().isoformat())
        for w in time_windows(query, now=now)
        if w.month is None
    ]


@pytest.mark.parametrize(
    ("query", "span"),
    [
        ("What did we decide on 9 November, 2022?", ("2022-11-09", "2022-11-10")),
        ("the 9th of Nov 2022 meeting", ("2022-11-09", "2022-11-10")),
        ("What happened on November 9, 2022?", ("2022-11-09", "2022-11-10")),
        ("notes from 2022-11-09", ("2022-11-09", "2022-11-10")),
        ("What did Maria donate in December 2023?", ("2023-12-01", "2024-01-01")),
        ("How often did we talk about it in 2023?", ("2023-01-01", "2024-01-01")),
        ("What did I cook yesterday?", ("2024-03-12", "2024-03-13")),
        ("anything today?", ("2024-03-13", "2024-03-14")),
        ("What did I say last week?", ("2024-03-04", "2024-03-11")),
        ("plans this month", ("2024-03-01", "2024-04-01")),
        ("the trip last month", ("2024-02-01", "2024-03-01")),
        ("what we did last year", ("2023-01-01", "2024-01-01")),
        ("three days ago", ("2024-03-10", "2024-03-11")),
        ("2 weeks ago", ("2024-02-26", "2024-03-04")),
        ("a month ago", ("2024-02-01", "2024-03-01")),
        ("December, two months ago", ("2024-01-01", "2024-02-01")),
    ],
)
def test_expressions_become_windows(query: str, span: tuple[str, str]) -> None:
    assert _spans(query) == [span]


def test_a_month_without_a_year_matches_that_month_of_any_year() -> None:
    (window,) = time_windows("When did Melanie go camping in June?", now=NOW)
    assert window.month == 6
    assert window.bounds() is None
    assert window.contains(datetime(2019, 6, 30, tzinfo=UTC))
    assert not window.contains(datetime(2019, 7, 2, tzinfo=UTC))
    # With slack, the first days of the next month still count.
    assert window.contains(datetime(2019, 7, 2, tzinfo=UTC), after=timedelta(days=7))


def test_slack_extends_the_end_only() -> None:
    (window,) = time_windows("on 3 May 2023", now=NOW)
    slack = timedelta(days=7)
    assert window.contains(datetime(2023, 5, 9, tzinfo=UTC), after=slack)
    assert not window.contains(datetime(2023, 5, 2, tzinfo=UTC), after=slack)
    assert window.bounds(after=slack) == (
        datetime(2023, 5, 3, tzinfo=UTC),
        datetime(2023, 5, 11, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    "query",
    [
        "May I ask what we said about the budget?",
        "the 31 February 2023 deadline",  # no such day
        "room 2023 on floor 3",
        "what did you recommend?",
        "",
    ],
)
def test_no_window_where_there_is_no_date(query: str) -> None:
    assert time_windows(query, now=NOW) == []


def test_relative_expressions_need_a_reference_time() -> None:
    assert time_windows("last week and 3 May 2023", now=None)[0].start.year == 2023
    assert len(time_windows("last week and 3 May 2023", now=None)) == 1


def test_overlapping_expressions_count_once() -> None:
    # "May 2023" inside "3 May 2023" is not a second window.
    assert len(time_windows("on 3 May 2023, and in 2024", now=NOW)) == 2


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did we move the launch?", True),
        ("  when is Maria's birthday", True),
        ("What year did you start painting?", True),
        ("On what date was the contract signed?", True),
        ("How long ago did you adopt the dog?", True),
        ("What did you say when we met?", False),  # "when" not asking for a time
        ("Whenever I cook, what do I forget?", False),
        ("What is my favourite colour?", False),
    ],
)
def test_questions_that_ask_when(query: str, expected: bool) -> None:
    assert asks_when(query) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We went hiking last weekend.", True),
        ("I adopted her two years ago", True),
        ("Back in 2019 I lived in Lisbon.", True),
        ("The recital is on Friday", True),
        ("I started in March", True),
        ("See you on May 12!", True),
        ("It was a great summer.", False),  # a season alone says no when
        ("May I bring a friend?", False),
        ("Let's march on with the plan.", False),
        ("Room 12 has 300 seats.", False),
    ],
)
def test_texts_that_say_when(text: str, expected: bool) -> None:
    assert mentions_time(text) is expected


@pytest.mark.parametrize(
    ("query", "span"),
    [
        ("What did I do last Friday?", ("2024-03-08", "2024-03-09")),
        ("the call on Monday", ("2024-03-11", "2024-03-12")),
        ("What is on next Monday?", ("2024-03-18", "2024-03-19")),
        ("and this Sunday", ("2024-03-17", "2024-03-18")),
        ("what we did last weekend", ("2024-03-09", "2024-03-11")),
        ("plans for this weekend", ("2024-03-16", "2024-03-18")),
        ("where I went last night", ("2024-03-12", "2024-03-13")),
        ("the dinner tomorrow", ("2024-03-14", "2024-03-15")),
        ("the trip next month", ("2024-04-01", "2024-05-01")),
        ("two weeks back", ("2024-02-26", "2024-03-04")),
        # Not exact: a unit either side, 2 to 4 days back.
        ("a few days ago", ("2024-03-09", "2024-03-12")),
        ("a couple of months ago", ("2023-12-01", "2024-03-01")),
    ],
)
def test_more_relative_expressions(query: str, span: tuple[str, str]) -> None:
    assert _spans(query) == [span]


def test_a_turn_tells_when_counted_from_when_it_was_said() -> None:
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday
    (told,) = mentioned_windows("I went to a LGBTQ support group yesterday.", said)
    assert (told.start.date().isoformat(), told.end.date().isoformat()) == (
        "2023-05-07",
        "2023-05-08",
    )
    # A month without a year is the one nearest to when it was said.
    (december,) = mentioned_windows("We married in December.", datetime(2023, 1, 20, tzinfo=UTC))
    assert december.start == datetime(2022, 12, 1, tzinfo=UTC)
    assert december.month is None
    assert mentioned_windows("I love painting sunsets.", said) == []


def test_a_window_overlaps_a_span() -> None:
    (day,) = time_windows("on 7 May 2023", now=NOW)
    week = (datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))
    assert day.overlaps(*week)
    assert not day.overlaps(datetime(2023, 5, 8, tzinfo=UTC), datetime(2023, 5, 9, tzinfo=UTC))
    (june,) = time_windows("in June", now=NOW)
    assert june.overlaps(datetime(2021, 5, 20, tzinfo=UTC), datetime(2021, 6, 2, tzinfo=UTC))
    assert not june.overlaps(datetime(2021, 7, 1, tzinfo=UTC), datetime(2022, 5, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How long has Sam been learning piano?", True),
        ("Which month did we go to Italy?", True),
        ("In which year did she graduate?", True),
        ("How many weeks passed between the two adoptions?", True),
        ("At what age did you start skiing?", True),
        ("Which book did you like most?", False),
        ("How many dogs do you have?", False),
    ],
)
def test_more_questions_that_ask_when(query: str, expected: bool) -> None:
    assert asks_when(query) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I've been painting for seven years now.", True),
        ("Saw her the other day at the market.", True),
        ("We met a couple of weeks back.", True),
        ("When I was a kid I loved trains.", True),
        ("I started at age 12.", True),
        ("Over the weekend we fixed the roof.", True),
        ("During the week I work late.", False),  # every week
        ("It takes two days to dry.", False),
    ],
)
def test_more_texts_that_say_when(text: str, expected: bool) -> None:
    assert mentions_time(text) is expected


#: A Wednesday afternoon.
SAID = datetime(2023, 5, 10, 14, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I had the interview yesterday.", [("yesterday", "2023-05-09")]),
        ("We start next week", [("next week", "the week of 2023-05-15")]),
        ("Went there last month", [("last month", "April 2023")]),
        ("two weeks ago I met her", [("two weeks ago", "the week of 2023-04-24")]),
        ("last Friday", [("last Friday", "2023-05-05")]),
        ("a few days ago", [("a few days ago", "2023-05-06 to 2023-05-08")]),
        ("this weekend we hike", [("this weekend", "the weekend of 2023-05-13")]),
        ("last year I moved", [("last year", "2022")]),
        ("tomorrow!", [("tomorrow", "2023-05-11")]),
    ],
)
def test_a_turn_s_relative_times_are_resolved_from_when_it_was_said(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert resolved_mentions(text, SAID) == expected


@pytest.mark.parametrize(
    "text",
    [
        "On 3 May 2023 I went",  # a date already
        "today is great",  # the day it was said: the line's own date
        "on Monday I go",  # last Monday or the next one? unclear
        "over the weekend",  # the same
        "In June we fly",  # last June or the next?
        "I like apples",
    ],
)
def test_what_needs_no_resolving_or_is_unclear_is_left_out(text: str) -> None:
    assert resolved_mentions(text, SAID) == []


def test_resolved_times_come_in_the_text_s_order_at_most_limit() -> None:
    text = "Yesterday I ran, last week I swam, two days ago I rested, next month I race."
    assert [said for said, _ in resolved_mentions(text, SAID)] == [
        "Yesterday",
        "last week",
        "two days ago",
    ]
    assert len(resolved_mentions(text, SAID, limit=4)) == 4
    # A naive time counts as UTC.
    assert resolved_mentions("yesterday", SAID.replace(tzinfo=None)) == [
        ("yesterday", "2023-05-09")
    ]
