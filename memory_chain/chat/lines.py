"""The words of a chat prompt: its instructions, its headings and a line per memory.

What memory found enters the system message as sections under these headings, one line per
fact or recalled item, each line labelled with when it was said (and, for a recalled item,
who said it and where), so that the model can tell an old fact from a newer one that
contradicts it, and with the dates its relative times name ("yesterday" said on 10 May:
2023-05-09), so that it can say when something happened. :mod:`memory_chain.chat.budget`
decides which lines fit.
"""

from __future__ import annotations

from datetime import datetime

from memory_chain.retrieval.timeframes import resolved_mentions
from memory_chain.schemas import MemoryItem

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


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def memory_line(item: MemoryItem, conversation_id: str) -> str:
    """A recalled item as a line of the prompt: ``- (when, who, where[; note]) text``."""
    return memory_label(item, conversation_id) + item.content


def fact_line(item: MemoryItem) -> str:
    """A fact as a line of the prompt: ``- (when it was told) text``."""
    return fact_label(item) + item.content


def fact_label(item: MemoryItem) -> str:
    """The ``- (when[; "yesterday" = date]) `` that starts a fact's line."""
    return f"- ({_when(item.timestamp)}{_dates(item)}) "


def _dates(item: MemoryItem) -> str:
    """What the relative times of an item's text name, counted from when it was said.

    ``; "yesterday" = 2023-05-09``: a small model asked *when* otherwise answers
    "yesterday" from a turn dated 10 May. Not for summaries (their date is the last turn's).
    """
    if item.kind == "summary":
        return ""
    pairs = resolved_mentions(item.content, item.timestamp)
    return "".join(f'; "{said}" = {named}' for said, named in pairs)


def memory_label(item: MemoryItem, conversation_id: str) -> str:
    """The ``- (when, who, where[; note][; "yesterday" = date]) `` starting a memory's line."""
    where = "this conversation" if item.conversation_id == conversation_id else "another one"
    if item.kind == "summary" and item.turn_range:
        who = f"summary of turns {item.turn_range[0]}-{item.turn_range[1]}"
    elif item.role == "assistant":
        who = "you"
    else:
        who = "the user"
    note = f"; {item.note}" if item.note else ""
    return f"- ({_when(item.timestamp)}, {who}, {where}{note}{_dates(item)}) "


def instructions(system: str) -> str:
    """The prompt's first part: the client's instructions (or the persona) and memory's note."""
    return f"{system or DEFAULT_PERSONA}\n\n{MEMORY_NOTE}"
