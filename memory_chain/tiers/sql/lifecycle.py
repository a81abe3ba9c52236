"""The end of a conversation's life in tier 2: archive, purge, forget a user.

A purge removes the rows (turns, summaries, the turns' places in the embedding outbox, the
conversation's place among the sources of the user's facts, and the facts it leaves with no
source (:mod:`.fact_purge`); every fact of a user forgotten, and every item their agents
kept in the LangGraph store) and, in the same
transaction, queues a ``forget`` task for tier 3 (:mod:`.tasks`): the points leave the
vector store when it is reachable, however long that takes. Until then
retrieval hides them, because it keeps only items whose conversation is still visible in
tier 2 (:meth:`ConversationLifecycle.visible_conversations`).

:class:`ConversationLifecycle` is part of :class:`~memory_chain.tiers.sql.store.SQLStore`;
these methods live here to keep one concern per module.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from functools import cache

from sqlalchemy import (
    Connection,
    Executable,
    bindparam,
    delete,
    func,
    select,
    update,
)

from memory_chain.errors import ConversationNotFoundError
from memory_chain.schemas import STATUSES, ConversationStatus, validate_status
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.fact_purge import forget_conversations
from memory_chain.tiers.sql.fact_writes import facts_lock
from memory_chain.tiers.sql.models import (
    conversations,
    fact_sources,
    facts,
    outbox,
    store_items,
    summaries,
    turns,
)
from memory_chain.tiers.sql.rows import client_id, naive_utc, stored_id
from memory_chain.tiers.sql.tasks import add_task
from memory_chain.tiers.sql.term_stats import TTLCache

#: What retrieval shows by default, and with archived conversations asked for.
ACTIVE: tuple[str, ...] = ("active",)
WITH_ARCHIVED: tuple[str, ...] = ("active", "archived")


#: Statuses as the visibility cache keeps them (a missing or unknown status counts as hidden).
_STATUS_CODES = {status: code for code, status in enumerate(sorted(STATUSES))}
#: Seconds a conversation's status is reused by retrieval. A change made by this process
#: clears the cache at once; one made by another process (a replica, the CLI) shows within it.
STATUS_TTL = 2.0


@cache
def _status_statement() -> Executable:
    # Built once, with bind parameters: retrieval runs it.
    return select(conversations.c.conversation_id, conversations.c.status).where(
        conversations.c.conversation_id.in_(bindparam("keys", expanding=True))
    )


class ConversationLifecycle:
    """Archiving and purging, for :class:`SQLStore` (which provides the attributes below)."""

    database: Database
    queue_embeddings: bool
    #: Statuses by stored id, for :meth:`visible_conversations` (see :data:`STATUS_TTL`).
    statuses: TTLCache[int]

    def set_status(self, conversation_id: str, status: ConversationStatus, *, user_id: str) -> None:
        """Set a conversation's status (``active``, ``archived`` or ``deleted``).

        Retrieval leaves out archived conversations unless asked for them, and never shows
        ``deleted`` ones.
        """
        validate_status(status)

        key = stored_id(user_id, conversation_id)

        def work(conn: Connection) -> None:
            statement = update(conversations).where(conversations.c.conversation_id == key)
            if conn.execute(statement.values(status=status)).rowcount == 0:
                raise ConversationNotFoundError(conversation_id)

        self.database.write(work)
        self.statuses.clear()

    def delete_conversation(self, conversation_id: str, *, user_id: str) -> bool:
        """Purge a conversation: rows and facts said only in it now, points through the queue.

        A fact said in other conversations too stays, sourced in them; the facts a deleted
        fact superseded are re-linked (:mod:`.fact_purge`). The transaction holds the
        user's fact lock, so that a fact change or a consolidation's filing (which checks
        that the conversation exists in its own transaction, holding the lock) runs wholly
        before it or wholly after: the purge wins.

        Returns:
            Whether a conversation was removed.
        """
        key = stored_id(user_id, conversation_id)

        def work(conn: Connection) -> bool:
            owner = select(conversations.c.user_id).where(conversations.c.conversation_id == key)
            if conn.execute(owner.with_for_update()).first() is None:
                return False
            self._purge(conn, [key])
            forget_conversations(conn, user_id, [conversation_id])
            if self.queue_embeddings:
                add_task(conn, "forget", user_id, conversation_id)
            return True

        deleted: bool = self.database.write(work, locks=[facts_lock(user_id)])
        self.statuses.clear()
        return deleted

    def delete_user(self, user_id: str) -> int:
        """Purge every conversation of a user (one ``forget`` task covers their points).

        Their facts (with their sources) and the items their agents kept (``store_items``)
        go in the same transaction, which holds the user's fact lock: a filing of facts
        under way finishes first, and one that starts after finds no conversation.

        Returns:
            How many conversations were removed (0 when there were none: idempotent).
        """

        def work(conn: Connection) -> int:
            owned = select(conversations.c.conversation_id).where(
                conversations.c.user_id == user_id
            )
            ids = list(conn.execute(owned.with_for_update()).scalars())
            if ids:
                self._purge(conn, ids)
            conn.execute(delete(fact_sources).where(fact_sources.c.user_id == user_id))
            conn.execute(delete(facts).where(facts.c.user_id == user_id))
            conn.execute(delete(store_items).where(store_items.c.user_id == user_id))
            if self.queue_embeddings:
                add_task(conn, "forget", user_id)
            return len(ids)

        removed: int = self.database.write(work, locks=[facts_lock(user_id)])
        self.statuses.clear()
        return removed

    @staticmethod
    def _purge(conn: Connection, conversation_ids: list[str]) -> None:
        """Delete the rows of these stored ids (inside the caller's transaction)."""
        for start in range(0, len(conversation_ids), 500):
            chunk = conversation_ids[start : start + 500]
            conn.execute(
                delete(outbox).where(
                    outbox.c.turn_id.in_(
                        select(turns.c.id).where(turns.c.conversation_id.in_(chunk))
                    )
                )
            )
            for table in (turns, summaries):
                conn.execute(delete(table).where(table.c.conversation_id.in_(chunk)))
            conn.execute(delete(conversations).where(conversations.c.conversation_id.in_(chunk)))

    def visible_conversations(
        self,
        user_id: str,
        conversation_ids: Collection[str],
        *,
        statuses: Collection[str] = ACTIVE,
    ) -> set[str]:
        """Which of ``conversation_ids`` exist for ``user_id`` with one of ``statuses``.

        What retrieval checks its candidates against, so that a purged conversation (no row)
        or an archived one (unless asked for) never comes back, even while the vector store
        still holds its points. One indexed lookup of the statuses not cached (statuses are
        kept :data:`STATUS_TTL` seconds; every change this process makes clears them).
        """
        keys = [stored_id(user_id, conversation_id) for conversation_id in set(conversation_ids)]
        if not keys:
            return set()
        known = self.statuses.fresh(keys)
        missing = [key for key in keys if key not in known]
        if missing:
            with self.database.connect() as conn:
                rows = conn.execute(_status_statement(), {"keys": missing}).all()
            found = {row.conversation_id: _STATUS_CODES.get(row.status, -1) for row in rows}
            self.statuses.store(found)  # absent ones are asked again: they may be created
            known.update(found)
        wanted = {_STATUS_CODES[status] for status in statuses}
        return {client_id(str(key)) for key, code in known.items() if code in wanted}

    def idle_conversations(
        self, *, idle_since: datetime, user_id: str | None = None, limit: int = 100
    ) -> list[tuple[str, str]]:
        """``(user_id, conversation_id)`` of conversations silent since ``idle_since``."""
        last = conversations.c.last_message_at
        statement = select(conversations.c.user_id, conversations.c.conversation_id).where(
            (last < naive_utc(idle_since))
            | (last.is_(None) & (conversations.c.created_at < naive_utc(idle_since)))
        )
        if user_id is not None:
            statement = statement.where(conversations.c.user_id == user_id)
        statement = statement.order_by(conversations.c.id).limit(max(limit, 0))
        with self.database.connect() as conn:
            rows = conn.execute(statement).all()
        return [(row.user_id or "", client_id(row.conversation_id)) for row in rows]

    def over_cap(self, max_per_user: int, *, limit: int = 100) -> list[tuple[str, str]]:
        """Each user's conversations beyond their ``max_per_user`` most recently active.

        Returns:
            ``(user_id, conversation_id)`` pairs, the least recently active first.
        """
        recency = func.coalesce(conversations.c.last_message_at, conversations.c.created_at)
        rank = (
            func.row_number()
            .over(
                partition_by=conversations.c.user_id,
                order_by=(recency.desc(), conversations.c.id.desc()),
            )
            .label("rank")
        )
        ranked = select(
            conversations.c.user_id, conversations.c.conversation_id, recency.label("at"), rank
        ).subquery()
        statement = (
            select(ranked.c.user_id, ranked.c.conversation_id)
            .where(ranked.c.rank > max(max_per_user, 0))
            .order_by(ranked.c.at)
            .limit(max(limit, 0))
        )
        with self.database.connect() as conn:
            rows = conn.execute(statement).all()
        return [(row.user_id or "", client_id(row.conversation_id)) for row in rows]
