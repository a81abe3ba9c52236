"""Pieces of pattern the save and forget rules share: what a verb takes, request words after.

A request verb takes "this"/"that" or a short object (:data:`DEMO_OR_OBJ`) and may name the
assistant's memory (:data:`MEMORY`). Request words may follow the content ("…, please.",
"…, ok?"): :func:`request_words_after` matches them on the end of a sentence read backwards,
an anchored match rather than a search from every place.
"""

from __future__ import annotations

import re

DEMO_OR_OBJ = r"(?:(?P<demo>this|that|it|these|those)|(?P<obj>[^,.;:!?\"]{1,80}?))"
MEMORY = r"(?:your\s+|the\s+|my\s+)?(?:long[-\s]term\s+)?(?:memory|memories|notes|records)\b"

#: Polite words after the content, ``|``-separated.
TAIL_WORDS = (
    "please|pls|plz|kindly|thanks|thank you|thx|for me|for later|for next time"
    "|for future reference|for later reference|for the future"
)
_TAG_WORDS = "ok|okay|alright|will you|would you|won't you|got it|yeah"


def _backwards(words: str) -> str:
    """``words`` (``|``-separated) spelt backwards, as regex alternatives."""
    return "|".join(word[::-1].replace(" ", r"\s+") for word in words.split("|"))


def request_words_after(words: str) -> re.Pattern[str]:
    """The request words after the content, with the end punctuation, read backwards.

    Args:
        words: The words (``|``-separated) that may end a request: :data:`TAIL_WORDS` and
            any of the action's own; question tags ("ok?") come with them.

    Returns:
        A pattern to match at the start of the sentence's end reversed.
    """
    return re.compile(
        rf"[\s.!?]*(?:\b(?:{_backwards(words)})\b\s*,?\s*"
        rf"|\b(?:{_backwards(_TAG_WORDS)})\b\s*,\s*)+",
        re.I,
    )
