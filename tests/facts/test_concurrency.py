"""Concurrent changes of one user's facts, on SQLite and PostgreSQL: serializable per user.

Eight threads change one user's facts at once, through every door the store has: the same
fact added again and again, values of one subject ("home city"), edits of one fact,
dismissals, "forget ..." requests and LangGraph store puts of one key. Each change reads the
user's facts and writes in one transaction holding the user's lock (``facts:<user>``, a
transaction advisory lock on PostgreSQL; SQLite serializes its writers), so the history
checker (:mod:`tests.facts.history_check`) finds no anomaly and no operation fails.

Without the lock (PostgreSQL's READ COMMITTED), two adds of one subject's values both retire
the old value and both stay current, two adds of one fact both store it, and two edits of
one fact lose one of them; two puts of one new key read "no fact" before either wrote, and
the second fails.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest
from sqlalchemy import Engine

from memory_chain.facts.model import FactDraft
from memory_chain.integrations.store_facts import FactNamespace
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from tests.facts.history_check import History, Report, check

USER = "ana"
WRITERS = 8
OPERATIONS = 30
CITIES = ["Porto", "Oslo", "Lima", "Quito", "Hanoi", "Perth", "Tunis", "Bergen", "Cork", "Turin"]
LOCKER = "My locker code is 4471."
KEY = "diet"


def _writer(
    number: int,
    facts: FactStore,
    history: History,
    start: threading.Barrier,
    seat: str,
) -> None:
    rng = random.Random(number)
    store = FactNamespace(facts, None)
    operations: dict[str, Callable[[int], None]] = {
        "add the same fact": lambda _: _add(facts, FactDraft(LOCKER, origin="explicit")),
        "add a subject's value": lambda _: _add(
            facts, FactDraft(f"I live in {rng.choice(CITIES)}.", subject="home city")
        ),
        "edit": lambda n: _edit(facts, history, seat, f"My seat is {number}-{n}."),
        "dismiss": lambda _: _dismiss_one(facts, rng, keep={seat}),
        "forget": lambda _: facts.forget_matching(USER, "my locker code"),
        "store put": lambda n: store.put(USER, (), KEY, {"text": f"I eat {number}-{n}."}, None),
    }
    kinds = list(operations)
    start.wait()
    for n in range(OPERATIONS):
        kind = rng.choice(kinds)
        try:
            operations[kind](n)
        except Exception as exc:  # every failure is an error of the suite
            history.failed(f"{kind}: {type(exc).__name__}: {exc}")
        history.done(kind)


def _add(facts: FactStore, draft: FactDraft) -> None:
    facts.add(USER, draft)


def _edit(facts: FactStore, history: History, fact_id: str, new_text: str) -> None:
    edited = facts.edit(USER, fact_id, text=new_text)
    if edited is not None:
        history.edited(USER, fact_id, new_text)


def _dismiss_one(facts: FactStore, rng: random.Random, keep: set[str]) -> None:
    """Dismiss one of the user's current facts (not ``keep``'s, nor the one under the key)."""
    candidates = [
        f
        for f in facts.of_user(USER)
        if f.id not in keep and KEY not in (f.id, getattr(f, "key", None))
    ]
    if candidates:
        facts.dismiss(USER, rng.choice(candidates).id)


def run_writers(facts: FactStore, engine: Engine) -> tuple[History, Report]:
    """The writers' run, then the checker's verdict."""
    seat = facts.add(USER, FactDraft("My seat is 14C.")).fact.id
    history = History()
    start = threading.Barrier(WRITERS)
    threads = [
        threading.Thread(target=_writer, args=(n, facts, history, start, seat))
        for n in range(WRITERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not any(thread.is_alive() for thread in threads), "a writer did not finish"
    return history, check(engine, history)


@pytest.mark.timeout(600)
def test_concurrent_changes_of_one_users_facts_leave_no_anomaly(store: SQLStore) -> None:
    facts = FactStore(store.database)
    history, report = run_writers(facts, store.engine)
    print(f"\n{store.database.dialect}: {report.line(WRITERS, history)}")
    print("anomalies:", report.anomalies[:8], "errors:", history.errors[:8])
    assert sum(history.operations.values()) == WRITERS * OPERATIONS
    assert history.edits, "no edit was acknowledged: the workload tests nothing"
    assert report.anomalies == []
    assert history.errors == []
