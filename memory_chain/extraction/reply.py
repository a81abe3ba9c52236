"""The extraction reply: the facts of its JSON, checked against what the user said.

A reply cut short by its token limit still gives the facts it completed; questions,
requests, copied turns, the assistant's words, duplicates, facts the user's turns do not support
(:mod:`memory_chain.facts.grounding`) and vague subjects are dropped, and each fact is
pinned to the user turn it comes from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory_chain.errors import MemoryChainError
from memory_chain.extraction.prompt import MAX_FACT_TEXT, MAX_FACTS
from memory_chain.facts.grounding import (
    Evidence,
    clean_subject,
    echoes_assistant,
    grounded,
    is_copied_turn,
    is_question,
    is_request,
    words_of,
)
from memory_chain.facts.model import KINDS, Fact, FactKind
from memory_chain.facts.reconcile import normalized
from memory_chain.schemas import Turn


class ExtractionError(MemoryChainError):
    """The model gave no usable facts (unreachable, or a reply that is not the JSON asked)."""


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    """A fact found in a range, checked against what the user said.

    Attributes:
        text: The fact, in the user's words.
        kind: Its kind.
        subject: What it is about, or ``None`` (none given, or too vague).
        turn: The user turn it comes from.
        said_at: When that turn was said (the fact holds from then on).
        label: The known fact the model says it replaces (``"F2"``), if any.
        replaces: That fact, when the claim was trusted (see
            :data:`~memory_chain.facts.reconcile.REPLACES_COSINE`).
    """

    text: str
    kind: FactKind
    subject: str | None
    turn: int
    said_at: datetime | None = None
    label: str | None = None
    replaces: Fact | None = None


def _items(reply: str) -> list[Any]:
    """The fact objects of a reply; the complete ones only, if it was cut short."""
    text = reply.strip()
    if text.startswith("```"):  # a model without the grammar may fence its JSON
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return _salvage(text)
    if isinstance(data, dict):
        facts = data.get("facts", [data] if "text" in data else [])
        return facts if isinstance(facts, list) else []
    if isinstance(data, list):
        return data
    raise ExtractionError(f"the reply is JSON but not facts: {text[:120]!r}")


def _salvage(text: str) -> list[Any]:
    key = text.find('"facts"')
    start = text.find("[", key if key >= 0 else 0)
    if start < 0:
        raise ExtractionError(f"the reply is not JSON: {text[:120]!r}")
    decoder = json.JSONDecoder()
    items: list[Any] = []
    position = start + 1
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            break
        try:
            item, position = decoder.raw_decode(text, position)
        except ValueError:
            break  # the reply was cut inside this item
        items.append(item)
    if not items and not text.rstrip().endswith("]"):
        raise ExtractionError(f"the reply was cut before its first fact: {text[:120]!r}")
    return items


def parse_extraction(
    reply: str, turns: Sequence[Turn], labels: Sequence[str] = ()
) -> list[ExtractedFact]:
    """The grounded facts of a reply (see the module docstring).

    Args:
        reply: The model's reply.
        turns: The turns the prompt showed, in order (line 1 is ``turns[0]``).
        labels: The known facts' labels the prompt showed.

    Returns:
        At most :data:`MAX_FACTS` facts, each about something a user turn says.

    Raises:
        ExtractionError: The reply holds no JSON facts (nor the start of them).
    """
    users = [turn.content for turn in turns if turn.role == "user"]
    assistants = [turn.content for turn in turns if turn.role == "assistant"]
    said = Evidence.of(users)
    user_lines = [number for number, turn in enumerate(turns, 1) if turn.role == "user"]
    found: list[ExtractedFact] = []
    seen: set[str] = set()
    for item in _items(reply):
        if not isinstance(item, dict) or not user_lines:
            continue
        text = item.get("text")
        # A text at the length limit was cut there: a turn being copied, not a fact.
        if not isinstance(text, str) or not text.strip() or len(text) >= MAX_FACT_TEXT:
            continue
        text = " ".join(text.split())
        key = normalized(text)
        if key in seen or is_question(text) or is_request(text) or is_copied_turn(text):
            continue
        if not grounded(text, said):
            continue
        if echoes_assistant(text, users, assistants):
            continue
        seen.add(key)
        kind = item.get("kind")
        label = item.get("replaces")
        line = _line_of(item.get("turn"), text, turns, user_lines)
        found.append(
            ExtractedFact(
                text=text,
                kind=kind if kind in KINDS else "other",
                subject=clean_subject(item.get("subject")),
                turn=turns[line - 1].turn_number,
                said_at=turns[line - 1].timestamp,
                label=label if isinstance(label, str) and label in labels else None,
            )
        )
        if len(found) == MAX_FACTS:
            break
    return found


def _line_of(cited: object, text: str, turns: Sequence[Turn], user_lines: list[int]) -> int:
    """The user line a fact comes from.

    The nearest to the line cited (the earlier of two as near: a reply follows what it
    answers); without a line, the one sharing most words with the fact.
    """
    if isinstance(cited, int) and not isinstance(cited, bool) and 1 <= cited <= len(turns):
        return min(user_lines, key=lambda line: (abs(line - cited), line))
    wanted = {word.casefold() for word in words_of(text)}

    def shared(line: int) -> int:
        return len(wanted & {w.casefold() for w in words_of(turns[line - 1].content)})

    return max(user_lines, key=lambda line: (shared(line), -line))
