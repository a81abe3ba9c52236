"""The sections of a chat prompt, and how each is filled within the room it is given.

A section (:class:`Section`) is a part of the prompt: the facts, the running summary, the
recent turns or the recalled items; each thing it holds is an :class:`Entry` with its token
count. :class:`SectionFiller` fills one section at a time within a room of tokens that
:func:`~memory_chain.chat.budget.build_prompt` gives it: a text too long for its room enters
as an excerpt around what the message asks (:func:`~memory_chain.chat.excerpt.excerpt`),
marked as cut. Recent turns are kept newest first (older ones are dropped when they do not
fit), recalled items best first (one that does not fit is skipped for smaller ones after it);
the facts most relevant first until the section has less room left than the shortest fact
line counted (those after it are not counted: a profile of thousands costs a prompt the few
that fit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from memory_chain.chat.excerpt import MIN_EXCERPT_TOKENS, excerpt
from memory_chain.chat.lines import SUMMARY_HEADING, fact_label, memory_label
from memory_chain.schemas import MemoryItem, Turn
from memory_chain.tokens import TokenCount

#: Tokens a chat template adds around each message (role markers), counted high: Qwen's,
#: Llama 3's and Gemma's add 5.
MESSAGE_OVERHEAD = 8
#: A recalled item longer than this share of its section's room enters as an excerpt.
ITEM_SHARE = 0.25
#: Lines counted at a time. The facts section stops once the room it has left is less than
#: the shortest fact line counted: the facts come most relevant first, and a user with
#: thousands of them costs a prompt the few that fit, not the whole profile read for it.
COUNT_BATCH = 8

SectionName = Literal["instructions", "facts", "summary", "recent", "memories", "message"]


@dataclass(frozen=True)
class Entry:
    """One thing a section of the prompt holds.

    Attributes:
        text: As it enters the prompt (an excerpt when ``cut``).
        tokens: Its count, as the budget counted it.
        kind: ``"instructions"``, ``"fact"``, ``"summary"``, ``"turn"`` or ``"message"``.
        conversation_id: Where it comes from (turns, summaries, facts).
        turn_number: The turn's number (turns and facts).
        role: Who said it (turns).
        cut: Whether it is an excerpt of a longer text.
    """

    text: str
    tokens: int
    kind: str
    conversation_id: str | None = None
    turn_number: int | None = None
    role: str | None = None
    cut: bool = False


@dataclass(frozen=True)
class Section:
    """A part of the prompt: what it holds and the tokens it could have had."""

    name: SectionName
    room: int
    entries: tuple[Entry, ...] = ()
    #: Tokens of the heading, separators and message overheads.
    framing: int = 0

    @property
    def tokens(self) -> int:
        """Tokens the section takes, framing included."""
        return self.framing + sum(entry.tokens for entry in self.entries)


def _label(name: SectionName, item: MemoryItem, conversation_id: str) -> str:
    """The label that starts an item's line in section ``name``."""
    return memory_label(item, conversation_id) if name == "memories" else fact_label(item)


class SectionFiller:
    """Fills the sections of one prompt, each within the room it is given.

    Args:
        counter: Counts tokens as the model does, or higher.
        query: The user's new message: what a text too long for its room is cut around.
    """

    def __init__(self, counter: TokenCount, query: str) -> None:
        self.counter = counter
        self.query = query

    def fit(self, text: str, room: int, *, prefer: Literal["head", "tail"] = "head") -> str:
        """``text`` whole, or an excerpt of it within ``room`` tokens ('' when none fits)."""
        if room < MIN_EXCERPT_TOKENS:
            return text if self.counter.count(text) <= room else ""
        return excerpt(text, self.query, room, self.counter, prefer=prefer)

    def lines(
        self,
        name: SectionName,
        heading: str,
        items: Sequence[MemoryItem],
        room: int,
        conversation_id: str,
    ) -> Section:
        """A section of ``- (label) text`` lines under a heading, best items first."""
        framing = self.counter.count(heading) + 2  # the heading and the blank line before it
        if not items or room <= framing + MIN_EXCERPT_TOKENS // 2:
            return Section(name, room)
        left = room - framing
        item_cap = max(int(left * ITEM_SHARE), 4 * MIN_EXCERPT_TOKENS)
        entries: list[Entry] = []
        shortest: int | None = None
        for start in range(0, len(items), COUNT_BATCH):
            if name == "facts" and shortest is not None and left < shortest + 1:
                break  # full: the facts left, the least relevant, are not even counted
            batch = items[start : start + COUNT_BATCH]
            labels = [_label(name, item, conversation_id) for item in batch]
            whole = self.counter.count_many(
                [label + item.content for label, item in zip(labels, batch, strict=True)]
            )
            shortest = min(whole) if shortest is None else min(shortest, *whole)
            for item, label, whole_cost in zip(batch, labels, whole, strict=True):
                text, cost, cut = label + item.content, whole_cost, False
                if cost + 1 > left or cost > item_cap:
                    label_cost = self.counter.count(label)
                    part = self.fit(item.content, min(left, item_cap) - label_cost - 1)
                    if not part or part == item.content:
                        continue
                    # The label's dates are those of the words shown (an expression cut out
                    # names no date).
                    shown = _label(name, replace(item, content=part), conversation_id) + part
                    text, cost, cut = shown, self.counter.count(shown), True
                    if cost + 1 > left:
                        continue
                left -= cost + 1  # the line and its newline
                entries.append(
                    Entry(
                        text,
                        cost + 1,
                        item.kind,
                        item.conversation_id,
                        item.turn_number,
                        item.role,
                        cut,
                    )
                )
        if not entries:
            return Section(name, room)
        return Section(name, room, tuple(entries), framing)

    def summary(self, text: str | None, room: int, conversation_id: str) -> Section:
        """The running summary, its end kept when it must be cut."""
        framing = self.counter.count(SUMMARY_HEADING) + 3
        if not text or room <= framing + MIN_EXCERPT_TOKENS // 2:
            return Section("summary", room)
        part = self.fit(text, room - framing, prefer="tail")
        if not part:
            return Section("summary", room)
        entry = Entry(part, self.counter.count(part), "summary", conversation_id, cut=part != text)
        return Section("summary", room, (entry,), framing)

    def recent(self, turns: Sequence[Turn], room: int) -> Section:
        """The newest turns that fit, a long one as an excerpt; in the order they were said."""
        costs = self.counter.count_many([turn.content for turn in turns])
        left = room
        kept: list[Entry] = []
        for turn, whole_cost in zip(reversed(turns), reversed(costs), strict=True):
            text, cost, cut = turn.content, whole_cost, False
            if cost + MESSAGE_OVERHEAD > left:
                # The newest turn may take all that is left, an older one half of it.
                room_for = left - MESSAGE_OVERHEAD
                part = self.fit(turn.content, room_for if not kept else room_for // 2)
                if not part or room_for < MIN_EXCERPT_TOKENS:
                    break
                text, cost, cut = part, self.counter.count(part), True
                if cost + MESSAGE_OVERHEAD > left:
                    break
            left -= cost + MESSAGE_OVERHEAD
            kept.append(
                Entry(
                    text,
                    cost + MESSAGE_OVERHEAD,
                    "turn",
                    turn.conversation_id,
                    turn.turn_number,
                    turn.role,
                    cut,
                )
            )
        return Section("recent", room, tuple(reversed(kept)))
