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
- relative to ``now``: ``today``, ``yesterday``, ``tonight``, ``tomorrow``, ``last night``,
  ``this``/``last``/``next`` ``week``/``month``/``year``, a weekday (``last Friday``, ``on
  Monday``: the latest one before ``now``; ``next Friday``: the first one after), the
  ``weekend``, ``N days|weeks|months|years ago`` (or ``back``; numbers as digits or one to
  twelve in words; "a few", "a couple of", "several" reach a unit further either side).

The same expressions in a *turn* say when what it tells happened, counted from when the turn
was said (:func:`mentioned_windows`): "I went to the support group yesterday", said on
8 May 2023, is about 7 May 2023, and a query about 7 May finds it whichever day it was said.

A window ends ``after`` later than the expression's own end: what happened on a day is often
mentioned in the days that follow it.

:func:`resolved_mentions` gives the dates a turn's relative expressions name, for the prompt's
memory lines ("yesterday" said on 8 May 2023: 2023-05-07).

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
#: Counts that are not exact ("a few days ago"): how many, and how far either side they reach.
_ABOUT = {"a couple of": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3}
_COUNT = (
    r"(\d{1,3}|"
    + "|".join(sorted(_ABOUT, key=len, reverse=True))
    + r"|a|an|"
    + "|".join(_NUMBER_WORDS)
    + r")"
)
_UNIT = r"(day|week|month|year)s?"
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iso", re.compile(rf"\b{_YEAR}-(\d{{2}})-(\d{{2}})\b")),
    ("day-month-year", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("month-day-year", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I)),
    ("month-year", re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("year", re.compile(rf"\b(?:in|during|since|of)\s+{_YEAR}\b", re.I)),
    ("month", re.compile(rf"\b(?:in|during|since|early|mid|late)\s+{_MONTH}(?!\w)", re.I)),
    ("ago", re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+(?:ago|back)\b", re.I)),
    ("weekend", re.compile(r"\b(?:(this|last|past|next|the)\s+)?weekend\b", re.I)),
    ("this-last", re.compile(r"\b(this|last|past|next)\s+(week|month|year)\b", re.I)),
    ("weekday", re.compile(rf"\b(?:(last|this|next|on)\s+)?({'|'.join(_WEEKDAYS)})\b", re.I)),
    ("day-word", re.compile(r"\b(today|yesterday|tonight|tomorrow|last night)\b", re.I)),
)
_RELATIVE = {"ago", "weekend", "this-last", "weekday", "day-word"}
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

    def overlaps(self, start: datetime, end: datetime) -> bool:
        """Whether the span ``[start, end)`` (aware) shares an instant with the window."""
        if self.month is not None:
            moment = start
            while moment < end:  # a month at a time: at most 13 steps for a year's span
                if moment.month == self.month:
                    return True
                moment = _month_span(moment.year, moment.month)[1]
            return False
        return start < self.end and self.start < end

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


_DAYS_BACK = {"today": 0, "tonight": 0, "yesterday": 1, "last night": 1, "tomorrow": -1}


def _weekday(which: str, name: str, today: datetime) -> tuple[datetime, datetime]:
    """The day called ``name``: the latest before ``today``, or with *next* the first after."""
    target = _WEEKDAYS.index(name)
    if which == "next":
        ahead = (target - today.weekday()) % 7 or 7
        start = today + ahead * _DAY_SPAN
    elif which == "this":  # the one of this week, Monday to Sunday
        start = today + (target - today.weekday()) * _DAY_SPAN
    else:
        back = (today.weekday() - target) % 7 or 7
        start = today - back * _DAY_SPAN
    return start, start + _DAY_SPAN


def _weekend(which: str, today: datetime) -> tuple[datetime, datetime]:
    """Saturday and Sunday: the coming (or current) ones for *this*/*next*, else the last."""
    saturday = today + (5 - today.weekday()) * _DAY_SPAN  # this week's
    if which == "next" and today.weekday() >= 5:
        saturday += timedelta(weeks=1)
    elif which not in {"this", "next"} and today.weekday() < 5:
        saturday -= timedelta(weeks=1)
    return saturday, saturday + 2 * _DAY_SPAN


def _ago(count: str, unit: str, today: datetime) -> tuple[datetime, datetime]:
    if count in _ABOUT:  # "a few weeks ago": from a unit before to a unit after
        start, _ = _units_ago(_ABOUT[count] + 1, unit, today)
        _, end = _units_ago(_ABOUT[count] - 1, unit, today)
        return start, end
    return _units_ago(_count(count), unit, today)


def _relative(kind: str, groups: tuple[str, ...], now: datetime) -> tuple[datetime, datetime]:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "day-word":
        return _units_ago(_DAYS_BACK[" ".join(groups[0].lower().split())], "day", today)
    if kind == "weekday":
        return _weekday((groups[0] or "").lower(), groups[1].lower(), today)
    if kind == "weekend":
        return _weekend((groups[0] or "").lower(), today)
    if kind == "ago":
        return _ago(" ".join(groups[0].lower().split()), groups[1].lower(), today)
    which, unit = groups[0].lower(), groups[1].lower()
    if which == "past":
        # "the past week/month/year": the span up to now.
        return now - _PAST[unit], now + _DAY_SPAN
    return _units_ago({"this": 0, "last": 1, "next": -1}[which], unit, today)


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
            if kind in _RELATIVE:
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


def mentioned_windows(text: str, said_at: datetime) -> list[TimeWindow]:
    """When what a turn tells happened, by the time expressions in it.

    Relative expressions count from ``said_at``; a month without a year is that month
    nearest to ``said_at`` ("in December" said in January is last December).

    Args:
        text: The turn's text.
        said_at: When the turn was said (aware).

    Returns:
        One window per expression; none for a text that names no time.
    """
    if not mentions_time(text):
        return []
    windows: list[TimeWindow] = []
    moment = said_at.astimezone(UTC)
    for found in time_windows(text, now=said_at):
        if found.month is None:
            windows.append(found)
            continue
        spans = [_month_span(year, found.month) for year in range(moment.year - 1, moment.year + 2)]
        start, end = min(spans, key=lambda span: abs(span[0] - moment))
        windows.append(TimeWindow(start, end, text=found.text))
    return windows


def _named(start: datetime, end: datetime) -> str:
    """A window in words a reader takes at a glance: a day, a weekend, a week, a month..."""
    days = end - start
    if days == _DAY_SPAN:
        return start.date().isoformat()
    if days == 2 * _DAY_SPAN and start.weekday() == 5:
        return f"the weekend of {start.date().isoformat()}"
    if days == timedelta(weeks=1) and start.weekday() == 0:
        return f"the week of {start.date().isoformat()}"
    if start.day == 1 and (start, end) == _month_span(start.year, start.month):
        return start.strftime("%B %Y")
    if (start, end) == _year_span(start.year):
        return str(start.year)
    return f"{start.date().isoformat()} to {(end - _DAY_SPAN).date().isoformat()}"


def resolved_mentions(text: str, said_at: datetime, *, limit: int = 3) -> list[tuple[str, str]]:
    """The relative time expressions of a turn, each with the dates it names.

    "I had the interview yesterday", said on 10 May 2023, gives ``[("yesterday",
    "2023-05-09")]``: a reader (a small model above all) that sees only the turn and its date
    often repeats "yesterday" when asked when. Expressions that name a date already, that
    name the day the turn was said ("today") or whose direction is unclear (a weekday or a
    weekend without *last*, *this* or *next*, a month without a year: "in June" may be the
    last one or the next) are left out.

    Args:
        text: The turn's text.
        said_at: When it was said (a naive time counts as UTC).
        limit: At most this many, the first in the text.

    Returns:
        ``(expression as written, what it names)`` pairs, in the order of the text.
    """
    if not mentions_time(text):
        return []
    moment = (said_at if said_at.tzinfo else said_at.replace(tzinfo=UTC)).astimezone(UTC)
    found: list[tuple[int, str, str]] = []
    for kind, match in _matches(text):
        groups = match.groups()
        if kind not in _RELATIVE:
            continue
        if kind in {"weekday", "weekend"} and (groups[0] or "").lower() in {"", "on", "the"}:
            continue
        try:
            start, end = _relative(kind, groups, moment)
        except (KeyError, ValueError):
            continue
        named = _named(start, end)
        if named != moment.date().isoformat():
            found.append((match.start(), match.group(0), named))
    return [(said, named) for _, said, named in sorted(found)[:limit]]


_WHEN_QUESTION = re.compile(
    r"^\W*(?:when|since when|how long|how old|at what age"
    r"|how (?:many|much) (?:days|weeks|months|years|time)"
    r"|(?:on |in |during |by |until )?(?:what|which)"
    r" (?:date|day|time|year|month|week|weekend|season|period|decade))\b",
    re.I,
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_SEASON = r"(?:summer|winter|spring|fall|autumn)"
#: Months whose names are also common words ("may", "march") count only next to a number or
#: after *in*, *on*, *since* or *of*.
_WORD_MONTHS = ("may", "march")
_PLAIN_MONTH = "(?:" + "|".join(m for m in _MONTH_NAMES if m not in _WORD_MONTHS) + ")"
_WORD_MONTH = "(?:" + "|".join(_WORD_MONTHS) + ")"
_AMOUNT = r"(?:\d{1,3}|a|an|a few|a couple of|several|many|" + "|".join(_NUMBER_WORDS) + ")"
_TIME_MENTION = re.compile(  # matched against lower-cased text
    rf"\b(?:yesterday|today|tonight|tomorrow|recently|lately|ago|the other day"
    rf"|(?:last|this|next|that) (?:week|weekend|month|year|night|{_SEASON}|{_WEEKDAY})"
    rf"|(?:over|at|on|during) the weekend"
    rf"|{_WEEKDAY}|{_PLAIN_MONTH}|(?:in|on|since|of) {_WORD_MONTH}|{_WORD_MONTH} \d{{1,2}}"
    rf"|(?:for|about|over|almost|nearly) {_AMOUNT} (?:days?|weeks?|months?|years?|decades?)"
    rf"|{_AMOUNT} (?:days?|weeks?|months?|years?) (?:back|later|earlier|old)"
    rf"|when i was|at (?:the )?age(?: of)? \d+|{_YEAR})\b"
)


def asks_when(query: str) -> bool:
    """Whether ``query`` asks for a time ("When did...?", "What year...?")."""
    return _WHEN_QUESTION.search(query) is not None


def mentions_time(text: str) -> bool:
    """Whether ``text`` says when something happened (a day, a weekday, "two weeks ago"...)."""
    # Lower-cased once: a case-insensitive search of the same pattern is 2-3x slower, and this
    # runs on every candidate of a question that asks when.
    return _TIME_MENTION.search(text.lower()) is not None
