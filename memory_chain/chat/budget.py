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
recalled items. Each section is filled within its room by :mod:`memory_chain.chat.sections`
(a long text as an excerpt; which turns, items and facts are kept); the prompt's words (the
instructions, the headings, a line per memory) are :mod:`memory_chain.chat.lines`.

Token counts come from the model's tokenizer where memory_chain has it, else from an
estimate that counts high (:mod:`memory_chain.tokens`); a chat template's role markers are
counted as :data:`~memory_chain.chat.sections.MESSAGE_OVERHEAD` per message and
:data:`PROMPT_OVERHEAD` once.

Example:
    >>> from memory_chain.tokens import EstimatingCounter
    >>> budget = Budget.of(window=2048, max_tokens=None, default_reply=512)
    >>> built = build_prompt(system="", context=context, message="Where do we fly?",
    ...                      budget=budget, counter=EstimatingCounter())  # doctest: +SKIP
    >>> built.tokens <= budget.prompt  # doctest: +SKIP
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from memory_chain.chat.excerpt import MIN_EXCERPT_TOKENS
from memory_chain.chat.lines import (
    DEFAULT_PERSONA,
    FACTS_HEADING,
    MEMORIES_HEADING,
    MEMORY_NOTE,
    SUMMARY_HEADING,
    fact_line,
    instructions,
    memory_line,
)
from memory_chain.chat.sections import MESSAGE_OVERHEAD, Entry, Section, SectionFiller, SectionName
from memory_chain.errors import ContextOverflowError, InvalidInputError
from memory_chain.schemas import MemoryContext
from memory_chain.tokens import TokenCount

#: Tokens a chat template adds once (begin of text, the opening of the reply).
PROMPT_OVERHEAD = 16
#: Shares of what is left that the first sections may take, in filling order (recalled
#: items then take the rest).
SHARES = {"facts": 0.15, "summary": 0.25, "recent": 0.6}

_ROLE_MESSAGES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "assistant": AIMessage,
    "system": SystemMessage,
}


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
    filler = SectionFiller(counter, message)
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


__all__ = [
    "DEFAULT_PERSONA",
    "FACTS_HEADING",
    "MEMORIES_HEADING",
    "MEMORY_NOTE",
    "MESSAGE_OVERHEAD",
    "PROMPT_OVERHEAD",
    "SHARES",
    "SUMMARY_HEADING",
    "Budget",
    "BuiltPrompt",
    "Entry",
    "Section",
    "SectionName",
    "build_prompt",
    "check_fits",
    "fact_line",
    "instructions",
    "memory_line",
]
