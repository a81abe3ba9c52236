"""Explicit memory requests: whether a user message asks to remember or to forget, and what.

This is a deterministic first pass, run on every stored user message: it catches the requests
a user addresses to the assistant in so many words ("remember that my wife is Ana", "forget my
old address"). Facts a user merely states ("I'm vegan") are the LLM extractor's job.

Rules:

* **A request is an imperative addressed to the assistant**, at the start of a sentence after
  optional fillers ("please", "hey", "also", "and", "by the way", a name and a comma), or
  introduced by a request frame: "can/could/would/will you …", "I want/need you to …",
  "make sure to …", "you can …". Save verbs: "remember", "memorize", "don't/never forget",
  "keep/bear in mind", "make/take a note (of)", "note/jot/write … down", "save/store/add/commit
  … to (your) memory", "for future reference". Forget verbs: "forget (about)", "stop
  remembering", "don't remember", "no need to remember", and "delete/remove/erase/…" only with
  a memory object ("the fact that …", "what you know about …", "… from your memory"). So
  "I remember …", "I don't remember …", "do you remember …", "he told me to remember that",
  "I forgot …" and "save this file as csv" are not requests: their verb is not imperative, or
  not about memory.
* **A request may follow what it is about** in the same sentence ("My seat is 14C, remember
  that."), or a leading clause ("If I mention Bob, remember that he's my brother." saves "If I
  mention Bob, he's my brother."); a leading clause that reports speech ("she said, remember
  …") or quotes is not the user's request, and a single word before it is an interjection
  ("Important: remember that …").
* **Imperatives are not questions**: "Remember when we …?", "Remember this?" are not requests.
  A request phrased as a question ("Can you remember that I'm vegan?") is one when its content
  is a statement; for "remember"/"forget", which can also ask about recall ("Can you remember
  my birthday?", "Can you remember that?"), the content must be a clause, and "this/that" needs
  "please"/"for me" or something said before it in the message.
* **Not a fact about the user, so not a save**: "remember to buy milk" (a task: the assistant
  schedules nothing; the extractor may keep it as a plan), "remember what/when/how …" and
  "remember the time we …" (recalling, not telling), "remember me".
* **"forget it" is refers-back only on its own**: "Forget it, I'll do it myself" means "never
  mind" and is not a request; "forget that, …" likewise (a colon makes what follows the
  content).
* **The text** is what the request names, in the user's words: without the request phrase, a
  complementizer "that" (kept when it is a determiner: "remember that restaurant"), "about",
  surrounding quotes, and trailing "please"/"for me"/", ok?" (for forgets also "anymore").
  The end punctuation belongs to whatever it ends: kept when the content ends the sentence
  ("my wife is Ana."), dropped with a request phrase that ends it ("My seat is 14C, remember
  that." gives "My seat is 14C"); a final "?" is always the request's.
* **When the request names no content** ("Remember this.", "Don't forget!", "Forget that."):
  the sentences before it in the message (greetings, thanks and questions aside), else those
  after it, are the content. With none, ``refers_back`` is set and the caller uses the
  previous message; a bare "remember"/"don't forget" with nothing around it is not a request.
* The first sentence holding a request decides; a message holding two requests yields the
  first.
* **Speed**: a message without a trigger word (remember, forget, memory, note, mind,
  reference, delete, remove, erase, …) returns at once; otherwise a few anchored matches per
  sentence, linear in the message's length.

Example:
    >>> parse_intent("My seat is 14C. Remember this.")
    Intent(action='save', text='My seat is 14C.', refers_back=False)
    >>> parse_intent("Please forget that.")
    Intent(action='forget', text='', refers_back=True)
    >>> parse_intent("I don't remember that movie") is None
    True
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Literal

Action = Literal["save", "forget"]


@dataclass(frozen=True, slots=True)
class Intent:
    """A request to remember or to forget something.

    Attributes:
        action: ``"save"`` (remember) or ``"forget"``.
        text: What to save or forget, trimmed, without the request phrase; empty when the
            request refers back.
        refers_back: The message names no content ("remember this", "forget that"): the
            previous message is meant.
    """

    action: Action
    text: str
    refers_back: bool


# Matching runs on a copy with typographic quotes folded to ASCII, character for character,
# so positions found in the copy slice the user's own text.
_FOLD = str.maketrans(
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
# No request without one of these words: most messages stop here. The first check runs on the
# lowercased message, without IGNORECASE (several times faster on a message with none).
_TRIGGER_WORDS = (
    r"remember|forget|memor|note|mind|reference|delete|remove|erase|wipe|clear|drop|purge"
    r"|discard|scrap|scratch|\bdown\b"
)
_TRIGGER_LOWER = re.compile(_TRIGGER_WORDS)
_TRIGGER = re.compile(_TRIGGER_WORDS, re.IGNORECASE)
# Sentences end after . ! ? (and closing quotes or brackets), or at a line break.
# (Whitespace around a break is trimmed from the sentences, not matched: no backtracking.)
_BREAK = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_ABBREVIATION = re.compile(
    r"(?:\b(?i:mr|mrs|ms|dr|jr|sr|prof|vs|e\.g|i\.e|a\.m|p\.m|approx)|(?<![\w.])[A-HJ-Z])\.$"
)
# A request may start a clause after one of these (a leading clause stays in the text).
_CLAUSE_SEP = re.compile(r"(?:[,;:\u2013\u2014\u2026]|\.\.\.|(?<=\s)(?:-+|so\b))\s*", re.I)
#: How far after a separator a request verb may start, in characters.
_VERB_REACH = 100
# A leading clause that reports speech or quotes: "she said, remember that …".
_REPORTED = re.compile(
    r"\b(?:said|says|say|told|tells|tell|asked|asks|ask|wrote|writes|replied|replies|texted"
    r"|yelled|shouted|whispered|reminded|reminds|goes)\b|\"",
    re.I,
)

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

_DEMO_OR_OBJ = r"(?:(?P<demo>this|that|it|these|those)|(?P<obj>[^,.;:!?\"]{1,80}?))"
_MEMORY = r"(?:your\s+|the\s+|my\s+)?(?:long[-\s]term\s+)?(?:memory|memories|notes|records)\b"
_DELETE = r"(?:delete|remove|erase|wipe|clear|drop|purge|discard|scrap|scratch)"
# (action, whether the verb can also be about recall, pattern); the content follows the match.
_VERBS: tuple[tuple[Action, bool, re.Pattern[str]], ...] = (
    ("save", False, re.compile(r"(?:keep|bear|have)\s+in\s+mind\b", re.I)),
    ("save", False, re.compile(rf"(?:keep|bear)\s+{_DEMO_OR_OBJ}\s+in\s+mind\b", re.I)),
    ("save", False, re.compile(r"(?:make|take)\s+(?:a\s+)?(?:mental\s+)?note(?:\s+of)?\b", re.I)),
    ("save", False, re.compile(rf"(?:note|jot|write)\s+(?:down\b|{_DEMO_OR_OBJ}\s+down\b)", re.I)),
    (
        "save",
        False,
        re.compile(
            rf"(?:save|store|put|add|keep|commit|file|record|write)(?:\s+{_DEMO_OR_OBJ})?"
            rf"\s+(?:to|in|into|on)\s+{_MEMORY}",
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
    ("forget", False, re.compile(rf"{_DELETE}(?:\s+{_DEMO_OR_OBJ})?\s+from\s+{_MEMORY}", re.I)),
    ("forget", True, re.compile(r"forget(?![\w-])(?:\s+about\b)?", re.I)),
)

_TAIL_WORDS = (
    "please|pls|plz|kindly|thanks|thank you|thx|for me|for later|for next time"
    "|for future reference|for later reference|for the future"
)
_TAG_WORDS = "ok|okay|alright|will you|would you|won't you|got it|yeah"
_FORGET_WORDS = "anymore|any more|any longer|for good"


def _backwards(words: str) -> str:
    """``words`` (``|``-separated) spelt backwards, as regex alternatives."""
    return "|".join(word[::-1].replace(" ", r"\s+") for word in words.split("|"))


# Request words after the content ("…, please.", "…, ok?") with the end punctuation, matched
# on the end of the sentence read backwards: an anchored match, not a search from every place.
_SAVE_TAIL = re.compile(
    rf"[\s.!?]*(?:\b(?:{_backwards(_TAIL_WORDS)})\b\s*,?\s*"
    rf"|\b(?:{_backwards(_TAG_WORDS)})\b\s*,\s*)+",
    re.I,
)
_FORGET_TAIL = re.compile(
    rf"[\s.!?]*(?:\b(?:{_backwards(_TAIL_WORDS + '|' + _FORGET_WORDS)})\b\s*,?\s*"
    rf"|\b(?:{_backwards(_TAG_WORDS)})\b\s*,\s*)+",
    re.I,
)
#: How far back from a sentence's end request words are looked for, in characters.
_TAIL_REACH = 80
_MARKER = re.compile(r"\b(?:" + _TAIL_WORDS.replace(" ", r"\s+") + r")\b", re.I)
_SEP = re.compile(r"\s*(?:(?P<explicit>[:\u2013\u2014\u2026]|-+|\.\.\.)|(?P<comma>[,;]))?\s*")
_END_OF_DEMO = (
    r"(?=\s*(?:$|[.!?,;:\u2013\u2014-]|(?:please|pls|plz|for\s+me|for\s+later|for\s+next\s+time"
    r"|for\s+(?:future|later)\s+reference|for\s+good|anymore|any\s+more|any\s+longer|thanks"
    r"|thank\s+you)\b))"
)
# What "this" can be: a demonstrative, or a pointer at what was just said.
_DEMO = re.compile(
    r"(?:this\s+one|that\s+one|this|that|it|these|those|all\s+(?:of\s+)?(?:this|that)"
    r"|the\s+above|(?:what|everything|all)\s+i\s+(?:just\s+)?(?:said|wrote|told\s+you|mentioned"
    r"|typed)(?:\s+(?:earlier|before|above|just\s+now))?"
    r"|i\s+(?:ever\s+|just\s+)?(?:said|mentioned|told\s+you|wrote)\s+(?:that|this|it|anything)"
    rf"|my\s+(?:last|previous)\s+message){_END_OF_DEMO}",
    re.I,
)
_THAT = re.compile(r"that\s+", re.I)
_WH = re.compile(r"(?:what|when|where|who|whom|whose|which|why|how|whether|if)\b", re.I)
_PAST_SCENE = re.compile(
    r"(?:the|that)\s+(?:time|times|day|night|moment|evening|morning|week|weekend|summer"
    r"|winter|year|trip)\s+(?:when|where|we|i|you|he|she|they)\b",
    re.I,
)
_TASK = re.compile(r"to\s+[^\W\d_]", re.I)
_PRONOUN = re.compile(r"(?:me|us|him|her|them|you|myself|ourselves)\W*$", re.I)
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
_WORD = re.compile(r"\w")
_ONE_WORD = re.compile(r"[^\W\d_][\w'-]*")
# Sentences that carry nothing to remember.
_FILLER_SENTENCE = re.compile(
    r"\W*(?:(?:hi|hello|hey|thanks|thank\s+you|thx|ok|okay|cool|great|please|yes|yeah|no|sure"
    r"|alright|also|and|anyway|btw|hmm|so)\b\W*)*",
    re.I,
)
_QUOTES = "\"'"


@dataclass(frozen=True, slots=True)
class _Found:
    """A request found in a sentence: its text, or what to do without one."""

    action: Action
    text: str
    # Without text: whether "the previous message" is meant when the message has nothing else.
    alone_ok: bool


def parse_intent(message: str) -> Intent | None:
    """Whether ``message`` asks the assistant to remember or to forget something, and what.

    Args:
        message: A user's chat message.

    Returns:
        The request, or ``None`` when the message asks neither (see the module's rules).
    """
    if _TRIGGER_LOWER.search(message.lower()) is None:
        return None
    folded = message.translate(_FOLD)
    start, end = _unquoted(folded)
    spans = _sentences(folded, start, end)
    for index, (begin, finish) in enumerate(spans):
        if _TRIGGER.search(folded, begin, finish) is None:
            continue
        found = _request_in(message, folded, begin, finish)
        if found is None:
            continue
        if found.text:
            return Intent(found.action, found.text, refers_back=False)
        around = _around(message, folded, spans, index)
        if around:
            return Intent(found.action, around, refers_back=False)
        if found.alone_ok:
            return Intent(found.action, "", refers_back=True)
    return None


def asks_to_remember(role: str, message: str) -> bool:
    """Whether a turn is a user's request to remember something (a save, not a forget)."""
    if role != "user":
        return False
    intent = parse_intent(message)
    return intent is not None and intent.action == "save"


def _unquoted(folded: str) -> tuple[int, int]:
    """The bounds of the message, inside the quotes when the whole of it is quoted."""
    start, end = _trimmed(folded, 0, len(folded))
    quoted = end - start >= 2 and folded[start] == '"' == folded[end - 1]
    if quoted and folded.count('"', start, end) == 2:
        return _trimmed(folded, start + 1, end - 1)
    return start, end


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _sentences(folded: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences between ``start`` and ``end``, as trimmed bounds."""
    spans: list[tuple[int, int]] = []
    begin = start
    for match in _BREAK.finditer(folded, start, end):
        cut = match.start()
        if folded[cut - 1 : cut] == "." and _ABBREVIATION.search(folded, max(begin, cut - 8), cut):
            continue
        spans.append(_trimmed(folded, begin, cut))
        begin = match.end()
    spans.append(_trimmed(folded, begin, end))
    return [(a, b) for a, b in spans if a < b]


def _around(message: str, folded: str, spans: list[tuple[int, int]], index: int) -> str:
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


def _request_in(message: str, folded: str, start: int, end: int) -> _Found | None:
    """The request in one sentence: at its start, else after a leading clause."""
    found = _request_at(message, folded, start, end, None)
    if found is not None:
        return found
    reported = _REPORTED.search(folded, start, end)
    triggers = [match.start() for match in _TRIGGER.finditer(folded, start, end)]
    for sep in _CLAUSE_SEP.finditer(folded, start, end):
        lead = _trimmed(folded, start, sep.start())
        if lead[0] == lead[1] or (reported is not None and reported.end() <= lead[1]):
            continue
        # The verb follows the separator closely (after fillers and a request frame).
        near = bisect_left(triggers, sep.end())
        if near == len(triggers) or triggers[near] - sep.end() > _VERB_REACH:
            continue
        # One word before the request is an interjection or a name ("Important: …").
        one_word = _ONE_WORD.fullmatch(folded, *lead) is not None
        clause = None if one_word else (lead[0], lead[1], sep.end())
        found = _request_at(message, folded, sep.end(), end, clause)
        if found is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class _Verb:
    """A request verb found at the start of a clause."""

    action: Action
    # "remember"/"forget": a question with them may ask about recall rather than request.
    about_recall: bool
    # Phrased as a question ("can you …").
    asked: bool
    match: re.Match[str]
    # The demonstrative it names ("this", "what I just said"), if any.
    demo: str | None
    # Where its content may start.
    after: int


def _verb_at(folded: str, pos: int, end: int) -> _Verb | None:
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
        skip = _SEP.match(folded, after, end)
        if skip is not None and skip.group("explicit") is None:
            spot = _DEMO.match(folded, skip.end(), end)
            if spot is not None:
                demo, after = spot.group(), spot.end()
    return _Verb(action, about_recall, asked, match, demo, after)


def _first_verb(folded: str, at: int, end: int) -> tuple[Action, bool, re.Match[str]] | None:
    for action, about_recall, pattern in _VERBS:
        match = pattern.match(folded, at, end)
        if match is not None:
            return action, about_recall, match
    return None


def _request_at(
    message: str,
    folded: str,
    pos: int,
    end: int,
    lead: tuple[int, int, int] | None,
) -> _Found | None:
    """The request starting at ``pos`` (after fillers), if one does.

    Args:
        message: The user's text.
        folded: ``message`` with typographic quotes folded.
        pos: Where the clause starts.
        end: Where the sentence ends.
        lead: A clause before the request: its start, its end, and where the request begins.

    Returns:
        The request, or ``None``.
    """
    verb = _verb_at(folded, pos, end)
    tail = _SAVE_TAIL if verb is None or verb.action == "save" else _FORGET_TAIL
    # None for an imperative that asks a question ("Remember this?").
    content = (
        None if verb is None else _content(folded, verb.after, end, tail, allow_question=verb.asked)
    )
    named = (
        None if verb is None or content is None else _named(message, folded, verb, content, lead)
    )
    if verb is None or named is None:
        return None
    text, pointed = named
    if text:
        return _Found(verb.action, _with_lead(message, lead, text), alone_ok=True)
    if lead is not None:
        return _Found(verb.action, _clean(message, folded, lead[0], lead[1]), alone_ok=True)
    if not pointed:  # a bare verb: "Make a note." refers back, "Remember." is too vague
        return _Found(verb.action, "", alone_ok=not verb.about_recall)
    # "Can you remember that?" may ask about recall: a request only with "please"/"for me".
    recall_question = verb.asked and verb.about_recall
    return _Found(verb.action, "", alone_ok=not recall_question or _has_marker(folded, pos, end))


def _named(
    message: str,
    folded: str,
    verb: _Verb,
    content: tuple[int, int, bool],
    lead: tuple[int, int, int] | None,
) -> tuple[str, bool] | None:
    """What the request names: its text, and whether it points back ("this", "what I said").

    Returns:
        The text (empty when there is none) and whether it points back; ``None`` when the
        clause is no request after all.
    """
    a, b, explicit = content
    if verb.demo is not None:
        if verb.action == "forget" and (
            (verb.demo.lower() == "it" and (lead is not None or a < b)) or (a < b and not explicit)
        ):
            return None  # "forget it, …": never mind
        # "Remember this: the code is 7319" (but "remember this, Claude" names no content).
        ahead = a < b and (explicit or verb.action == "save") and not _single_word(folded, a, b)
        return (_clean(message, folded, a, b) if ahead else ""), True
    if verb.match.groupdict().get("obj") is not None:
        text = _clean(message, folded, *verb.match.span("obj"))
        return (f"{text}: {_clean(message, folded, a, b)}" if a < b else text), False
    body = _body(folded, a, b, verb, explicit=explicit)
    if body is None:
        return None
    if _DEMO.fullmatch(folded, body, b) is not None:
        return "", True
    if verb.match.groupdict().get("scope") is not None and _PRONOUN.match(folded, body, b):
        body = verb.match.start("scope")  # "delete everything you know about me"
    return _clean(message, folded, body, b), False


def _content(
    folded: str,
    start: int,
    end: int,
    tail: re.Pattern[str],
    *,
    allow_question: bool = False,
) -> tuple[int, int, bool] | None:
    """The content between ``start`` and ``end``, without request words around it.

    A separator before it and request words after it ("…, please.") are left out.

    Returns:
        Its bounds (empty when there is none) and whether a colon or dash introduced it; or
        ``None`` when it ends with "?" and ``allow_question`` is false.
    """
    sep = _SEP.match(folded, start, end)
    explicit = False
    if sep is not None:
        explicit = sep.group("explicit") is not None
        start = sep.end()
    trailing = tail.match(folded[max(start, end - _TAIL_REACH) : end][::-1])
    if trailing is not None:
        end -= trailing.end()
    else:
        stop = end
        while stop > start and folded[stop - 1] in " \"')]":
            stop -= 1
        if stop > start and folded[stop - 1] == "?":
            if not allow_question:
                return None
            while stop > start and folded[stop - 1] in "? ":
                stop -= 1
            end = stop
    while end > start and folded[end - 1] in " \t\n,;:-\u2013\u2014":
        end -= 1
    if not _WORD.search(folded, start, end):
        return start, start, explicit
    return start, end, explicit


def _body(folded: str, start: int, end: int, verb: _Verb, *, explicit: bool) -> int | None:
    """Where the content proper starts (after a complementizer "that").

    Returns:
        The start, or ``None`` when the content is no fact to keep: "remember to buy milk",
        "remember when we …", "can you remember my birthday?" (a noun phrase asks what is
        known).
    """
    if start == end:
        return start
    that = _THAT.match(folded, start, end)
    if that is not None and _is_clause(folded, that.end(), end):
        return that.end()
    if verb.asked and verb.about_recall and verb.action == "save":
        return start if _is_clause(folded, start, end) else None
    if explicit or verb.action == "forget" or that is not None:
        return start
    if (
        _TASK.match(folded, start, end)
        or _WH.match(folded, start, end)
        or _PAST_SCENE.match(folded, start, end)
        or _PRONOUN.match(folded, start, end)
    ):
        return None
    return start


def _is_clause(folded: str, start: int, end: int) -> bool:
    return bool(_CLAUSE_START.match(folded, start, end) or _FINITE.search(folded, start, end))


def _single_word(folded: str, start: int, end: int) -> bool:
    """Whether the content is one word: a name the user addresses ("remember this, Claude")."""
    return re.fullmatch(r"[^\W\d_][\w-]*[.!]*", folded[start:end]) is not None


def _has_marker(folded: str, start: int, end: int) -> bool:
    return _MARKER.search(folded, start, end) is not None


def _clean(message: str, folded: str, start: int, end: int) -> str:
    """The user's words between ``start`` and ``end``, out of the quotes around all of them."""
    start, end = _trimmed(folded, start, end)
    stop = end
    while stop > start and folded[stop - 1] in ".!":
        stop -= 1
    if stop - start >= 2 and folded[start] in _QUOTES and folded[stop - 1] == folded[start]:
        quote = folded[start]
        if folded.count(quote, start + 1, stop - 1) == 0:
            start, end = _trimmed(folded, start + 1, stop - 1)
    return message[start:end]


def _with_lead(message: str, lead: tuple[int, int, int] | None, text: str) -> str:
    """``text`` after the leading clause it belongs to ("If I mention Bob, he's my brother")."""
    if lead is None:
        return text
    start, stop, request = lead
    return f"{message[start:stop]}{message[stop:request].rstrip()} {text}"
