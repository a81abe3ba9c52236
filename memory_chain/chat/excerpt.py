"""Excerpts: the part of a long text around what matched, within a token limit, marked as cut.

A long turn (a pasted log, a document) stays whole in storage; a prompt gets the sentences
that share the most words with the query, grown outwards while they fit, with ``[…]`` where
text was left out. Without a matching word the excerpt is the text's start (or its end).

Example:
    >>> from memory_chain.tokens import EstimatingCounter
    >>> text = "Intro. " * 50 + "The error was ENOSPC on /var. " + "Outro. " * 50
    >>> cut = excerpt(text, "which error?", 20, EstimatingCounter())
    >>> "ENOSPC" in cut and cut.startswith(CUT)
    True
"""

from __future__ import annotations

import re
from typing import Literal

from memory_chain.schemas import CUT
from memory_chain.tiers.sql.search import query_words
from memory_chain.tokens import TokenCount

#: The smallest excerpt worth giving a model, in tokens.
MIN_EXCERPT_TOKENS = 24
#: Longest piece, in characters, before it is split at a space.
_PIECE_CHARS = 300
# A piece ends after a newline, or after sentence punctuation and the spaces that follow.
_PIECE_END = re.compile(r"\n+|(?<=[.!?;])\s+")
_WORD = re.compile(r"\w+")


def pieces_of(text: str) -> list[str]:
    """Split ``text`` into sentence-like pieces that concatenate back to it."""
    pieces: list[str] = []
    start = 0
    for match in _PIECE_END.finditer(text):
        pieces.extend(_short(text[start : match.end()]))
        start = match.end()
    if start < len(text):
        pieces.extend(_short(text[start:]))
    return pieces


def _short(piece: str) -> list[str]:
    """A piece longer than ``_PIECE_CHARS`` split after spaces (or hard, without any)."""
    out: list[str] = []
    while len(piece) > _PIECE_CHARS:
        cut = piece.rfind(" ", _PIECE_CHARS // 2, _PIECE_CHARS)
        cut = cut + 1 if cut > 0 else _PIECE_CHARS
        out.append(piece[:cut])
        piece = piece[cut:]
    if piece:
        out.append(piece)
    return out


def _best_piece(pieces: list[str], terms: set[str], prefer: Literal["head", "tail"]) -> int:
    """The piece that best matches ``terms``, else the head or the tail.

    Each matching word weighs one over the number of pieces holding it, so the rare word of
    the question finds its piece; the first of equals wins.
    """
    fallback = 0 if prefer == "head" else len(pieces) - 1
    if not terms:
        return fallback
    found = [terms.intersection(_WORD.findall(piece.lower())) for piece in pieces]
    holders: dict[str, int] = {}
    for words in found:
        for word in words:
            holders[word] = holders.get(word, 0) + 1
    best, best_score = fallback, 0.0
    for index, words in enumerate(found):
        score = sum(1.0 / holders[word] for word in words)
        if score > best_score:
            best, best_score = index, score
    return best


def excerpt(
    text: str,
    query: str,
    max_tokens: int,
    counter: TokenCount,
    *,
    prefer: Literal["head", "tail"] = "head",
) -> str:
    """The part of ``text`` that best matches ``query`` in at most ``max_tokens`` tokens.

    Args:
        text: The whole text.
        query: What to look for (its content words).
        max_tokens: Most tokens of the excerpt, markers included (as ``counter`` counts).
        counter: Counts tokens.
        prefer: Where to take the excerpt when no word matches.

    Returns:
        ``text`` itself when it fits, else the excerpt with :data:`CUT` where text was left
        out; empty when not even a few words fit.
    """
    if counter.count(text) <= max_tokens:
        return text
    pieces = pieces_of(text)
    if not pieces:
        return ""
    center = _best_piece(pieces, set(query_words(query)), prefer)
    marker = counter.count(CUT) + 1
    room = max_tokens - 2 * marker
    first = counter.count(pieces[center])
    if first > room:
        return _cut_piece(pieces, center, query, room, counter)
    low, high, used = center, center, first
    grow_right = True
    while True:
        moved = False
        for side in (1, -1) if grow_right else (-1, 1):
            index = high + 1 if side == 1 else low - 1
            if 0 <= index < len(pieces):
                cost = counter.count(pieces[index])
                if used + cost <= room:
                    used += cost
                    low, high = min(low, index), max(high, index)
                    moved = True
                    break
        if not moved:
            break
        grow_right = not grow_right
    result = _marked("".join(pieces[low : high + 1]), low > 0, high < len(pieces) - 1)
    # Counting pieces apart may differ by a token from counting them together.
    while counter.count(result) > max_tokens and high > low:
        high -= 1
        result = _marked("".join(pieces[low : high + 1]), low > 0, True)
    return result if counter.count(result) <= max_tokens else ""


def _marked(body: str, cut_before: bool, cut_after: bool) -> str:
    body = body.strip()
    return f"{CUT + ' ' if cut_before else ''}{body}{' ' + CUT if cut_after else ''}"


def _cut_piece(pieces: list[str], center: int, query: str, room: int, counter: TokenCount) -> str:
    """A window of one over-long piece, around its first matching word, that fits ``room``."""
    piece = pieces[center]
    lowered = piece.lower()
    at = min((lowered.find(t) for t in query_words(query) if t in lowered), default=0)
    width = len(piece)
    while width > 8:
        width = width * 2 // 3
        start = max(0, min(at - width // 4, len(piece) - width))
        window = piece[start : start + width]
        if counter.count(window) <= room:
            before = center > 0 or start > 0
            after = center < len(pieces) - 1 or start + width < len(piece)
            return _marked(window, before, after)
    return ""
