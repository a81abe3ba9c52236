"""References back: a request that points at what was said rather than saying it.

"Remember this", "forget what I just said", "save my last message": the content is the
message's other sentences (:func:`around`: greetings, thanks and questions aside; those
before the request, else those after it), or, with none, the previous message. Whether a
pointing question is a request at all ("Can you remember that?" may ask about recall) turns
on a polite marker ("please", "for me": :func:`has_marker`).
"""

from __future__ import annotations

import re

from memory_chain.intent.phrases import TAIL_WORDS

_END_OF_DEMO = (
    r"(?=\s*(?:$|[.!?,;:\u2013\u2014-]|(?:please|pls|plz|for\s+me|for\s+later|for\s+next\s+time"
    r"|for\s+(?:future|later)\s+reference|for\s+good|anymore|any\s+more|any\s+longer|thanks"
    r"|thank\s+you)\b))"
)
#: What "this" can be: a demonstrative, or a pointer at what was just said.
DEMO = re.compile(
    r"(?:this\s+one|that\s+one|this|that|it|these|those|all\s+(?:of\s+)?(?:this|that)"
    r"|the\s+above|(?:what|everything|all)\s+i\s+(?:just\s+)?(?:said|wrote|told\s+you|mentioned"
    r"|typed)(?:\s+(?:earlier|before|above|just\s+now))?"
    r"|i\s+(?:ever\s+|just\s+)?(?:said|mentioned|told\s+you|wrote)\s+(?:that|this|it|anything)"
    rf"|my\s+(?:last|previous)\s+message){_END_OF_DEMO}",
    re.I,
)
_MARKER = re.compile(r"\b(?:" + TAIL_WORDS.replace(" ", r"\s+") + r")\b", re.I)
# Sentences that carry nothing to remember.
_FILLER_SENTENCE = re.compile(
    r"\W*(?:(?:hi|hello|hey|thanks|thank\s+you|thx|ok|okay|cool|great|please|yes|yeah|no|sure"
    r"|alright|also|and|anyway|btw|hmm|so)\b\W*)*",
    re.I,
)


def around(message: str, folded: str, spans: list[tuple[int, int]], index: int) -> str:
    """The message's other sentences that can be content: those before, else those after."""

    def usable(span: tuple[int, int]) -> bool:
        a, b = span
        if _FILLER_SENTENCE.fullmatch(folded, a, b):
            return False
        return not folded[a:b].rstrip("\"')] ").endswith("?")

    chosen = [span for span in spans[:index] if usable(span)]
    if not chosen:
        chosen = [span for span in spans[index + 1 :] if usable(span)]
    return " ".join(message[a:b] for a, b in chosen)


def has_marker(folded: str, start: int, end: int) -> bool:
    """Whether the sentence holds a polite marker ("please", "for me")."""
    return _MARKER.search(folded, start, end) is not None
