"""The forget rules: the verbs that ask to forget, and when "forget it" means "never mind".

Forget verbs: "forget (about)", "stop remembering", "don't remember", "no need to
remember", and "delete/remove/erase/…" only with a memory object ("the fact that …", "what
you know about …", "… from your memory"). "Forget it, I'll do it myself" and "forget that,
…" mean "never mind" (:func:`never_mind`); a colon makes what follows the content.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from memory_chain.intent.phrases import DEMO_OR_OBJ, MEMORY, TAIL_WORDS, request_words_after
from memory_chain.intent.sentences import PRONOUN

if TYPE_CHECKING:
    from memory_chain.intent.request import Action

_DELETE = r"(?:delete|remove|erase|wipe|clear|drop|purge|discard|scrap|scratch)"
#: (action, whether the verb can also be about recall, pattern); the content follows the match.
FORGET_VERBS: tuple[tuple[Action, bool, re.Pattern[str]], ...] = (
    (
        "forget",
        False,
        re.compile(
            r"(?:stop|quit)\s+remembering\b|(?:(?:you\s+)?(?:don't|dont|do\s+not|no\s+longer)"
            r"\s+(?:need|have)\s+to|no\s+need\s+to|don't|dont|do\s+not)\s+remember\b",
            re.I,
        ),
    ),
    (
        "forget",
        False,
        re.compile(
            rf"{_DELETE}\s+(?:(?:the|that|this)\s+(?:fact|memory|memories|note|entry|info"
            r"|information|record)(?:\s+(?:that|about|of|on|regarding|saying))?"
            r"|(?:your|my)\s+(?:memory|memories|notes)\s+(?:of|about|on|regarding))\b",
            re.I,
        ),
    ),
    (
        "forget",
        False,
        re.compile(
            rf"{_DELETE}\s+(?P<scope>(?:what|everything|anything|all)(?:\s+(?:that|which))?"
            r"\s+you\s+(?:know|remember|have\s+(?:saved|stored|noted|learned)|saved|stored"
            r"|noted|learned))(?:\s+(?:about|of|on|regarding))?\b",
            re.I,
        ),
    ),
    ("forget", False, re.compile(rf"{_DELETE}(?:\s+{DEMO_OR_OBJ})?\s+from\s+{MEMORY}", re.I)),
    ("forget", True, re.compile(r"forget(?![\w-])(?:\s+about\b)?", re.I)),
)
_FORGET_WORDS = "anymore|any more|any longer|for good"
#: Request words after what to forget ("…, please.", "… anymore."), read backwards.
FORGET_TAIL = request_words_after(TAIL_WORDS + "|" + _FORGET_WORDS)


def never_mind(demo: str, *, led: bool, followed: bool, explicit: bool) -> bool:
    """Whether "forget it/that" means "never mind" rather than a request.

    Args:
        demo: The demonstrative the verb names ("it", "that").
        led: A clause comes before the request.
        followed: Words follow it in the sentence.
        explicit: A colon or dash introduces those words (then they are the content).

    Returns:
        True for "forget it" with anything around it, and "forget that, …".
    """
    return (demo.lower() == "it" and (led or followed)) or (followed and not explicit)


def scope_start(verb: re.Match[str], folded: str, start: int, end: int) -> int:
    """Where a forget's content starts: the scope itself when the rest names only a person.

    Args:
        verb: The forget verb's match.
        folded: The message, typographic quotes folded.
        start: Where the content after the verb starts.
        end: Where it ends.

    Returns:
        For "delete everything you know about me", where "everything you know about me"
        starts; otherwise ``start``.
    """
    if verb.groupdict().get("scope") is not None and PRONOUN.match(folded, start, end):
        return verb.start("scope")
    return start
