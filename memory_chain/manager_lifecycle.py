"""The memory manager's lifecycle path: archive, purge, export, close.

A purge removes a conversation (or a user) from every tier: the rows and facts at once in
tier 2, with a queued task for tier 3 in the same transaction, the cached copy in tier 1,
and the points in tier 3 now if the vector store answers, else when it is back. The export
is the caller's (:data:`UserExport`, given to the manager by whoever wires it, e.g.
:func:`memory_chain.transfer.jsonl.user_export`), so that the manager does not import the
export format.

Part of :class:`~memory_chain.manager.MemoryManager`, which holds the stores this changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from memory_chain.errors import MemoryChainError
from memory_chain.retrieval.search import MemorySearch
from memory_chain.schemas import validate_id
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.vectors.tier import Tier3

logger = logging.getLogger(__name__)


#: Writes a user's conversations, facts and store items as export lines (each with its
#: newline, read as they are consumed), given the user id.
UserExport = Callable[[str], Iterator[str]]


class Lifecycle:
    """Archiving and purging conversations and users, exporting a user, closing."""

    store: SQLStore
    buffer: TurnBuffer
    tier3: Tier3 | None
    memory_search: MemorySearch
    exporter: UserExport | None

    def archive(self, conversation_id: str, user_id: str) -> None:
        """Archive a conversation: retrieval leaves it out unless archived ones are asked for.

        Raises:
            ConversationNotFoundError: If the user has no conversation of this id.
        """
        self.store.set_status(conversation_id, "archived", user_id=user_id)

    def delete_conversation(self, conversation_id: str, user_id: str) -> bool:
        """Purge a conversation from every tier (rows, facts said only in it, cache, points).

        The rows and facts go at once, with a queued task for tier 3 in the same
        transaction; the points go now if the vector store answers, else when it is back.
        Retrieval hides the conversation from the moment its rows are gone.
        """
        deleted = self.store.delete_conversation(conversation_id, user_id=user_id)
        self.buffer.invalidate(conversation_id, user_id=user_id)
        if deleted:
            self._apply_tier3_tasks()
        return deleted

    def delete_user(self, user_id: str) -> int:
        """Purge every conversation of a user from every tier; how many there were."""
        validate_id(user_id, "user id")
        removed = self.store.delete_user(user_id)
        self.buffer.clear_user(user_id)
        self._apply_tier3_tasks()
        return removed

    def _apply_tier3_tasks(self) -> None:
        if self.tier3 is None:
            return
        try:
            self.tier3.apply_tasks()
        except MemoryChainError as exc:
            # Queued in tier 2 with the purge: the backfill does it once the store is back.
            logger.warning("tier 3 is not updated yet (the change stays queued): %s", exc)
            self.tier3.notify()

    def export(self, user_id: str) -> Iterator[str]:
        """The user's conversations, facts and store items as export lines, streamed.

        Raises:
            MemoryChainError: If the manager was built without an ``exporter``.
        """
        if self.exporter is None:
            raise MemoryChainError(
                "this memory manager was built without an exporter: pass "
                "exporter=memory_chain.transfer.user_export(store.engine), or call "
                "memory_chain.transfer.export_lines(engine, user_id=...)"
            )
        return self.exporter(user_id)

    def close(self) -> None:
        """Stop the retrieval's worker threads (the stores are closed by their owners)."""
        self.memory_search.close()


__all__ = ["Lifecycle", "UserExport"]
