"""The save rules: the verbs that ask to remember, and content that is no fact to keep.

Save verbs: "remember", "memorize", "don't/never forget", "keep/bear in mind", "make/take a
note (of)", "note/jot/write … down", "save/store/add/commit … to (your) memory", "for future
reference". After "remember", a task ("remember to buy milk": the assistant schedules
nothing), recalling ("remember what/when/how …", "remember the time we …") and a person
("remember me") are not facts about the user (:func:`not_a_fact`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from memory_chain.intent.phrases import DEMO_OR_OBJ, MEMORY, TAIL_WORDS, request_words_after
from memory_chain.intent.sentences import PRONOUN

if TYPE_CHECKING:
    from memory_chain.intent.request import Action

#: (action, whether the verb can also be about recall, pattern); the content follows the match.
SAVE_VERBS: tuple[tuple[Action, bool, re.Pattern[str]], ...] = (
    ("save", False, re.compile(r"(?:keep|bear|have)\s+in\s+mind\b", re.I)),
    ("save", False, re.compile(rf"(?:keep|bear)\s+{DEMO_OR_OBJ}\s+in\s+mind\b", re.I)),
    ("save", False, re.compile(r"(?:make|take)\s+(?:a\s+)?(?:mental\s+)?note(?:\s+of)?\b", re.I)),
    ("save", False, re.compile(rf"(?:note|jot|write)\s+(?:down\b|{DEMO_OR_OBJ}\s+down\b)", re.I)),
    (
        "save",
        False,
        re.compile(
            rf"(?:save|store|put|add|keep|commit|file|record|write)(?:\s+{DEMO_OR_OBJ})?"
            rf"\s+(?:to|in|into|on)\s+{MEMORY}",
            re.I,
        ),
    ),
    ("save", False, re.compile(r"for\s+(?:future|later)\s+reference\b", re.I)),
    (
        "save",
        True,
        re.compile(
            r"(?:remember|memori[sz]e|(?:don't|dont|do\s+not|never)\s+forget(?:\s+about)?)\b",
            re.I,
        ),
    ),
)
#: Request words after what to save ("…, please.", "…, ok?"), read backwards.
SAVE_TAIL = request_words_after(TAIL_WORDS)

_WH = re.compile(r"(?:what|when|where|who|whom|whose|which|why|how|whether|if)\b", re.I)
_PAST_SCENE = re.compile(
    r"(?:the|that)\s+(?:time|times|day|night|moment|evening|morning|week|weekend|summer"
    r"|winter|year|trip)\s+(?:when|where|we|i|you|he|she|they)\b",
    re.I,
)
_TASK = re.compile(r"to\s+[^\W\d_]", re.I)


def not_a_fact(folded: str, start: int, end: int) -> bool:
    """Whether what follows "remember" is no fact to keep: a task, recalling, or a person.

    Args:
        folded: The message, typographic quotes folded.
        start: Where the content starts.
        end: Where it ends.

    Returns:
        True for "to buy milk", "when we …", "the time we …", "me".
    """
    return bool(
        _TASK.match(folded, start, end)
        or _WH.match(folded, start, end)
        or _PAST_SCENE.match(folded, start, end)
        or PRONOUN.match(folded, start, end)
    )
