"""What each user has stored, and how far the background work on it has come.

One function, :func:`memory_status`, read by ``memory-chain status`` and by ``GET
/v1/users/me/status``: per user, the turns stored, how many a summary covers (consolidated,
counted as the memory browser's "N of M consolidated": the highest ``turn_range_end`` of a
conversation's summaries, :func:`~memory_chain.tiers.sql.progress.covered`), how many wait to
be consolidated (those of active conversations, as the background's backlog counts them), how
many wait in the embedding outbox (stored, found by keyword, not yet by meaning), the facts
known, and the date of the newest summary.

Four grouped reads on one connection, no write and no lock beyond the reads' own: it may run
against a database a server is using.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, or_, select

from memory_chain.schemas import as_utc
from memory_chain.tiers.sql.models import conversations, facts, outbox, summaries, turns
from memory_chain.tiers.sql.progress import covered
from memory_chain.tiers.sql.store import SQLStore


@dataclass(frozen=True, slots=True)
class MemoryStatus:
    """One user's memory: what is stored, and what the background has still to do.

    Attributes:
        user_id: The user.
        conversations: Conversations stored (deleted ones left out).
        turns: Turns of those conversations.
        turns_consolidated: Turns a stored summary covers (their facts are learnt).
        turns_to_consolidate: Turns of active conversations no summary covers yet: the
            background consolidates them (``memory-chain consolidate --all`` does it now).
        conversations_to_consolidate: Active conversations with such turns.
        turns_to_embed: Turns queued for tier 3: found by keyword, not yet by meaning
            (``None`` when tier 3 is off and nothing is queued).
        facts: Current facts about the user.
        facts_learnt: Of those, the ones learnt by consolidation (origin ``extracted``).
        last_summary_at: The date of the newest summary (a summary is dated by the last
            turn it covers: for imported history, that turn's own time), ``None`` if none.
    """

    user_id: str
    conversations: int = 0
    turns: int = 0
    turns_consolidated: int = 0
    turns_to_consolidate: int = 0
    conversations_to_consolidate: int = 0
    turns_to_embed: int | None = 0
    facts: int = 0
    facts_learnt: int = 0
    last_summary_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (the date in ISO 8601)."""
        data = asdict(self)
        data["last_summary_at"] = self.last_summary_at.isoformat() if self.last_summary_at else None
        return data


def memory_status(
    store: SQLStore, *, user_id: str | None = None, tier3: bool = True
) -> list[MemoryStatus]:
    """Every user's status (or only ``user_id``'s, zeros when it has nothing), by user id.

    Args:
        store: Tier 2.
        user_id: Only this user.
        tier3: Whether tier 3 is on (off: ``turns_to_embed`` is ``None``).
    """
    with store.database.connect() as conn:
        found: dict[str, dict[str, Any]] = {}
        for read in (_conversations, _to_embed, _facts, _last_summary):
            for row in conn.execute(read(user_id)).mappings():
                owner = row["user_id"] or ""
                found.setdefault(owner, {}).update(
                    {key: value for key, value in row.items() if key != "user_id"}
                )
    if user_id is not None:
        found.setdefault(user_id, {})
    return [_status(owner, values, tier3) for owner, values in sorted(found.items())]


def _status(owner: str, values: dict[str, Any], tier3: bool) -> MemoryStatus:
    # SUM is a decimal on PostgreSQL, an integer on SQLite.
    counts = {key: int(value or 0) for key, value in values.items() if key != "last_summary_at"}
    last = values.get("last_summary_at")
    status = MemoryStatus(user_id=owner, last_summary_at=as_utc(last) if last else None, **counts)
    return status if tier3 else replace(status, turns_to_embed=None)


def _owned(user_id: str | None) -> list[Any]:
    return [] if user_id is None else [conversations.c.user_id == user_id]


def _conversations(user_id: str | None) -> Any:
    ranges = covered()
    through = func.coalesce(ranges.c.covered, 0)
    left = func.coalesce(conversations.c.turn_count, 0) - through
    waiting = and_(conversations.c.status == "active", left > 0)
    return (
        select(
            conversations.c.user_id,
            func.count().label("conversations"),
            func.sum(func.coalesce(conversations.c.turn_count, 0)).label("turns"),
            func.sum(through).label("turns_consolidated"),
            func.sum(case((waiting, left), else_=0)).label("turns_to_consolidate"),
            func.sum(case((waiting, 1), else_=0)).label("conversations_to_consolidate"),
        )
        .outerjoin(ranges, ranges.c.conversation_id == conversations.c.conversation_id)
        .where(
            or_(conversations.c.status.is_(None), conversations.c.status != "deleted"),
            *_owned(user_id),
        )
        .group_by(conversations.c.user_id)
    )


def _to_embed(user_id: str | None) -> Any:
    return (
        select(conversations.c.user_id, func.count().label("turns_to_embed"))
        .select_from(
            outbox.join(turns, turns.c.id == outbox.c.turn_id).join(
                conversations, conversations.c.conversation_id == turns.c.conversation_id
            )
        )
        .where(*_owned(user_id))
        .group_by(conversations.c.user_id)
    )


def _facts(user_id: str | None) -> Any:
    owned = [] if user_id is None else [facts.c.user_id == user_id]
    return (
        select(
            facts.c.user_id,
            func.count().label("facts"),
            func.sum(case((facts.c.origin == "extracted", 1), else_=0)).label("facts_learnt"),
        )
        .where(facts.c.status == "current", *owned)
        .group_by(facts.c.user_id)
    )


def _last_summary(user_id: str | None) -> Any:
    return (
        select(
            conversations.c.user_id,
            func.max(summaries.c.created_at).label("last_summary_at"),
        )
        .select_from(
            summaries.join(
                conversations, conversations.c.conversation_id == summaries.c.conversation_id
            )
        )
        .where(*_owned(user_id))
        .group_by(conversations.c.user_id)
    )


__all__ = ["MemoryStatus", "memory_status"]
