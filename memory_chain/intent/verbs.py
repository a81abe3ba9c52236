"""Where a request starts in a clause: fillers, a name addressed, a request frame, a verb.

A request is an imperative addressed to the assistant, at the start of a clause after
optional fillers ("please", "hey", "also", "and", "by the way", a name and a comma), or
introduced by a request frame: "can/could/would/will you …" (asked), "I want/need you to
…", "make sure to …", "you can …". The verbs are the save rules' (:mod:`.remember`) and the
forget rules' (:mod:`.forget`), tried in that order; the first that matches decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory_chain.intent.forget import FORGET_VERBS
from memory_chain.intent.references import DEMO
from memory_chain.intent.remember import SAVE_VERBS
from memory_chain.intent.sentences import SEP

if TYPE_CHECKING:
    from memory_chain.intent.request import Action

# No request without one of these words: most messages stop here. The first check runs on the
# lowercased message, without IGNORECASE (several times faster on a message with none).
_TRIGGER_WORDS = (
    r"remember|forget|memor|note|mind|reference|delete|remove|erase|wipe|clear|drop|purge"
    r"|discard|scrap|scratch|\bdown\b"
)
TRIGGER_LOWER = re.compile(_TRIGGER_WORDS)
TRIGGER = re.compile(_TRIGGER_WORDS, re.IGNORECASE)

_FILLER = (
    r"(?:hey|hi|hello|yo|ok|okay|oh|ah|so|also|and|but|btw|well|now|alright|look|listen"
    r"|actually|anyway|one\s+more\s+thing|by\s+the\s+way|from\s+now\s+on|going\s+forward"
    r"|in\s+the\s+future|please|pls|plz|kindly|just)"
)
# Words that start a request or a statement, so never a name the user addresses.
_NOT_NAME = (
    r"(?:i|we|you|he|she|they|it|this|that|remember|memori[sz]e|forget|keep|bear|have|make"
    r"|take|note|jot|write|save|store|put|add|commit|file|record|delete|remove|erase|wipe"
    r"|clear|drop|purge|discard|scrap|scratch|stop|quit|don't|dont|do|never|no|can|could"
    r"|would|will|won't|for|be|feel|go|try|always)"
)
_PREFIX = re.compile(
    rf"(?:{_FILLER}\b[\s,:!.-]*)*"
    rf"(?:(?!{_NOT_NAME}\b)[^\W\d_][\w-]{{0,30}}\s*,\s*(?:{_FILLER}\b[\s,:!.-]*)*)?",
    re.I,
)
_POLITE = r"(?:(?:please|pls|plz|kindly|also|just|always)\b[\s,]*)*"
# A request phrased as a question.
_ASK = re.compile(rf"(?:can|could|would|will|won't)\s+(?:you|u|ya)\b[\s,]*{_POLITE}", re.I)
# A request phrased as a statement.
_TELL = re.compile(
    r"(?:(?:i\s+(?:want|need|would\s+like)|i'd\s+like)\s+you\s+to"
    r"|make\s+sure\s+(?:to|(?:that\s+)?you)"
    r"|be\s+sure\s+to|you\s+(?:can|may|could|should|must|might\s+as\s+well)|feel\s+free\s+to"
    rf"|go\s+ahead\s+and|try\s+to|always)\b[\s,]*{_POLITE}",
    re.I,
)
# Every save verb comes before every forget verb: "don't forget" is a save.
_VERBS = SAVE_VERBS + FORGET_VERBS


@dataclass(frozen=True, slots=True)
class Verb:
    """A request verb found at the start of a clause.

    Attributes:
        action: ``"save"`` or ``"forget"``.
        about_recall: "remember"/"forget": a question with them may ask about recall rather
            than request.
        asked: Phrased as a question ("can you …").
        match: The verb's match.
        demo: The demonstrative it names ("this", "what I just said"), if any.
        after: Where its content may start.
    """

    action: Action
    about_recall: bool
    asked: bool
    match: re.Match[str]
    demo: str | None
    after: int


def verb_at(folded: str, pos: int, end: int) -> Verb | None:
    """The request verb of the clause at ``pos`` (after fillers and a request frame)."""
    prefix = _PREFIX.match(folded, pos, end)
    at = prefix.end() if prefix else pos
    asked = False
    if (frame := _ASK.match(folded, at, end)) is not None:
        asked, at = True, frame.end()
    elif (frame := _TELL.match(folded, at, end)) is not None:
        at = frame.end()
    found = _first_verb(folded, at, end)
    if found is None:
        return None
    action, about_recall, match = found
    demo, after = match.groupdict().get("demo"), match.end()
    if demo is None and match.groupdict().get("obj") is None:
        skip = SEP.match(folded, after, end)
        if skip is not None and skip.group("explicit") is None:
            spot = DEMO.match(folded, skip.end(), end)
            if spot is not None:
                demo, after = spot.group(), spot.end()
    return Verb(action, about_recall, asked, match, demo, after)


def _first_verb(folded: str, at: int, end: int) -> tuple[Action, bool, re.Match[str]] | None:
    for action, about_recall, pattern in _VERBS:
        match = pattern.match(folded, at, end)
        if match is not None:
            return action, about_recall, match
    return None
