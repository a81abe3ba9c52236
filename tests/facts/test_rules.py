"""The rulebook of facts (:mod:`memory_chain.facts.rules`), as a table: no database, no model.

Each row gives the user's facts, the new one and what is asked of it, and the decision the
rulebook must take. Facts without vectors are matched by their words and subjects; the rows
with vectors check the cosines (unit vectors made by hand).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np
import pytest

from memory_chain.facts.model import Fact, FactKind, FactOrigin, FactStatus
from memory_chain.facts.reconcile import Known
from memory_chain.facts.rules import ACTIONS, Decision, decide, held_since

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def month(number: int) -> datetime:
    return datetime(2026, number, 1, tzinfo=UTC)


def fact(
    fact_id: str,
    text: str,
    *,
    subject: str | None = None,
    kind: FactKind = "other",
    status: FactStatus = "current",
    since: int = 1,
    origin: FactOrigin = "api",
) -> Fact:
    return Fact(
        id=fact_id,
        user_id="ana",
        text=text,
        kind=kind,
        origin=origin,
        status=status,
        created_at=month(since),
        valid_from=month(since),
        subject=subject,
    )


def new(
    text: str,
    *,
    subject: str | None = None,
    kind: FactKind = "other",
    since: datetime = NOW,
    origin: FactOrigin = "extracted",
) -> Fact:
    return Fact(
        id="new",
        user_id="ana",
        text=text,
        kind=kind,
        origin=origin,
        status="current",
        created_at=NOW,
        valid_from=since,
        subject=subject,
    )


PORTO = fact("porto", "I live in Porto.", subject="home city", since=6)
LISBON = fact("lisbon", "I live in Lisbon.", subject="home city", since=3)
SAVED_PORTO = fact("saved", "I live in Porto", since=6, origin="explicit")
SAVED_LISBON = fact("saved", "I live in Lisbon", since=3, origin="explicit")
TENNIS = fact("tennis", "I play tennis.", subject="hobby")
LUCJA = fact("lucja", "My niece is called Lucja.", subject="niece", status="superseded")
LUCIA = fact("lucia", "My niece is called Lucia.", subject="niece", since=5)


@dataclass(frozen=True)
class Row:
    """One case: the user's facts, the new fact and how it comes, and the decision wanted."""

    name: str
    current: Sequence[Fact]
    draft: Fact
    action: str
    store: str | None = None
    known: str | None = None
    fill: dict[str, str] = field(default_factory=dict)
    retire: str | None = None
    retire_for: str | None = None
    held_by: str | None = None
    target: Fact | None = None
    past: Sequence[Fact] = ()
    keyed: bool = False
    keep: frozenset[str] = frozenset()


