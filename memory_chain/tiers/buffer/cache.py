"""The tier-1 cache: each conversation's last turns, as turns and as messages, LRU-bounded.

:class:`TurnBuffer` is thread-safe; an entry holds the conversation's last turns, the same
turns as LangChain messages (built once, when a turn enters), its metadata and, when known,
its tier-2 summary state (:class:`CachedSummary`). Filling it from tier 2 and writing through
to it are :mod:`.history`'s.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from memory_chain import metrics
from memory_chain.config import DEFAULT_USER_ID
from memory_chain.messages import to_message
from memory_chain.schemas import ConversationMetadata, Turn


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
