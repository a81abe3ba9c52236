"""Claims on tier 2's work queues: each queued item is worked on by one worker at a time.

The tier-3 queues (the embedding outbox, :mod:`.outbox`; the vector task queue,
:mod:`.tasks`) are shared by every process on the database: every replica's backfill thread,
and the command line's ``reindex``. A worker takes items with a *claim*: its id and an expiry
written on the rows it takes, in a short transaction of its own.

- Two workers claiming at once take different rows: on PostgreSQL the rows are chosen with
  ``FOR UPDATE SKIP LOCKED``, so neither waits for the other, and neither takes a row the
  other is claiming.
- A claim is a lease. A worker that dies (SIGKILL, a lost host) leaves its claims to expire
  after :data:`LEASE_SECONDS`; another worker then takes the items. Nothing is lost; an item
  the dead worker had done but not yet settled is done again, which every tier-3 change
  allows (point ids are deterministic, deletions idempotent). Expiry times come from the
  workers' clocks: replicas whose clocks disagree by seconds shorten or lengthen a lease by
  that much.
- A worker settles (removes) an item only while the claim on it is still its own
  (:func:`held_by`): an item whose lease expired and was taken by another worker, or that was
  queued again meanwhile (:data:`UNCLAIMED` clears the claim), stays for whoever holds it
  now.

Leases rather than row locks held for the whole batch: a lock held while a batch is embedded
would make a purge of the same conversation wait for the batch (with the conversation's row
locked, so every write to it would wait too), and a worker that settles several batches at
once would hold a transaction open per batch. On SQLite (one process per database) the same
statements run; a claim costs one small write per batch.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, Table, or_, select, update

from memory_chain.schemas import utcnow
from memory_chain.tiers.sql.rows import naive_utc

#: Seconds a claim lasts. A batch is embedded and settled in about a second; a worker that
#: died is replaced after this long.
LEASE_SECONDS = 30.0
#: Column values of an item nobody holds.
UNCLAIMED: dict[str, Any] = {"claimed_by": None, "claimed_until": None}


def worker_id() -> str:
    """An id for this worker, unique across hosts and restarts.

    Host, process id and a random suffix: a restarted process gets a new id, so it does not
    take its predecessor's claims before they expire.
    """
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class Claimant:
    """Who claims queued items, and for how long.

    Attributes:
        worker: The worker's id (:func:`worker_id` by default).
        lease: Seconds a claim lasts.

    Example:
        >>> Claimant("replica-a", lease=5.0).lease
        5.0
    """

    worker: str = field(default_factory=worker_id)
    lease: float = LEASE_SECONDS


def claim_ids(
    conn: Connection,
    table: Table,
    claimant: Claimant,
    limit: int,
    *,
    exclude: Collection[int] = (),
    where: Sequence[ColumnElement[bool]] = (),
) -> list[int]:
    """Claim up to ``limit`` items of ``table``, the lowest keys first (inside a transaction).

    An item can be claimed when nobody holds it, its claim expired, or ``claimant`` holds it
    already (a batch that failed is taken again at once by the worker that held it).

    Args:
        conn: A connection in a write transaction; the claims commit with it.
        table: The queue (its first primary-key column orders it).
        claimant: Who claims.
        limit: Most items to claim.
        exclude: Keys to leave out (items this worker holds and is still working on).
        where: More conditions the items must meet.

    Returns:
        The claimed keys, in order.
    """
    key: Column[Any] = next(iter(table.primary_key.columns))
    now = naive_utc(utcnow())
    free = or_(
        table.c.claimed_until.is_(None),
        table.c.claimed_until < now,
        table.c.claimed_by == claimant.worker,
    )
    chosen = select(key).where(free, *where).order_by(key).limit(max(limit, 0))
    if exclude:
        chosen = chosen.where(key.not_in(list(exclude)))
    # SKIP LOCKED: rows another worker is claiming right now are passed over, not waited for.
    # SQLite has no row locks (its writers are serialized) and the clause is left out there.
    keys = [int(row[0]) for row in conn.execute(chosen.with_for_update(skip_locked=True))]
    if keys:
        until = now + timedelta(seconds=claimant.lease)
        conn.execute(
            update(table)
            .where(key.in_(keys))
            .values(claimed_by=claimant.worker, claimed_until=until)
        )
    return keys


def held_by(table: Table, claimant: Claimant) -> ColumnElement[bool]:
    """The condition of rows whose claim is ``claimant``'s (what it may settle)."""
    return table.c.claimed_by == claimant.worker
