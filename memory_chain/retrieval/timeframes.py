"""Time expressions in a query ("on 3 May 2023", "in June", "last week") as time windows.

People ask memory about time: "what did we decide on 9 November 2022?", "what did I say about
the trip last month?". Retrieval turns each expression it recognizes into a window of turn
timestamps and prefers turns inside one (a soft boost, never a filter: a date in a question
may be the date of an event talked about later).

Recognized, case-insensitive, English:

- a day: ``9 November 2022``, ``9th of Nov, 2022``, ``November 9, 2022``, ``2022-11-09``;
- a month: ``November 2022``, and a month alone after *in*, *during*, *early*, *mid*,
  *late* or *since* (``in June``: June of any year);
- a year after *in*, *during*, *since* or *of* (``in 2023``);
- relative to ``now``: ``today``, ``yesterday``, ``this``/``last`` ``week``/``month``/``year``,
  ``N days|weeks|months|years ago`` (numbers as digits or one to twelve in words).

A window ends ``after`` later than the expression's own end: what happened on a day is often
mentioned in the days that follow it.

A question that asks *when* ("When did we...?", "What year...?") names no window: its answer
is a turn that says when something happened ("last Friday", "two weeks ago", "in 2019").
:func:`asks_when` and :func:`mentions_time` recognize both, for fusion's ``when`` bonus.

Example:
    >>> from datetime import datetime, UTC
    >>> [w.start.date().isoformat() for w in time_windows("Lunch on 3 May 2023?", now=None)]
    ['2023-05-03']
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
MONTHS: dict[str, int] = {name: number for number, name in enumerate(_MONTH_NAMES, start=1)}
MONTHS.update({name[:3]: number for name, number in list(MONTHS.items())})
MONTHS["sept"] = 9
_MONTH = r"(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d{2})"
_NUMBER_WORDS = {
    word: number
    for number, word in enumerate(
        [
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ],
        start=1,
    )
}
_COUNT = r"(\d{1,3}|a|an|" + "|".join(_NUMBER_WORDS) + r")"
_UNIT = r"(day|week|month|year)s?"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iso", re.compile(rf"\b{_YEAR}-(\d{{2}})-(\d{{2}})\b")),
    ("day-month-year", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("month-day-year", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I)),
    ("month-year", re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("year", re.compile(rf"\b(?:in|during|since|of)\s+{_YEAR}\b", re.I)),
    ("month", re.compile(rf"\b(?:in|during|since|early|mid|late)\s+{_MONTH}(?!\w)", re.I)),
    ("ago", re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)),
    ("this-last", re.compile(r"\b(this|last|past)\s+(week|month|year)\b", re.I)),
    ("day-word", re.compile(r"\b(today|yesterday)\b", re.I)),
)
_DAY_SPAN = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """Turn timestamps a query refers to.

    Attributes:
        start: First instant (UTC), inclusive; unused when ``month`` is set.
        end: Last instant (UTC), exclusive, before the slack is added.
        month: A month of any year (``"in June"``), 1-12, instead of ``start``/``end``.
        text: The words of the query it was read from.
    """

    start: datetime
    end: datetime
    month: int | None = None
    text: str = ""

    def contains(self, moment: datetime, *, after: timedelta = timedelta(0)) -> bool:
        """Whether ``moment`` (aware) falls in the window, its end extended by ``after``."""
        if self.month is not None:
            # The month itself or, with slack, the first days of the next one.
            shifted = moment - after
            return self.month in (moment.month, shifted.month)
        return self.start <= moment < self.end + after

    def bounds(self, *, after: timedelta = timedelta(0)) -> tuple[datetime, datetime] | None:
        """``(since, until)`` for a timestamp filter, or ``None`` for a month of any year."""
        if self.month is not None:
            return None
        return self.start, self.end + after


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _count(word: str) -> int:
    lowered = word.lower()
    if lowered in {"a", "an"}:
        return 1
    return _NUMBER_WORDS.get(lowered) or int(lowered)


def _shift_months(moment: datetime, months: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 - months
    return moment.replace(year=index // 12, month=index % 12 + 1, day=1)


def _year_span(year: int) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _units_ago(count: int, unit: str, today: datetime) -> tuple[datetime, datetime]:
    """The day, week (Monday to Sunday), month or year ``count`` units before ``today``."""
    if unit == "day":
        start = today - count * _DAY_SPAN
        return start, start + _DAY_SPAN
    if unit == "week":
        start = today - timedelta(weeks=count, days=today.weekday())
        return start, start + timedelta(weeks=1)
    if unit == "month":
        shifted = _shift_months(today, count)
        return _month_span(shifted.year, shifted.month)
    return _year_span(today.year - count)


_PAST = {"week": timedelta(weeks=1), "month": timedelta(days=31), "year": timedelta(days=366)}


def _relative(kind: str, groups: tuple[str, ...], now: datetime) -> tuple[datetime, datetime]:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "day-word":
        return _units_ago(0 if groups[0].lower() == "today" else 1, "day", today)
    if kind == "ago":
        return _units_ago(_count(groups[0]), groups[1].lower(), today)
    which, unit = groups[0].lower(), groups[1].lower()
    if which == "past":
        # "the past week/month/year": the span up to now.
        return now - _PAST[unit], now + _DAY_SPAN
    return _units_ago(0 if which == "this" else 1, unit, today)


def _absolute(kind: str, groups: tuple[str, ...]) -> tuple[datetime, datetime] | int:
    """A window, or a month number for a month of any year."""
    if kind == "iso":
        start = datetime(int(groups[0]), int(groups[1]), int(groups[2]), tzinfo=UTC)
        return start, start + _DAY_SPAN
    if kind == "day-month-year":
        start = datetime(int(groups[2]), MONTHS[groups[1].lower()], int(groups[0]), tzinfo=UTC)
        return start, start + _DAY_SPAN
    if kind == "month-day-year":
        start = datetime(int(groups[2]), MONTHS[groups[0].lower()], int(groups[1]), tzinfo=UTC)
        return start, start + _DAY_SPAN
    if kind == "month-year":
        return _month_span(int(groups[1]), MONTHS[groups[0].lower()])
    if kind == "year":
        return _year_span(int(groups[0]))
    return MONTHS[groups[0].lower()]


def _matches(query: str) -> Iterator[tuple[str, re.Match[str]]]:
    """Matches of every pattern, most specific first, none overlapping an earlier one."""
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(query):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            taken.append((match.start(), match.end()))
            yield kind, match


def time_windows(query: str, *, now: datetime | None) -> list[TimeWindow]:
    """The time windows a query's expressions name, in the order they were recognized.

    Args:
        query: The question.
        now: The moment relative expressions count from (aware); ``None`` ignores them.

    Returns:
        One window per recognized expression (impossible dates such as 31 February are
        skipped).
    """
    windows: list[TimeWindow] = []
    for kind, match in _matches(query):
        groups = match.groups()
        try:
            if kind in {"ago", "this-last", "day-word"}:
                if now is None:
                    continue
                start, end = _relative(kind, groups, now.astimezone(UTC))
                windows.append(TimeWindow(start, end, text=match.group(0)))
                continue
            found = _absolute(kind, groups)
        except ValueError:
            continue
        if isinstance(found, int):
            epoch = datetime(1970, 1, 1, tzinfo=UTC)
            windows.append(TimeWindow(epoch, epoch, month=found, text=match.group(0)))
        else:
            windows.append(TimeWindow(found[0], found[1], text=match.group(0)))
    return windows


_WHEN_QUESTION = re.compile(
    r"^\W*(?:when|how long ago|(?:on |in )?what (?:date|day|time|year|month|week))\b", re.I
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_SEASON = r"(?:summer|winter|spring|fall|autumn)"
#: Months whose names are also common words ("may", "march") count only next to a number or
#: after *in*, *on*, *since* or *of*.
_WORD_MONTHS = ("may", "march")
_PLAIN_MONTH = "(?:" + "|".join(m for m in _MONTH_NAMES if m not in _WORD_MONTHS) + ")"
_WORD_MONTH = "(?:" + "|".join(_WORD_MONTHS) + ")"
_TIME_MENTION = re.compile(  # matched against lower-cased text
    rf"\b(?:yesterday|today|tonight|tomorrow|recently|ago"
    rf"|(?:last|this|next) (?:week|weekend|month|year|night|{_SEASON}|{_WEEKDAY})"
    rf"|{_WEEKDAY}|{_PLAIN_MONTH}|(?:in|on|since|of) {_WORD_MONTH}|{_WORD_MONTH} \d{{1,2}}"
    rf"|{_YEAR})\b"
)


def asks_when(query: str) -> bool:
    """Whether ``query`` asks for a time ("When did...?", "What year...?")."""
    return _WHEN_QUESTION.search(query) is not None


def mentions_time(text: str) -> bool:
    """Whether ``text`` says when something happened (a day, a weekday, "two weeks ago"...)."""
    # Lower-cased once: a case-insensitive search of the same pattern is 2-3x slower, and this
    # runs on every candidate of a question that asks when.
    return _TIME_MENTION.search(text.lower()) is not None
