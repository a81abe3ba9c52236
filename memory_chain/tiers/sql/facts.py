"""The users' facts in tier 2, the source of truth: add, put, edit, dismiss, forget, restore.

Each fact is a row of ``facts`` (migrations 0010, 0013) with its vector beside it. Without
an embedding model the facts are kept and listed all the same, reconciled and ranked by their
words and dates only. :class:`FactStore` is built from one class per concern:

- reading them (list, history, the profile ranked for a prompt): :mod:`.fact_reads`;
- changing them (add, add what a range of a conversation said, edit, dismiss, forget), each
  change decided by :mod:`memory_chain.facts.rules` in one transaction holding the user's
  lock, within the user's limit of current facts: :mod:`.fact_changes`;
- the same by a client's store key (put, get, dismiss): :mod:`.fact_by_key`;
- and, here, what concerns many facts at once: an import (:meth:`FactStore.restore`), the
  background embedding of facts stored without a vector (:meth:`FactStore.embed_pending`),
  and the deletion of a user's facts.

Each conversation a fact was said in is kept (:mod:`.fact_sources`); only a purge of the
last of them, or of the user, deletes a fact (:mod:`.fact_purge`).

Example:
    >>> facts = FactStore(store.database, embed=embeddings.embed_documents)  # doctest: +SKIP
    >>> facts.add("ana", FactDraft("My wife is Ana", kind="relationship")).action  # doctest: +SKIP
    'added'
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, delete, insert, select

from memory_chain.facts.checks import checked_kind, checked_text
from memory_chain.facts.model import Fact
from memory_chain.schemas import validate_id
from memory_chain.tiers.sql.fact_adds import check_room, count_current
from memory_chain.tiers.sql.fact_by_key import FactsByKey
from memory_chain.tiers.sql.fact_sources import add_sources
from memory_chain.tiers.sql.fact_vectors import EMBED_BATCH, embed_pending
from memory_chain.tiers.sql.fact_writes import fact_values
from memory_chain.tiers.sql.models import fact_sources, facts
from memory_chain.tiers.sql.rows import in_chunks


class FactStore(FactsByKey):
    """The users' facts: read, changed, by store key, and imported (see the module's docstring).

    Creating one does no I/O.

    Args:
        database: Tier 2.
        embed: Embeds texts for reconciliation and ranking (``None``: words and dates
            only).
        max_facts: The most current facts a user may have: a change that would add one
            more is refused (:class:`~memory_chain.errors.FactLimitError`), whoever asks.
            History (superseded and dismissed facts) is not counted.
        cache_bytes: Most bytes of users' current fact vectors kept between reads.
    """

    # -- export and import -----------------------------------------------------------------

    def restore(self, facts_: Sequence[Fact]) -> int:
        """Store facts as they were exported (ids, statuses, dates and sources kept; no vectors).

        A fact read without sources (a file written before they were exported) gets the
        one its ``conversation_id`` and turns name.

        A fact whose id is stored already is left as it is (an import is idempotent). The
        transaction holds the lock of every user whose facts it stores. The facts are
        embedded later, in the background (:meth:`embed_pending`).

        Returns:
            How many were stored.

        Raises:
            FactLimitError: The current facts among them would take a user past
                :attr:`max_facts` (nothing is stored).
        """
        if not facts_:
            return 0
        for fact in facts_:
            validate_id(fact.user_id, "user id")
            checked_text(fact.text)
            checked_kind(fact.kind)

        def work(conn: Connection) -> int:
            known: set[str] = set()
            for chunk in in_chunks([fact.id for fact in facts_]):
                known.update(
                    conn.execute(select(facts.c.id).where(facts.c.id.in_(chunk))).scalars()
                )
            fresh = [fact for fact in facts_ if fact.id not in known]
            adding: dict[str, int] = {}
            for fact in fresh:
                if fact.current:
                    adding[fact.user_id] = adding.get(fact.user_id, 0) + 1
            for user_id, current in count_current(conn, adding).items():
                check_room(user_id, current, adding[user_id], self.max_facts, origin="import")
            if fresh:
                conn.execute(insert(facts), [fact_values(fact, None) for fact in fresh])
            for fact in fresh:
                add_sources(conn, fact)
            return len(fresh)

        return self._write({fact.user_id for fact in facts_}, work)

    def embed_pending(self, batch: int = EMBED_BATCH) -> int:
        """Embed up to ``batch`` current facts stored without a vector (any user's).

        Run by the tier-3 backfill thread (:mod:`.fact_vectors`), never by a request.

        Returns:
            How many were embedded (0 without an embedding model).
        """
        if self.embed is None:
            return 0
        return embed_pending(self.database, self.embed, batch=batch)

    def delete_user(self, user_id: str) -> int:
        """Delete every fact of a user (rows, history included); how many there were."""

        def work(conn: Connection) -> int:
            conn.execute(delete(fact_sources).where(fact_sources.c.user_id == user_id))
            return int(conn.execute(delete(facts).where(facts.c.user_id == user_id)).rowcount)

        return self._write([user_id], work)
