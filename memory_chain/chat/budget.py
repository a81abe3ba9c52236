"""The context budget: what of memory goes into a prompt that must fit the model's window.

A prompt is the client's instructions (or a default persona) and memory's note, what memory
found (the user's current facts, each dated by when the user told it, the conversation's
running summary, recalled items), the recent turns as messages, and the user's new message.
It must leave room for the reply: the model reads ``window`` tokens in all, ``reserve`` of
them the reply's.

The instructions and the new message go in first, whole (if they cannot fit, the request is
refused with :class:`~memory_chain.errors.ContextOverflowError`). What is left is shared in
order: the facts get up to 15 % of it, the summary up to 25 % of what the facts left, the
recent turns up to 60 % of the rest, the recalled items the remainder; what a section leaves
unused passes on, and what is still unused at the end goes back to the recent turns, then to
recalled items. A long turn, summary or fact enters as an excerpt around what the message
asks (:func:`~memory_chain.chat.excerpt.excerpt`), marked as cut; the stored text stays
whole. Recent turns are kept newest first (older ones are dropped when they do not fit),
recalled items best first (one that does not fit is skipped for smaller ones after it); the
facts most relevant first until the section has less room left than the shortest fact line
counted (those after it are not counted: a profile of thousands costs a prompt the few that
fit).

Token counts come from the model's tokenizer where memory_chain has it, else from an
estimate that counts high (:mod:`memory_chain.tokens`); a chat template's role markers are
counted as :data:`MESSAGE_OVERHEAD` per message and :data:`PROMPT_OVERHEAD` once.

Example:
    >>> from memory_chain.tokens import EstimatingCounter
    >>> budget = Budget.of(window=2048, max_tokens=None, default_reply=512)
    >>> built = build_prompt(system="", context=context, message="Where do we fly?",
    ...                      budget=budget, counter=EstimatingCounter())  # doctest: +SKIP
    >>> built.tokens <= budget.prompt  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from memory_chain.chat.excerpt import MIN_EXCERPT_TOKENS, excerpt
from memory_chain.errors import ContextOverflowError, InvalidInputError
from memory_chain.schemas import MemoryContext, MemoryItem, Turn
from memory_chain.tokens import TokenCount

#: The assistant's persona when the client gives no instructions of its own.
DEFAULT_PERSONA = "You are a helpful assistant."
#: Memory's own instructions, after the client's.
MEMORY_NOTE = (
    "You have a long-term memory of your conversations with this user. Use what you remember "
    "when it helps; say so when you do not know."
)
#: The facts' heading. Each fact is dated (when the user said it): a profile can hold two
#: facts that disagree when extraction missed that one updates the other ("I live in
#: Halvorsby", later "we moved to Quenmouth"), and the date lets the model tell which holds.
FACTS_HEADING = (
    "What you know about the user (with when they told you; of two that disagree, the later holds):"
)
SUMMARY_HEADING = "Summary of this conversation so far:"
MEMORIES_HEADING = "Relevant memories (most relevant first):"

#: Tokens a chat template adds around each message (role markers), counted high: Qwen's,
#: Llama 3's and Gemma's add 5.
MESSAGE_OVERHEAD = 8
#: Tokens a chat template adds once (begin of text, the opening of the reply).
PROMPT_OVERHEAD = 16
#: Shares of what is left that the first sections may take, in filling order (recalled
#: items then take the rest).
SHARES = {"facts": 0.15, "summary": 0.25, "recent": 0.6}
#: A recalled item longer than this share of its section's room enters as an excerpt.
ITEM_SHARE = 0.25
#: Lines counted at a time. The facts section stops once the room it has left is less than
#: the shortest fact line counted: the facts come most relevant first, and a user with
#: thousands of them costs a prompt the few that fit, not the whole profile read for it.
COUNT_BATCH = 8

_ROLE_MESSAGES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "assistant": AIMessage,
    "system": SystemMessage,
}

SectionName = Literal["instructions", "facts", "summary", "recent", "memories", "message"]


@dataclass(frozen=True)
class Budget:
    """The model's window and the part of it kept for the reply.

    Attributes:
        window: Tokens the model reads in all (prompt and reply).
        reserve: Tokens kept for the reply.
    """

    window: int
    reserve: int

    @classmethod
    def of(cls, *, window: int, max_tokens: int | None, default_reply: int) -> Budget:
        """The budget of a request.

        The reply's room is ``max_tokens`` when the client set it, else ``default_reply``
        but at most a quarter of the window.

        Raises:
            InvalidInputError: If ``max_tokens`` leaves no room for a prompt.
        """
        if window < 64:
            raise InvalidInputError(f"a context window of {window} tokens is too small")
        if max_tokens is not None and max_tokens >= window - PROMPT_OVERHEAD:
            raise InvalidInputError(
                f"max_tokens {max_tokens:,} leaves no room for the prompt in the model's "
                f"context window of {window:,} tokens: ask for fewer"
            )
        reserve = max_tokens if max_tokens is not None else min(default_reply, window // 4)
        return cls(window=window, reserve=reserve)

    @property
    def prompt(self) -> int:
        """Tokens the prompt may have."""
        return self.window - self.reserve


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


@dataclass(frozen=True)
class BuiltPrompt:
    """A prompt that fits its budget.

    Attributes:
        messages: For the chat model: one system message, the recent turns, the new message.
        sections: What went in, part by part, with token counts.
        budget: The window and the reply's room.
        tokens: The prompt's tokens as counted (at most ``budget.prompt``).
    """

    messages: list[BaseMessage]
    sections: tuple[Section, ...]
    budget: Budget
    tokens: int = field(default=0)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def memory_line(item: MemoryItem, conversation_id: str) -> str:
    """A recalled item as a line of the prompt: ``- (when, who, where[; note]) text``."""
    return _label(item, conversation_id) + item.content


def fact_line(item: MemoryItem) -> str:
    """A fact as a line of the prompt: ``- (when it was told) text``."""
    return _fact_label(item) + item.content


def _fact_label(item: MemoryItem) -> str:
    return f"- ({_when(item.timestamp)}) "


def _label(item: MemoryItem, conversation_id: str) -> str:
    """The ``(when, who, where[; note])`` of a recalled item's line."""
    where = "this conversation" if item.conversation_id == conversation_id else "another one"
    if item.kind == "summary" and item.turn_range:
        who = f"summary of turns {item.turn_range[0]}-{item.turn_range[1]}"
    elif item.role == "assistant":
        who = "you"
    else:
        who = "the user"
    note = f"; {item.note}" if item.note else ""
    return f"- ({_when(item.timestamp)}, {who}, {where}{note}) "


