"""The extraction prompt: instructions, one worked example, the turns, the known facts.

The reply is constrained by :func:`extraction_schema` (Ollama's ``format``; a grammar in the
embedded llama.cpp server), and the turns are cut to the model's window by
:func:`split_parts`: a range too long for one call is read in parts, an over-long turn as
its start.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from memory_chain.chat.excerpt import MIN_EXCERPT_TOKENS, excerpt
from memory_chain.facts.model import KINDS, Fact
from memory_chain.schemas import Turn
from memory_chain.tokens import TokenCount

#: Most facts asked for per call.
MAX_FACTS = 6
#: Longest fact text asked for, in characters.
MAX_FACT_TEXT = 200
#: The subjects a learnt fact may have: things a person has one of at a time, so that a newer
#: fact about one is a newer value of it (:func:`memory_chain.facts.rules.decide`). The
#: model picks one or ``""``; a fact about anything else has no subject and is superseded only
#: when the model says which known fact it replaces. Named freely, a small model's subjects
#: for one thing differ from range to range ("flat", "home city", "residence": the move is
#: never seen as one); picked from a list, they can be compared.
SUBJECTS: dict[str, str] = {
    "home": "where they live",
    "job": "their work, role or employer",
    "partner": "their partner or spouse",
    "school": "what and where they study",
    "diet": "what they eat or do not eat",
    "age": "their own age",
    "birthday": "their own birthday",
}
EXTRACTION_SYSTEM = (
    "You pick out lasting facts about the user from a chat: who they are, the people, pets "
    "and places in their life, their work, what they like and dislike, and their plans. "
    "Use only what the User lines say: skip the assistant's words, questions and small "
    "talk. Write each fact as one short sentence in the user's own words, first person, "
    "keeping names, numbers and dates exactly. For each fact give its kind (preference, "
    "biography, relationship, plan or other), its subject ("
    + "; ".join(f"{name} ({meaning})" for name, meaning in SUBJECTS.items())
    + '; or "" when it is about anything else), the number of the line it comes from, and '
    "in replaces the label of a known fact it updates or corrects (a new city, a new job, "
    'a changed preference), else "". Nothing worth keeping: {"facts": []}.'
)
# The chat first, the known facts after it: listed before the chat, a 1.5B model copied
# them as its reply (the update suite's moves and job changes learnt nothing), the grounding
# then dropped every copy; listed after it, as what ``replaces`` may name, they were not
# copied and the updates were labelled.
_HUMAN = (
    "Chat:\n{turns}\n\nKnown facts, for replaces:\n{known}\n\n"
    "Facts the User lines of the chat state:"
)
# One worked example, with invented people: it shows what to skip (the question, the
# assistant's suggestion) and an update of a known fact. Its names (York, Farid) are in no
# real chat, so a fact copied from it fails the grounding checks.
_EXAMPLE_HUMAN = _HUMAN.format(
    known="F1. I live in Leeds.\nF2. I work as a nurse.",
    turns="\n".join(
        [
            "[1] User: We finally moved to York last month, the kids love it.",
            "[2] Assistant: Congratulations! How are you settling in?",
            "[3] User: Fine. My neighbour Farid plays the cello. Do you know a good bakery?",
            "[4] Assistant: Try the one on Gillygate.",
            "[5] User: I'm allergic to nuts, so it has to be nut-free.",
        ]
    ),
)
_EXAMPLE_FACTS = [
    ("I moved to York last month.", "biography", "home", 1, "F1"),
    ("I have kids.", "relationship", "", 1, ""),
    ("My neighbour Farid plays the cello.", "relationship", "", 3, ""),
    ("I am allergic to nuts.", "biography", "", 5, ""),
]
_EXAMPLE_REPLY = json.dumps(
    {
        "facts": [
            {"text": t, "kind": k, "subject": s, "turn": n, "replaces": r}
            for t, k, s, n, r in _EXAMPLE_FACTS
        ]
    }
)
_SPEAKER = {"user": "User", "assistant": "Assistant", "system": "System"}
#: Most tokens of an assistant turn: it is context; facts come from the user's turns.
_ASSISTANT_TOKENS = 150


def extraction_schema(labels: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON schema of the reply, with the known facts' ``labels`` for ``replaces``."""
    item = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "maxLength": MAX_FACT_TEXT},
            "kind": {"type": "string", "enum": list(KINDS)},
            "subject": {"type": "string", "enum": ["", *SUBJECTS]},
            "turn": {"type": "integer"},
            "replaces": {"type": "string", "enum": ["", *labels]},
        },
        "required": ["text", "kind", "subject", "turn", "replaces"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": item, "maxItems": MAX_FACTS}},
        "required": ["facts"],
        "additionalProperties": False,
    }


def turn_lines(turns: Sequence[tuple[Turn, str]]) -> str:
    """Turns numbered from 1 as the prompt shows them (``[1] User: ...``)."""
    return "\n".join(
        f"[{number}] {_SPEAKER.get(turn.role, turn.role)}: {text}"
        for number, (turn, text) in enumerate(turns, 1)
    )


def build_messages(known: Sequence[Fact], turns: Sequence[tuple[Turn, str]]) -> list[BaseMessage]:
    """The prompt: instructions, the worked example, the numbered turns and the known facts."""
    listed = "\n".join(f"F{i}. {fact.text}" for i, fact in enumerate(known, 1)) or "(none)"
    return [
        SystemMessage(EXTRACTION_SYSTEM),
        HumanMessage(_EXAMPLE_HUMAN),
        AIMessage(_EXAMPLE_REPLY),
        HumanMessage(_HUMAN.format(known=listed, turns=turn_lines(turns))),
    ]


def split_parts(
    turns: Sequence[Turn], room: int, counter: TokenCount
) -> list[list[tuple[Turn, str]]]:
    """Turns as the prompt shows them, in parts of at most ``room`` tokens each.

    A user turn longer than half of ``room`` is shown as its start (an excerpt), an
    assistant turn as at most :data:`_ASSISTANT_TOKENS` tokens; a part without a user turn
    is left out (it holds nothing to learn).
    """
    caps = {"user": max(MIN_EXCERPT_TOKENS, room // 2)}
    other_cap = max(MIN_EXCERPT_TOKENS, min(_ASSISTANT_TOKENS, room // 4))
    parts: list[list[tuple[Turn, str]]] = []
    current: list[tuple[Turn, str]] = []
    used = 0
    for turn in turns:
        text = excerpt(turn.content, "", caps.get(turn.role, other_cap), counter)
        if not text.strip():
            continue
        cost = counter.count(f"[99] {_SPEAKER.get(turn.role, turn.role)}: {text}") + 1
        if current and used + cost > room:
            parts.append(current)
            current, used = [], 0
        current.append((turn, text))
        used += cost
    if current:
        parts.append(current)
    return [part for part in parts if any(turn.role == "user" for turn, _ in part)]
