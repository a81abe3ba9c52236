"""The parser: the first sentence holding a request decides, and what it names is the text.

:func:`parse_intent` splits the message into sentences (:mod:`.sentences`), looks for a
request verb at the start of each, else after a leading clause (:mod:`.verbs`), cuts the
content out of the sentence (:func:`_content`, :func:`_body`) and, when the request names
none, takes it from around (:mod:`.references`). The rules are the package's
(:mod:`memory_chain.intent`).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

from memory_chain.intent.forget import FORGET_TAIL, never_mind, scope_start
from memory_chain.intent.references import DEMO, around, has_marker
from memory_chain.intent.remember import SAVE_TAIL, not_a_fact
from memory_chain.intent.request import Action, Intent
from memory_chain.intent.sentences import (
    FOLD,
    ONE_WORD,
    SEP,
    WORD,
    clean,
    is_clause,
    sentences,
    single_word,
    trimmed,
    unquoted,
)
from memory_chain.intent.verbs import TRIGGER, TRIGGER_LOWER, Verb, verb_at

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
#: How far back from a sentence's end request words are looked for, in characters.
_TAIL_REACH = 80
_THAT = re.compile(r"that\s+", re.I)


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
        The request, or ``None`` when the message asks neither (see the package's rules).
    """
    if TRIGGER_LOWER.search(message.lower()) is None:
        return None
    folded = message.translate(FOLD)
    start, end = unquoted(folded)
    spans = sentences(folded, start, end)
    for index, (begin, finish) in enumerate(spans):
        if TRIGGER.search(folded, begin, finish) is None:
            continue
        found = _request_in(message, folded, begin, finish)
        if found is None:
            continue
        if found.text:
            return Intent(found.action, found.text, refers_back=False)
        others = around(message, folded, spans, index)
        if others:
            return Intent(found.action, others, refers_back=False)
        if found.alone_ok:
            return Intent(found.action, "", refers_back=True)
    return None


def asks_to_remember(role: str, message: str) -> bool:
    """Whether a turn is a user's request to remember something (a save, not a forget)."""
    if role != "user":
        return False
    intent = parse_intent(message)
    return intent is not None and intent.action == "save"


def _request_in(message: str, folded: str, start: int, end: int) -> _Found | None:
    """The request in one sentence: at its start, else after a leading clause."""
    found = _request_at(message, folded, start, end, None)
    if found is not None:
        return found
    reported = _REPORTED.search(folded, start, end)
    triggers = [match.start() for match in TRIGGER.finditer(folded, start, end)]
    for sep in _CLAUSE_SEP.finditer(folded, start, end):
        lead = trimmed(folded, start, sep.start())
        if lead[0] == lead[1] or (reported is not None and reported.end() <= lead[1]):
            continue
        # The verb follows the separator closely (after fillers and a request frame).
        near = bisect_left(triggers, sep.end())
        if near == len(triggers) or triggers[near] - sep.end() > _VERB_REACH:
            continue
        # One word before the request is an interjection or a name ("Important: …").
        one_word = ONE_WORD.fullmatch(folded, *lead) is not None
        clause = None if one_word else (lead[0], lead[1], sep.end())
        found = _request_at(message, folded, sep.end(), end, clause)
        if found is not None:
            return found
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
    verb = verb_at(folded, pos, end)
    tail = SAVE_TAIL if verb is None or verb.action == "save" else FORGET_TAIL
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
        return _Found(verb.action, clean(message, folded, lead[0], lead[1]), alone_ok=True)
    if not pointed:  # a bare verb: "Make a note." refers back, "Remember." is too vague
        return _Found(verb.action, "", alone_ok=not verb.about_recall)
    # "Can you remember that?" may ask about recall: a request only with "please"/"for me".
    recall_question = verb.asked and verb.about_recall
    return _Found(verb.action, "", alone_ok=not recall_question or has_marker(folded, pos, end))


def _named(
    message: str,
    folded: str,
    verb: Verb,
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
        if verb.action == "forget" and never_mind(
            verb.demo, led=lead is not None, followed=a < b, explicit=explicit
        ):
            return None  # "forget it, …": never mind
        # "Remember this: the code is 7319" (but "remember this, Claude" names no content).
        ahead = a < b and (explicit or verb.action == "save") and not single_word(folded, a, b)
        return (clean(message, folded, a, b) if ahead else ""), True
    if verb.match.groupdict().get("obj") is not None:
        text = clean(message, folded, *verb.match.span("obj"))
        return (f"{text}: {clean(message, folded, a, b)}" if a < b else text), False
    body = _body(folded, a, b, verb, explicit=explicit)
    if body is None:
        return None
    if DEMO.fullmatch(folded, body, b) is not None:
        return "", True
    body = scope_start(verb.match, folded, body, b)  # "delete everything you know about me"
    return clean(message, folded, body, b), False


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
    sep = SEP.match(folded, start, end)
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
    if not WORD.search(folded, start, end):
        return start, start, explicit
    return start, end, explicit


def _body(folded: str, start: int, end: int, verb: Verb, *, explicit: bool) -> int | None:
    """Where the content proper starts (after a complementizer "that").

    Returns:
        The start, or ``None`` when the content is no fact to keep: "remember to buy milk",
        "remember when we …", "can you remember my birthday?" (a noun phrase asks what is
        known).
    """
    if start == end:
        return start
    that = _THAT.match(folded, start, end)
    if that is not None and is_clause(folded, that.end(), end):
        return that.end()
    if verb.asked and verb.about_recall and verb.action == "save":
        return start if is_clause(folded, start, end) else None
    if explicit or verb.action == "forget" or that is not None:
        return start
    if not_a_fact(folded, start, end):
        return None
    return start


def _with_lead(message: str, lead: tuple[int, int, int] | None, text: str) -> str:
    """``text`` after the leading clause it belongs to ("If I mention Bob, he's my brother")."""
    if lead is None:
        return text
    start, stop, request = lead
    return f"{message[start:stop]}{message[stop:request].rstrip()} {text}"