def instructions(system: str) -> str:
    """The prompt's first part: the client's instructions (or the persona) and memory's note."""
    return f"{system or DEFAULT_PERSONA}\n\n{MEMORY_NOTE}"


def check_fits(
    budget: Budget, counter: TokenCount, head: str, message: str, *, model: str
) -> tuple[int, int]:
    """Check that the instructions and the message fit with the reply's room.

    Returns:
        The tokens of ``head`` and of ``message``.

    Raises:
        ContextOverflowError: If they do not.
    """
    head_tokens, message_tokens = counter.count_many([head, message])
    fixed = head_tokens + message_tokens + 2 * MESSAGE_OVERHEAD + PROMPT_OVERHEAD
    if fixed > budget.prompt:
        raise ContextOverflowError(
            model=model,
            message_tokens=message_tokens,
            system_tokens=fixed - message_tokens,
            window=budget.window,
            reserve=budget.reserve,
        )
    return head_tokens, message_tokens


class _Filler:
    """Fills the sections of one prompt (see the module docstring)."""

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
            labels = [
                _label(item, conversation_id) if name == "memories" else _fact_label(item)
                for item in batch
            ]
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
                    text, cost, cut = label + part, self.counter.count(label + part), True
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


def build_prompt(
    *,
    system: str,
    context: MemoryContext,
    message: str,
    budget: Budget,
    counter: TokenCount,
    model: str = "the model",
) -> BuiltPrompt:
    """The prompt of one chat turn, within ``budget`` (see the module docstring).

    Args:
        system: The client's instructions ('' for the default persona).
        context: What memory found (:meth:`MemoryManager.retrieve
            <memory_chain.manager.MemoryManager.retrieve>`).
        message: The user's new message (also what excerpts are cut around).
        budget: The window and the reply's room.
        counter: Counts tokens as the model does, or higher.
        model: The model's name, for the error message.

    Returns:
        The messages and what went in.

    Raises:
        ContextOverflowError: If the instructions and the message cannot fit.
    """
    head = instructions(system)
    head_tokens, message_tokens = check_fits(budget, counter, head, message, model=model)
    fixed = head_tokens + message_tokens + 2 * MESSAGE_OVERHEAD + PROMPT_OVERHEAD
    filler = _Filler(counter, message)
    facts = list(context.facts)
    recalled = [item for item in context.items if item.kind != "fact"]
    cid = context.conversation_id

    def fill(available: int, recent_extra: int = 0) -> tuple[Section, ...]:
        left = available
        fact_section = filler.lines("facts", FACTS_HEADING, facts, int(left * SHARES["facts"]), cid)
        left -= fact_section.tokens
        summary = filler.summary(context.summary, int(left * SHARES["summary"]), cid)
        left -= summary.tokens
        recent_room = min(left, int(left * SHARES["recent"]) + recent_extra)
        recent = filler.recent(context.recent, recent_room)
        left -= recent.tokens
        memories = filler.lines("memories", MEMORIES_HEADING, recalled, left, cid)
        return fact_section, summary, recent, memories

    available = budget.prompt - fixed
    sections = fill(available)
    unused = available - sum(section.tokens for section in sections)
    recent_short = len(sections[2].entries) < len(context.recent) or any(
        entry.cut for entry in sections[2].entries
    )
    if unused > MIN_EXCERPT_TOKENS and recent_short:
        # Room left at the end goes back to the recent turns that were dropped or cut.
        sections = fill(available, recent_extra=unused)
    fact_section, summary, recent, memories = sections
    parts = [head]
    if fact_section.entries:
        parts.append(FACTS_HEADING + "\n" + "\n".join(e.text for e in fact_section.entries))
    if summary.entries:
        parts.append(f"{SUMMARY_HEADING}\n{summary.entries[0].text}")
    if memories.entries:
        parts.append(MEMORIES_HEADING + "\n" + "\n".join(e.text for e in memories.entries))
    messages: list[BaseMessage] = [SystemMessage("\n\n".join(parts))]
    for entry in recent.entries:
        messages.append(_ROLE_MESSAGES[entry.role or "user"](entry.text))
    messages.append(HumanMessage(message))
    framing = 2 * MESSAGE_OVERHEAD + PROMPT_OVERHEAD
    all_sections = (
        Section("instructions", head_tokens, (Entry(head, head_tokens, "instructions"),)),
        fact_section,
        summary,
        recent,
        memories,
        Section("message", message_tokens, (Entry(message, message_tokens, "message"),), framing),
    )
    total = sum(section.tokens for section in all_sections)
    return BuiltPrompt(messages, all_sections, budget, total)
