"""Read what a memory_chain server left: its SQLite (or PostgreSQL) database, embedded index.

The fault tests read the stores of a stopped (or killed) server directly, with ``sqlite3``
and the embedded index, rather than through the API of the process under test. A killed
server's files are copied first, so that the check does not run the recovery the next
server is meant to run.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from memory_chain.tiers.sql.rows import client_id
from memory_chain.tiers.vectors.edge import EdgeIndex
from memory_chain.tiers.vectors.index import TurnPayload, point_id

COLLECTION = "conversation_memory"


@dataclass(frozen=True)
class StoredTurn:
    """A row of ``conversation_turns``."""

    turn_id: int
    number: int
    role: str
    content: str


@dataclass(frozen=True)
class StoredFact:
    """A row of ``facts``."""

    user_id: str
    conversation_id: str | None
    text: str
    status: str


@dataclass
class Stores:
    """Tier 2 and tier 3 of one data directory."""

    turns: dict[str, list[StoredTurn]] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    turn_counts: dict[str, int] = field(default_factory=dict)
    running_summaries: dict[str, str | None] = field(default_factory=dict)
    summary_ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    outbox: set[int] = field(default_factory=set)
    points: dict[str, TurnPayload] = field(default_factory=dict)
    facts: dict[str, StoredFact] = field(default_factory=dict)

    def messages(self, conversation_id: str) -> list[tuple[str, str]]:
        """(role, content) of a conversation's turns, in order."""
        return [(t.role, t.content) for t in self.turns.get(conversation_id, [])]

    def expected_points(self) -> dict[str, tuple[str, StoredTurn]]:
        """Point id of every stored turn -> (conversation, turn)."""
        return {
            point_id(self.owners[cid], cid, turn.number): (cid, turn)
            for cid, turns in self.turns.items()
            for turn in turns
        }

    @property
    def turn_total(self) -> int:
        """Stored turns, all conversations."""
        return sum(len(turns) for turns in self.turns.values())


def read_stores(data_dir: Path, database_url: str | None = None) -> Stores:
    """Read ``data_dir`` (no server may run on it), and tier 2 at ``database_url`` if given."""
    stores = Stores()
    if database_url is None:
        db = sqlite3.connect(data_dir / "memory.db")
        try:
            _read_sql(stores, lambda sql: db.execute(sql).fetchall())
        finally:
            db.close()
    else:
        engine = create_engine(database_url)
        try:
            with engine.connect() as conn:
                _read_sql(stores, lambda sql: [tuple(row) for row in conn.exec_driver_sql(sql)])
        finally:
            engine.dispose()
    stores.points = _read_points(data_dir, COLLECTION)
    return stores


def _read_sql(stores: Stores, rows: Callable[[str], list[Any]]) -> None:
    # Stored ids are "<user>/<conversation>"; these tests give each conversation id one user.
    turns: dict[str, list[StoredTurn]] = defaultdict(list)
    for row in rows(
        "SELECT id, conversation_id, turn_number, role, content FROM conversation_turns "
        "ORDER BY conversation_id, turn_number"
    ):
        turns[client_id(row[1])].append(StoredTurn(row[0], row[2], row[3], row[4]))
    stores.turns = dict(turns)
    for stored, owner, count, summary in rows(
        "SELECT conversation_id, user_id, turn_count, summary FROM conversations"
    ):
        cid = client_id(stored)
        assert cid not in stores.owners, f"two users have a conversation {cid!r}"
        stores.owners[cid] = owner
        stores.turn_counts[cid] = count
        stores.running_summaries[cid] = summary
    ranges: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for stored, start, end in rows(
        "SELECT conversation_id, turn_range_start, turn_range_end "
        "FROM conversation_summaries ORDER BY conversation_id, turn_range_start"
    ):
        ranges[client_id(stored)].append((start, end))
    stores.summary_ranges = dict(ranges)
    stores.outbox = {row[0] for row in rows("SELECT turn_id FROM embedding_outbox")}
    stores.facts = {
        row[0]: StoredFact(row[1], row[2], row[3], row[4])
        for row in rows("SELECT id, user_id, conversation_id, text, status FROM facts")
    }