ROWS = [
    Row("a new fact is added", [PORTO], new("My dog is Rex."), "added", store="current"),
    Row(
        "the same words again change nothing",
        [PORTO],
        new("  i live in porto!"),
        "same",
        known="porto",
    ),
    Row(
        "the same fact takes the subject and kind it lacked",
        [SAVED_LISBON],
        new("I live in Lisbon.", subject="home city", kind="biography"),
        "filled",
        known="saved",
        fill={"subject": "home city", "kind": "biography"},
    ),
    Row(
        "a known subject is not overwritten, a kind 'other' is",
        [PORTO],
        new("I live in Porto", subject="residence", kind="plan"),
        "filled",
        known="porto",
        fill={"kind": "plan"},
    ),
    Row(
        "a subject filled in retires the older value of it",
        [SAVED_PORTO, LISBON],
        new("I live in Porto.", subject="home city"),
        "filled",
        known="saved",
        fill={"subject": "home city"},
        retire="lisbon",
        retire_for="saved",
    ),
    Row(
        "a subject filled in on the older value retires the known fact",
        [SAVED_LISBON, PORTO],
        new("I live in Lisbon.", subject="home city"),
        "filled",
        known="saved",
        fill={"subject": "home city"},
        retire="saved",
        retire_for="porto",
    ),
    Row(
        "a subject filled in does not retire a fact said together with it (changed)",
        [SAVED_PORTO, LISBON],
        new("I live in Porto.", subject="home city"),
        "filled",
        known="saved",
        fill={"subject": "home city"},
        keep=frozenset({"lisbon"}),
    ),
    Row(
        "a newer value of a subject supersedes the current one",
        [LISBON],
        new("I live in Berlin.", subject="Home Cities"),
        "superseded",
        store="current",
        retire="lisbon",
    ),
    Row(
        "a value learnt late goes into the history",
        [PORTO],
        new("I live in Lisbon.", subject="home city", since=month(3)),
        "history",
        store="superseded",
        held_by="porto",
    ),
    Row(
        "a subject of which several hold supersedes nothing",
        [TENNIS],
        new("I play guitar.", subject="hobbies"),
        "added",
        store="current",
    ),
    Row(
        "facts said together do not supersede one another",
        [LISBON],
        new("I live in Berlin.", subject="home city"),
        "added",
        store="current",
        keep=frozenset({"lisbon"}),
    ),
    Row(
        "a correction retires the fact it names",
        [LUCIA],
        new("My niece is called Lucía."),
        "corrected",
        store="current",
        retire="lucia",
        target=LUCIA,
    ),
    Row(
        "a correction said before the value it names goes into the history (changed)",
        [PORTO],
        new("I've moved to Lisbon.", since=month(3)),
        "history",
        store="superseded",
        held_by="porto",
        target=PORTO,
    ),
    Row(
        "a correction of a fact retired meanwhile is left to the subject rule (changed)",
        [PORTO],
        new("I live in Berlin.", subject="home city"),
        "superseded",
        store="current",
        retire="porto",
        target=replace(LISBON, status="superseded", superseded_by="porto"),
    ),
    Row(
        "a correction said in the same turn as the fact it names corrects nothing",
        [SAVED_PORTO],
        new("I remember I live in Porto.", since=month(6)),
        "added",
        store="current",
        target=SAVED_PORTO,
    ),
    Row(
        "a correction naming no fact of the user is left to the subject rule (changed)",
        [],
        new("My wife is Ana."),
        "added",
        store="current",
        target=None,
    ),
    Row(
        "a correction the user has already takes the corrected fact's place",
        [LISBON, SAVED_PORTO],
        new("I live in Porto.", subject="home city"),
        "corrected",
        known="saved",
        fill={"subject": "home city"},
        retire="lisbon",
        retire_for="saved",
        target=LISBON,
    ),
    Row(
        "a correction the user has, said before the value it names: the subject rule (changed)",
        [PORTO, SAVED_LISBON],
        new("I live in Lisbon.", subject="home city", since=month(2)),
        "filled",
        known="saved",
        fill={"subject": "home city"},
        retire="saved",
        retire_for="porto",
        target=PORTO,
    ),
    Row(
        "a correction that says what it names is the same fact",
        [PORTO],
        new("I live in Porto", kind="biography"),
        "filled",
        known="porto",
        fill={"kind": "biography"},
        target=PORTO,
    ),
    Row(
        "an extracted fact that says what a past fact said is not brought back",
        [LUCIA],
        new("my niece is called Lucja"),
        "past",
        known="lucja",
        past=[LUCJA],
    ),
    Row(
        "nor when the model says it corrects the current value (changed)",
        [LUCIA],
        new("my niece is called Lucja", subject="niece"),
        "past",
        known="lucja",
        past=[LUCJA],
        target=LUCIA,
    ),
    Row(
        "the user may bring a past fact back",
        [LUCIA],
        new("My niece is called Lucja.", origin="explicit"),
        "added",
        store="current",
        past=[LUCJA],
    ),
    Row(
        "a keyed fact the user has already supersedes it (the key names a current fact)",
        [PORTO],
        new("I live in Porto.", origin="api"),
        "superseded",
        store="current",
        retire="porto",
        keyed=True,
    ),
    Row(
        "a keyed newer value supersedes by subject",
        [LISBON],
        new("I live in Porto.", subject="home city", origin="api"),
        "superseded",
        store="current",
        retire="lisbon",
        keyed=True,
    ),
    Row(
        "a keyed fact is added",
        [LISBON],
        new("I like tea.", origin="api"),
        "added",
        store="current",
        keyed=True,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_the_rulebook(row: Row) -> None:
    past = [Known(f, None) for f in row.past]
    read: list[bool] = []

    def read_past() -> list[Known]:
        read.append(True)
        return past

    decision = decide(
        row.draft,
        None,
        [Known(f, None) for f in row.current],
        target=row.target,
        past=read_past,
        keyed=row.keyed,
        keep=row.keep,
    )
    assert decision.action in ACTIONS
    assert _shape(decision) == (
        row.action,
        row.store,
        row.known,
        dict(row.fill),
        row.retire,
        row.retire_for,
        row.held_by,
    )
    # The past facts are read only for an extracted fact the user does not have.
    if row.draft.origin != "extracted" or row.keyed:
        assert not read


def _shape(decision: Decision) -> tuple[object, ...]:
    def ident(found: Fact | None) -> str | None:
        return found.id if found is not None else None

    return (
        decision.action,
        decision.store,
        ident(decision.known),
        dict(decision.fill),
        ident(decision.retire),
        ident(decision.retire_for),
        ident(decision.held_by),
    )


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype="<f4")
    return vector / np.linalg.norm(vector)


def test_cosines_decide_when_there_are_vectors() -> None:
    porto = Known(PORTO, unit(1, 0, 0))
    rex = new("My dog is called Rex.", subject="home city")
    # A wrong subject on a fact about something else (cosine 0) retires nothing.
    assert decide(rex, unit(0, 1, 0), [porto]).action == "added"
    # A related fact of the same subject (cosine 0.45) supersedes.
    berlin = new("I live in Berlin.", subject="home city")
    moved = decide(berlin, unit(1, 2, 0), [porto])
    assert (moved.action, moved.retire) == ("superseded", PORTO)
    # A rephrasing (cosine 0.995) is the same fact.
    said = decide(new("Porto is where I live."), unit(10, 1, 0), [porto])
    assert (said.action, said.known) == ("same", PORTO)


def test_values_are_ordered_by_when_they_started_then_by_when_stored_then_by_id() -> None:
    early = fact("b", "x", since=3)
    assert held_since(early) < held_since(fact("a", "x", since=4))
    stored_later = replace(early, id="a", created_at=month(5))
    assert held_since(early) < held_since(stored_later)
    assert held_since(fact("a", "x", since=3)) < held_since(early)
