"""Bounded growth: purge what the retention settings say is too old, or one too many.

Two limits, both off by default:

* ``memory_retention_days``: a conversation silent for longer than that (its last message, or
  its creation when it has none) is purged;
* ``memory_max_conversations_per_user``: a user's conversations beyond that many, the least
  recently active first, are purged.

A purge is the same as ``DELETE /v1/conversations/{id}?purge=true``: the rows at once, the
points and facts through the tier-3 task queue. :meth:`Retention.sweep` runs on the idle scan
(every ``scan_seconds``), a bounded batch at a time.

Example:
    >>> retention = Retention(manager, days=90, max_per_user=None)  # doctest: +SKIP
    >>> retention.sweep()  # doctest: +SKIP
    3
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from memory_chain.manager import MemoryManager
from memory_chain.schemas import utcnow

logger = logging.getLogger(__name__)

#: Conversations purged per limit and sweep (the next sweep goes on).
BATCH = 200


class Retention:
    """Purges conversations past the retention limits.

    Args:
        manager: Purges through it (every tier).
        days: Longest silence kept, in days (``None``: no limit).
        max_per_user: Most conversations kept per user (``None``: no limit).
    """

    def __init__(
        self, manager: MemoryManager, *, days: float | None, max_per_user: int | None
    ) -> None:
        self.manager = manager
        self.days = days
        self.max_per_user = max_per_user

    @property
    def enabled(self) -> bool:
        """Whether any limit is set."""
        return self.days is not None or self.max_per_user is not None

    def sweep(self, now: datetime | None = None) -> int:
        """Purge up to :data:`BATCH` conversations per limit; how many were purged."""
        store = self.manager.store
        doomed: list[tuple[str, str]] = []
        if self.days is not None:
            cutoff = (now or utcnow()) - timedelta(days=self.days)
            doomed += store.idle_conversations(idle_since=cutoff, limit=BATCH)
        if self.max_per_user is not None:
            doomed += store.over_cap(self.max_per_user, limit=BATCH)
        purged = 0
        for user_id, conversation_id in dict.fromkeys(doomed):
            purged += self.manager.delete_conversation(conversation_id, user_id)
        if purged:
            logger.info("retention purged %d conversations", purged)
        return purged