def _read_points(data_dir: Path, collection: str) -> dict[str, TurnPayload]:
    if not (data_dir / "vectors" / collection).is_dir():
        return {}
    index = EdgeIndex(data_dir / "vectors", collection=collection, dimension=384)
    index.open()
    try:
        points = list(index.scroll())
    finally:
        index.close()
    payloads = {p.id: p.payload for p in points}
    assert len(payloads) == len(points), f"{collection} returned a point id twice"
    return payloads


def read_copy(data_dir: Path, into: Path, database_url: str | None = None) -> Stores:
    """Copy a killed server's database and turns index into ``into``, read them, delete them.

    The index's files are sparse (~150 MB apparent, a few MB used): ``cp --sparse=always``
    keeps the copy small. A PostgreSQL database (``database_url``) is read where it is: its
    own server recovered it when the connections dropped.
    """
    into.mkdir(parents=True)
    try:
        for db in data_dir.glob("memory.db*"):
            shutil.copy2(db, into / db.name)
        index = data_dir / "vectors" / COLLECTION
        if index.is_dir():
            (into / "vectors").mkdir()
            subprocess.run(
                ["cp", "-a", "--sparse=always", str(index), str(into / "vectors")], check=True
            )
        return read_stores(into, database_url)
    finally:
        shutil.rmtree(into)


def check_sql(stores: Stores) -> None:
    """Turns numbered 1..N once each; summaries over disjoint ranges of stored turns."""
    ids = set()
    for cid, turns in stores.turns.items():
        numbers = [turn.number for turn in turns]
        assert numbers == list(range(1, len(turns) + 1)), f"{cid}: turn numbers {numbers}"
        assert stores.turn_counts[cid] == len(turns), f"{cid}: turn_count disagrees"
        ids.update(turn.turn_id for turn in turns)
    for cid, ranges in stores.summary_ranges.items():
        for start, end in ranges:
            assert 1 <= start <= end <= stores.turn_counts[cid], f"{cid}: range {start}-{end}"
        for (_, end), (start, _) in pairwise(ranges):
            assert end < start, f"{cid}: overlapping summaries {ranges}"
    for cid, summary in stores.running_summaries.items():
        assert bool(summary) == bool(stores.summary_ranges.get(cid)), (
            f"{cid}: running summary {summary!r} with ranges {stores.summary_ranges.get(cid)}"
        )
    assert stores.outbox <= ids, "the outbox names turns that do not exist"


def check_points(stores: Stores, *, settled: bool) -> int:
    """Every point is a stored turn with its content; every turn out of the outbox has one.

    With ``settled``, the outbox must be empty and the index hold exactly one point per turn.

    Returns:
        How many turns have a point while still queued (embedded, not yet settled).
    """
    expected = stores.expected_points()
    stray = set(stores.points) - set(expected)
    assert not stray, f"{len(stray)} points for turns that are not stored"
    for pid, payload in stores.points.items():
        cid, turn = expected[pid]
        got = (payload.conversation_id, payload.turn_number, payload.role, payload.content)
        assert got == (cid, turn.number, turn.role, turn.content), f"point {pid}: {got}"
    missing = [
        (cid, turn.number)
        for pid, (cid, turn) in expected.items()
        if pid not in stores.points and turn.turn_id not in stores.outbox
    ]
    assert not missing, f"turns settled in the outbox but not in the index: {missing[:10]}"
    if settled:
        assert not stores.outbox, f"{len(stores.outbox)} turns still queued"
        assert set(stores.points) == set(expected)
    return sum(
        1
        for pid, (_, turn) in expected.items()
        if pid in stores.points and turn.turn_id in stores.outbox
    )
