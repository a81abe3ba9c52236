"""Plain data types shared by every tier, and the checks that guard what gets stored.

The types are frozen slotted dataclasses: tier 1 keeps them in memory by the thousand and the
hot path reads them in microseconds, so they carry no validation cost of their own. Input is
checked once, on the way in, by :func:`validate_new_turns`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, get_args

from memory_chain.errors import InvalidInputError
from memory_chain.storable import check_stored_int, check_text

Role = Literal["user", "assistant", "system"]
ROLES: frozenset[str] = frozenset(get_args(Role))
ConversationStatus = Literal["active", "archived", "deleted"]
STATUSES: frozenset[str] = frozenset(get_args(ConversationStatus))

#: Marks where text was left out (a prompt's excerpt, a long turn's indexed part).
CUT = "[…]"

#: Conversation and user ids: 1-128 characters, letters, digits and ``._:@-``, starting with a
#: letter or digit. UUIDs, Open WebUI chat ids and e-mail-like user names all fit; path
#: separators, whitespace and control characters do not.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts of one turn (its ``tokens`` object in exports and the API)."""

    total: int
    prompt: int | None = None
    completion: int | None = None


@dataclass(frozen=True, slots=True)
class NewTurn:
    """A turn to be stored: the turn number is assigned by tier 2 when it is written."""

    role: Role
    content: str
    timestamp: datetime | None = None
    tokens: TokenUsage | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """A stored turn: one ``conversation_turns`` row, and a turn in the tier-1 buffer."""

    conversation_id: str
    turn_number: int
    role: Role
    content: str
    timestamp: datetime
    tokens: TokenUsage | None = None

    @property
    def content_tokens(self) -> int:
        """Tokens of the turn's own text, 0 when unknown.

        A reply's ``tokens.total`` is what the model reported for the call (its prompt, with
        the memory context, plus its completion: what a bill counts); the reply's own text is
        the completion. Every other turn's ``tokens.total`` is its text counted. The
        consolidation trigger and ``conversations.total_tokens`` sum this, not the bill.
        """
        if self.tokens is None:
            return 0
        if self.tokens.completion is not None:
            return self.tokens.completion
        return self.tokens.total


@dataclass(slots=True)
class ConversationMetadata:
    """What tier 1 keeps about a conversation besides its turns."""

    created_at: datetime
    last_updated: datetime
    turn_count: int = 0
    total_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """One ``conversations`` row."""

    conversation_id: str
    user_id: str | None
    created_at: datetime
    last_message_at: datetime | None
    turn_count: int
    total_tokens: int
    summary: str | None
    status: str


@dataclass(frozen=True, slots=True)
class Summary:
    """One ``conversation_summaries`` row: the summary of turns ``start..end`` (inclusive)."""

    conversation_id: str
    summary_text: str
    turn_range_start: int
    turn_range_end: int
    created_at: datetime
    token_count: int | None = None


@dataclass(frozen=True, slots=True)
class KeywordHit:
    """A keyword-search result from tier 2.

    ``score`` is higher for a better match; it is comparable within one result list only.
    A ``turn`` hit has ``turn_number``; a ``summary`` hit has ``turn_range``.
    """

    kind: Literal["turn", "summary"]
    conversation_id: str
    text: str
    score: float
    timestamp: datetime
    turn_number: int | None = None
    role: Role | None = None
    turn_range: tuple[int, int] | None = None
    extra: dict[str, object] = field(default_factory=dict)


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime (naive values are taken to be UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def validate_id(value: object, what: str = "conversation id") -> str:
    """Check a conversation or user id.

    Args:
        value: The id to check.
        what: How to name the id in the error message.

    Returns:
        The id, unchanged.

    Raises:
        InvalidInputError: If the id is not a string of 1-128 allowed characters.
    """
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise InvalidInputError(
            f"invalid {what} {shown}: use 1-128 characters from letters, digits and '._:@-', "
            "starting with a letter or digit"
        )
    return value


def validate_status(value: str) -> str:
    """Check a conversation status (``active``, ``archived`` or ``deleted``).

    Raises:
        InvalidInputError: If it is none of them.
    """
    if value not in STATUSES:
        raise InvalidInputError(f"unknown status {value!r}: use one of {sorted(STATUSES)}")
    return value


def without_empty(turns: Sequence[NewTurn]) -> list[NewTurn]:
    """The turns that have text: an empty (or whitespace-only) message is left out.

    Exports and clients send empty messages (a failed reply, an image without a caption);
    one of them is no reason to refuse the others. Content that is not text is kept, for
    :func:`validate_new_turns` to refuse.
    """
    return [t for t in turns if not isinstance(t.content, str) or t.content.strip()]


def validate_new_turns(turns: Sequence[NewTurn], *, max_chars: int) -> None:
    """Check a batch of turns before anything is written.

    Args:
        turns: The turns to store.
        max_chars: Longest accepted content, in characters.

    Raises:
        InvalidInputError: On an empty batch, an unknown role, empty or oversize content,
            text no database keeps (a NUL character, an unpaired surrogate:
            :func:`~memory_chain.storable.check_text`), or token counts that are negative or
            past an ``INTEGER`` column's range.
    """
    if not turns:
        raise InvalidInputError("no turns to store: pass at least one message")
    for index, turn in enumerate(turns):
        where = f"message {index}"
        if turn.role not in ROLES:
            raise InvalidInputError(
                f"{where}: unknown role {turn.role!r}: use one of {sorted(ROLES)}"
            )
        if not isinstance(turn.content, str):
            raise InvalidInputError(f"{where}: content must be text, got {type(turn.content)}")
        if not turn.content.strip():
            raise InvalidInputError(f"{where}: content is empty: send some text")
        if len(turn.content) > max_chars:
            raise InvalidInputError(
                f"{where}: content has {len(turn.content):,} characters, more than the "
                f"{max_chars:,} allowed: shorten it or raise max_message_chars"
            )
        check_text(turn.content, f"{where}: content")
        if turn.tokens is not None:
            counts = (turn.tokens.total, turn.tokens.prompt or 0, turn.tokens.completion or 0)
            if min(counts) < 0:
                raise InvalidInputError(f"{where}: token counts must not be negative")
            for count in counts:
                check_stored_int(count, f"{where}: a token count")


MemoryTier = Literal["tier1", "tier2", "tier3", "facts"]


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One remembered thing in a memory context.

    ``tier`` says where it came from (tier 2 keyword hits are turns or summaries, tier 3
    semantic hits are turns, ``facts`` are what memory knows about the user). ``score`` is
    the fused score (:mod:`memory_chain.retrieval.fusion`: keyword score and cosine
    combined): higher is more relevant, comparable within one context only. ``note`` is
    what the prompt says of the item beside it (a recalled turn that stated a fact since
    superseded: :mod:`memory_chain.facts.outdated`).
    """

    tier: MemoryTier
    kind: Literal["turn", "summary", "fact"]
    conversation_id: str
    content: str
    timestamp: datetime
    score: float
    turn_number: int | None = None
    role: Role | None = None
    turn_range: tuple[int, int] | None = None
    sources: tuple[str, ...] = ()
    note: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryContext:
    """What memory knows for one request: summary, recent turns, relevant items, facts.

    ``facts`` are the user's current facts, most relevant first (their own prompt section);
    ``items`` what retrieval found in the user's conversations.
    """

    conversation_id: str
    user_id: str
    summary: str | None
    recent: tuple[Turn, ...]
    items: tuple[MemoryItem, ...]
    degraded: tuple[str, ...] = ()
    facts: tuple[MemoryItem, ...] = ()
