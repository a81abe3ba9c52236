"""Tier 1: working memory, an in-process cache of each conversation's last turns.

:class:`TurnBuffer` keeps the last ``max_turns`` turns of at most ``max_conversations``
conversations (least recently used evicted first), with each conversation's metadata. It is
a cache of tier 2: :class:`BufferChatMessageHistory` fills it from SQL on a miss and writes
every new turn through to SQL before caching it, so losing the buffer (a restart, an eviction)
loses nothing.

Reads return ready-made LangChain messages (built once, when a turn enters the buffer), which
keeps a read to a dictionary lookup and a list copy. An entry may also cache the conversation's
tier-2 summary state (:class:`CachedSummary`: the running summary and the last summarized
turn), so that a request on a cached conversation reads no SQL at all; consolidation updates it
when it stores a summary.

Example:
    >>> from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
    >>> buffer = TurnBuffer(max_turns=10, max_conversations=100)
    >>> history = BufferChatMessageHistory(buffer, "conv-1")  # no SQL: a plain buffer
    >>> history.add_user_message("hi")
    >>> [m.content for m in history.messages]
    ['hi']
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from memory_chain import metrics
from memory_chain.config import DEFAULT_USER_ID
from memory_chain.deprecation import warn_history_deprecated
from memory_chain.messages import to_message, to_new_turns
from memory_chain.schemas import (
    ConversationInfo,
    ConversationMetadata,
    NewTurn,
    Turn,
    as_utc,
    utcnow,
    validate_id,
    validate_new_turns,
)
from memory_chain.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class CachedSummary:
    """A conversation's tier-2 summary state, cached in tier 1.

    Attributes:
        text: The running summary (``None`` before the first consolidation).
        through: The last turn a stored summary covers (0 when none).
    """

    text: str | None
    through: int


@dataclass(slots=True)
class _Entry:
    user_id: str
    turns: deque[Turn]
    messages: deque[BaseMessage]
    metadata: ConversationMetadata
    summary: CachedSummary | None = None


class TurnBuffer:
    """A bounded, thread-safe LRU cache of recent turns per conversation.

    Args:
        max_turns: Turns kept per conversation (``memory_tier1_max_turns`` in the settings).
        max_conversations: Conversations kept; the least recently used is evicted first.
    """

    def __init__(self, max_turns: int = 10, max_conversations: int = 1_000) -> None:
        if max_turns < 1 or max_conversations < 1:
            raise ValueError("max_turns and max_conversations must be at least 1")
        self.max_turns = max_turns
        self.max_conversations = max_conversations
        # Keyed by (user, conversation): conversation ids are each user's own.
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        # Bumped by every authoritative summary write; a fill read from SQL before a bump
        # may be stale and is not cached (see set_summary).
        self._summary_epoch = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, conversation: object) -> bool:
        """``(user_id, conversation_id)``, or a conversation id of the default user."""
        key = conversation if isinstance(conversation, tuple) else (DEFAULT_USER_ID, conversation)
        return key in self._entries

    def _touch(self, conversation_id: str, user_id: str) -> _Entry | None:
        key = (user_id, conversation_id)
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def get(self, conversation_id: str, user_id: str = DEFAULT_USER_ID) -> list[Turn] | None:
        """The cached turns, oldest first, or ``None`` on a miss."""
        with metrics.retrieval_timer("tier1"), self._lock:
            entry = self._touch(conversation_id, user_id)
            metrics.tier1_lookup(hit=entry is not None)
            return list(entry.turns) if entry is not None else None

    def get_messages(
        self, conversation_id: str, user_id: str = DEFAULT_USER_ID
    ) -> list[BaseMessage] | None:
        """The cached turns as LangChain messages, or ``None`` on a miss."""
        with self._lock:
            entry = self._touch(conversation_id, user_id)
            return list(entry.messages) if entry is not None else None

    def metadata(
        self, conversation_id: str, user_id: str = DEFAULT_USER_ID
    ) -> ConversationMetadata | None:
        """A copy of the conversation's metadata, or ``None`` on a miss."""
        with self._lock:
            entry = self._entries.get((user_id, conversation_id))
            if entry is None:
                return None
            meta = entry.metadata
            return ConversationMetadata(
                meta.created_at, meta.last_updated, meta.turn_count, meta.total_tokens
            )

    def summary(self, conversation_id: str, user_id: str = DEFAULT_USER_ID) -> CachedSummary | None:
        """The cached summary state, or ``None`` if the conversation or its state is not cached."""
        with self._lock:
            entry = self._touch(conversation_id, user_id)
            return entry.summary if entry is not None else None

    @property
    def summary_epoch(self) -> int:
        """Take this before reading a summary from SQL; pass it to :meth:`set_summary`."""
        return self._summary_epoch

    def set_summary(
        self,
        conversation_id: str,
        summary: CachedSummary,
        *,
        user_id: str = DEFAULT_USER_ID,
        epoch: int | None = None,
    ) -> None:
        """Cache a conversation's summary state (kept only while the conversation is cached).

        Args:
            conversation_id: The conversation.
            summary: Its state.
            user_id: Its owner.
            epoch: ``None`` for an authoritative write (this process just stored the summary);
                for a fill read from SQL, :attr:`summary_epoch` taken before the read: the fill
                is dropped if a summary was written since, as it may be older.
        """
        with self._lock:
            if epoch is None:
                self._summary_epoch += 1
            elif epoch != self._summary_epoch:
                return
            entry = self._entries.get((user_id, conversation_id))
            if entry is not None and (
                entry.summary is None or entry.summary.through <= summary.through
            ):
                entry.summary = summary

    def put(
        self,
        conversation_id: str,
        turns: Sequence[Turn],
        metadata: ConversationMetadata,
        *,
        user_id: str = DEFAULT_USER_ID,
    ) -> None:
        """Cache a conversation's latest turns (e.g. loaded from tier 2), replacing any entry."""
        kept = list(turns)[-self.max_turns :]
        entry = _Entry(
            user_id=user_id,
            turns=deque(kept, maxlen=self.max_turns),
            messages=deque((to_message(turn) for turn in kept), maxlen=self.max_turns),
            metadata=metadata,
        )
        key = (user_id, conversation_id)
        with self._lock:
            current = self._entries.get(key)
            # A load racing a write must not replace newer cached turns with older ones.
            if current is None or current.metadata.turn_count <= metadata.turn_count:
                if current is not None:
                    entry.summary = current.summary
                self._entries[key] = entry
            self._entries.move_to_end(key)
            self._evict()

    def _evict(self) -> None:
        while len(self._entries) > self.max_conversations:
            self._entries.popitem(last=False)

    def extend(
        self, conversation_id: str, turns: Sequence[Turn], *, user_id: str = DEFAULT_USER_ID
    ) -> None:
        """Add turns just stored in tier 2.

        Turns already cached are skipped. A conversation that is not cached is cached only if
        these turns start it (turn 1); otherwise the next read loads it from tier 2. If the
        turns do not follow the cached ones (another writer got in between), the entry is
        dropped and rebuilt from tier 2 on the next read.
        """
        ordered = sorted(turns, key=lambda turn: turn.turn_number)
        if not ordered:
            return
        key = (user_id, conversation_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                if ordered[0].turn_number != 1:
                    return
                first = ordered[0].timestamp
                entry = _Entry(
                    user_id=user_id,
                    turns=deque(maxlen=self.max_turns),
                    messages=deque(maxlen=self.max_turns),
                    metadata=ConversationMetadata(created_at=first, last_updated=first),
                    summary=CachedSummary(None, 0),  # a new conversation has no summary yet
                )
                self._entries[key] = entry
            last = entry.metadata.turn_count
            for turn in ordered:
                if turn.turn_number <= last:
                    continue
                if turn.turn_number != last + 1:
                    del self._entries[key]
                    return
                entry.turns.append(turn)
                entry.messages.append(to_message(turn))
                entry.metadata.turn_count = last = turn.turn_number
                entry.metadata.total_tokens += turn.content_tokens
                entry.metadata.last_updated = max(entry.metadata.last_updated, turn.timestamp)
            self._entries.move_to_end(key)
            self._evict()

    def prune(
        self, conversation_id: str, keep_last: int, *, user_id: str = DEFAULT_USER_ID
    ) -> None:
        """Keep only the last ``keep_last`` turns of a conversation (after consolidation)."""
        with self._lock:
            entry = self._entries.get((user_id, conversation_id))
            if entry is None:
                return
            drop = max(len(entry.turns) - max(keep_last, 0), 0)
            for _ in range(drop):
                entry.turns.popleft()
                entry.messages.popleft()

    def invalidate(self, conversation_id: str, *, user_id: str = DEFAULT_USER_ID) -> None:
        """Forget a conversation (the next read reloads it)."""
        with self._lock:
            self._entries.pop((user_id, conversation_id), None)

    def clear_user(self, user_id: str) -> None:
        """Forget every conversation of a user."""
        with self._lock:
            for key in [key for key in self._entries if key[0] == user_id]:
                del self._entries[key]

    def clear(self) -> None:
        """Forget every conversation."""
        with self._lock:
            self._entries.clear()


class TurnSource(Protocol):
    """What tier 1 needs from tier 2 (``SQLStore`` provides it)."""

    def append_turns(
        self, conversation_id: str, new_turns: Sequence[NewTurn], *, user_id: str = ...
    ) -> list[Turn]:
        """Store turns and return them numbered."""
        ...

    def recent_turns(self, conversation_id: str, count: int, *, user_id: str) -> list[Turn]:
        """The last ``count`` turns, oldest first."""
        ...

    def get_conversation(self, conversation_id: str, *, user_id: str) -> ConversationInfo | None:
        """A conversation's row."""
        ...

    def delete_conversation(self, conversation_id: str, *, user_id: str) -> bool:
        """Remove a conversation."""
        ...


def load_into(
    buffer: TurnBuffer,
    source: TurnSource,
    conversation_id: str,
    user_id: str,
    *,
    limit: int | None = None,
) -> list[BaseMessage]:
    """Fill the buffer from tier 2 and return the conversation's cached messages.

    Args:
        buffer: Tier 1.
        source: Tier 2.
        conversation_id: The conversation.
        user_id: Its owner.
        limit: Load at most this many of the last turns (never more than the buffer holds);
            the memory manager passes what consolidation left in tier 1.
    """
    info = source.get_conversation(conversation_id, user_id=user_id)
    if info is None:
        return []
    count = buffer.max_turns if limit is None else max(0, min(limit, buffer.max_turns))
    recent = source.recent_turns(conversation_id, count, user_id=user_id)
    metadata = ConversationMetadata(
        created_at=info.created_at,
        last_updated=info.last_message_at or info.created_at,
        turn_count=recent[-1].turn_number if recent else info.turn_count,
        total_tokens=info.total_tokens,
    )
    buffer.put(conversation_id, recent, metadata, user_id=user_id)
    cached = buffer.get_messages(conversation_id, user_id)
    # None only if a tiny buffer evicted the entry at once.
    return cached if cached is not None else [to_message(turn) for turn in recent]


class BufferChatMessageHistory(BaseChatMessageHistory):
    """Tier-1 chat history: the last turns of one conversation, from the buffer.

    With a ``source`` (tier 2) it is a write-through cache: new messages are stored in SQL
    first, then cached; a miss reloads the last turns from SQL. Without one it is a plain
    in-memory buffer (turn numbers assigned locally), useful in notebooks and tests.

    Building one warns (``LangChainDeprecationWarning``): langchain-core deprecated chat
    histories; it works on langchain-core 1.x (:mod:`memory_chain.deprecation`).

    Args:
        buffer: The shared :class:`TurnBuffer`.
        conversation_id: The conversation.
        source: Tier 2, or ``None`` for a memory-only buffer.
        user_id: Owner of the conversation.
        counter: Counts tokens of messages without model-reported usage.
        max_message_chars: Longest content accepted without a source (the source has its own).
    """

    def __init__(
        self,
        buffer: TurnBuffer,
        conversation_id: str,
        *,
        source: TurnSource | None = None,
        user_id: str = DEFAULT_USER_ID,
        counter: TokenCounter | None = None,
        max_message_chars: int = 200_000,
    ) -> None:
        warn_history_deprecated("BufferChatMessageHistory")
        self.buffer = buffer
        self.conversation_id = validate_id(conversation_id)
        self.user_id = validate_id(user_id, "user id")
        self.source = source
        self.counter = counter
        self.max_message_chars = max_message_chars
        self._local_lock = threading.Lock()

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The last turns of the conversation, oldest first."""
        cached = self.buffer.get_messages(self.conversation_id, self.user_id)
        if cached is not None:
            return cached
        if self.source is None:
            return []
        return load_into(self.buffer, self.source, self.conversation_id, self.user_id)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages (in tier 2 first when there is a source), then cache them."""
        new_turns = to_new_turns(messages, self.counter)
        if self.source is not None:
            stored = self.source.append_turns(self.conversation_id, new_turns, user_id=self.user_id)
            self.buffer.extend(self.conversation_id, stored, user_id=self.user_id)
            return
        validate_new_turns(new_turns, max_chars=self.max_message_chars)
        with self._local_lock:
            meta = self.buffer.metadata(self.conversation_id, self.user_id)
            last = meta.turn_count if meta else 0
            now = utcnow()
            stored = [
                Turn(
                    conversation_id=self.conversation_id,
                    turn_number=last + offset + 1,
                    role=turn.role,
                    content=turn.content,
                    timestamp=as_utc(turn.timestamp) if turn.timestamp else now,
                    tokens=turn.tokens,
                )
                for offset, turn in enumerate(new_turns)
            ]
            self.buffer.extend(self.conversation_id, stored, user_id=self.user_id)

    def clear(self) -> None:
        """Forget the conversation here and, with a source, delete it from tier 2."""
        self.buffer.invalidate(self.conversation_id, user_id=self.user_id)
        if self.source is not None:
            self.source.delete_conversation(self.conversation_id, user_id=self.user_id)
