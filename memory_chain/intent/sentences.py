"""The sentence tools the request rules share: folding, splitting, trimming, clause tests.

Matching runs on a copy of the message with typographic quotes folded to ASCII
(:data:`FOLD`), character for character, so positions found in the copy slice the user's own
text (:func:`clean`).
"""

from __future__ import annotations

import re

FOLD = str.maketrans(
    {
        "\u2019": "'",
        "\u2018": "'",
        "\u02bc": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u00a0": " ",
    }
)
# Sentences end after . ! ? (and closing quotes or brackets), or at a line break.
# (Whitespace around a break is trimmed from the sentences, not matched: no backtracking.)
_BREAK = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_ABBREVIATION = re.compile(
    r"(?:\b(?i:mr|mrs|ms|dr|jr|sr|prof|vs|e\.g|i\.e|a\.m|p\.m|approx)|(?<![\w.])[A-HJ-Z])\.$"
)
#: A separator before a request's content: a colon or dash introduces it ("explicit").
SEP = re.compile(r"\s*(?:(?P<explicit>[:\u2013\u2014\u2026]|-+|\.\.\.)|(?P<comma>[,;]))?\s*")
#: Content that is only a person ("me", "them").
PRONOUN = re.compile(r"(?:me|us|him|her|them|you|myself|ourselves)\W*$", re.I)
# A clause (a statement) rather than a noun phrase: a subject pronoun first, or a verb form.
_CLAUSE_START = re.compile(
    r"(?:i|i'm|im|i've|i'd|i'll|we|we're|we've|we'll|you|you're|you've|he|he's|she|she's|they"
    r"|they're|they've|it's|there's|there\s+(?:is|are|was|were)|this\s+is|that's)\b",
    re.I,
)
_FINITE = re.compile(
    r"\b(?:am|is|are|was|were|have|has|had|do|does|did|will|would|shall|should|can|could|may"
    r"|might|must|isn't|aren't|wasn't|weren't|don't|doesn't|didn't|won't|can't|cannot|hasn't"
    r"|haven't|likes|loves|hates|prefers|prefer|lives|owns|speaks|knows|wants|needs|goes|went"
    r"|moved|married|(?:it|that|there|he|she|here)'s)\b|\w'(?:re|m|ve|ll|d)\b",
    re.I,
)
WORD = re.compile(r"\w")
ONE_WORD = re.compile(r"[^\W\d_][\w'-]*")
_QUOTES = "\"'"


def unquoted(folded: str) -> tuple[int, int]:
    """The bounds of the message, inside the quotes when the whole of it is quoted."""
    start, end = trimmed(folded, 0, len(folded))
    quoted = end - start >= 2 and folded[start] == '"' == folded[end - 1]
    if quoted and folded.count('"', start, end) == 2:
        return trimmed(folded, start + 1, end - 1)
    return start, end


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """``start`` and ``end`` moved inwards past whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def sentences(folded: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences between ``start`` and ``end``, as trimmed bounds."""
    spans: list[tuple[int, int]] = []
    begin = start
    for match in _BREAK.finditer(folded, start, end):
        cut = match.start()
        if folded[cut - 1 : cut] == "." and _ABBREVIATION.search(folded, max(begin, cut - 8), cut):
            continue
        spans.append(trimmed(folded, begin, cut))
        begin = match.end()
    spans.append(trimmed(folded, begin, end))
    return [(a, b) for a, b in spans if a < b]


def is_clause(folded: str, start: int, end: int) -> bool:
    """Whether the text is a clause (a statement) rather than a noun phrase."""
    return bool(_CLAUSE_START.match(folded, start, end) or _FINITE.search(folded, start, end))


def single_word(folded: str, start: int, end: int) -> bool:
    """Whether the content is one word: a name the user addresses ("remember this, Claude")."""
    return re.fullmatch(r"[^\W\d_][\w-]*[.!]*", folded[start:end]) is not None


def clean(message: str, folded: str, start: int, end: int) -> str:
    """The user's words between ``start`` and ``end``, out of the quotes around all of them."""
    start, end = trimmed(folded, start, end)
    stop = end
    while stop > start and folded[stop - 1] in ".!":
        stop -= 1
    if stop - start >= 2 and folded[start] in _QUOTES and folded[stop - 1] == folded[start]:
        quote = folded[start]
        if folded.count(quote, start + 1, stop - 1) == 0:
            start, end = trimmed(folded, start + 1, stop - 1)
    return message[start:end]
