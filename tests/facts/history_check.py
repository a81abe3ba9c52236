"""A checker over a history of concurrent fact changes and the rows they left.

Writers (threads, or clients of several replicas) change one user's facts at once and
record what each operation was told (:class:`History`); afterwards :func:`check` reads every
row of ``facts`` (current and past) and lists the anomalies:

- two current values of one single-valued subject ("home city"; the writers' values of a
  subject are related facts, "I live in Porto." / "I live in Oslo.", which one supersedes);
- two current facts saying the same (the same words, case and end punctuation aside);
- a lost edit: an edit that was acknowledged but whose text is neither the fact's text nor
  in its history (a superseded copy pointing to it);
- a dangling history link: a superseded fact pointing to no fact of its user;
- two current facts under one store key.

Errors (an exception a client should never see, or an HTTP 5xx) are counted apart.
The rows are read with plain SQL, so that the checker reads the table of any version.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from sqlalchemy import Engine, inspect, text

from memory_chain.facts.grounding import subject_key
from memory_chain.facts.reconcile import normalized


@dataclass
class History:
    """What the writers did and were told."""

    operations: Counter[str] = field(default_factory=Counter)
    edits: list[tuple[str, str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self, kind: str) -> None:
        with self.lock:
            self.operations[kind] += 1

    def edited(self, user: str, fact_id: str, new_text: str) -> None:
        """An edit was acknowledged: ``fact_id`` of ``user`` says ``new_text``."""
        with self.lock:
            self.edits.append((user, fact_id, new_text))

    def failed(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


@dataclass(frozen=True)
class Report:
    """The checker's findings."""

    rows: int
    current: int
    anomalies: list[str]

    def line(self, writers: int, history: History) -> str:
        """One line of figures: writers, operations, anomalies, errors."""
        operations = sum(history.operations.values())
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(history.operations.items()))
        return (
            f"{writers} writers, {operations} operations ({kinds}); {self.rows} rows, "
            f"{self.current} current; anomalies {len(self.anomalies)}, "
            f"errors {len(history.errors)}"
        )


def check(engine: Engine, history: History) -> Report:
    """Read every fact row and list the anomalies (see the module docstring)."""
    columns = {column["name"] for column in inspect(engine).get_columns("facts")}
    key = "store_key" if "store_key" in columns else "NULL"
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT id, user_id, text, subject, status, superseded_by, "
                f"{key} AS store_key FROM facts"
            )
        ).all()
    anomalies: list[str] = []
    current = [row for row in rows if row.status == "current"]
    by_subject: dict[tuple[str, str], list[str]] = defaultdict(list)
    by_text: dict[tuple[str, str], list[str]] = defaultdict(list)
    by_key: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in current:
        about = subject_key(row.subject)
        if about is not None:  # None: no subject, or one of which several hold
            by_subject[(row.user_id, about)].append(row.text)
        by_text[(row.user_id, normalized(row.text))].append(row.id)
        if row.store_key is not None:
            by_key[(row.user_id, row.store_key)].append(row.id)
    anomalies += [
        f"{user}: {len(texts)} current values of {about!r}: {sorted(texts)}"
        for (user, about), texts in by_subject.items()
        if len(texts) > 1
    ]
    anomalies += [
        f"{user}: {len(ids)} current facts say {said!r}"
        for (user, said), ids in by_text.items()
        if len(ids) > 1
    ]
    anomalies += [
        f"{user}: {len(ids)} current facts under key {stored!r}"
        for (user, stored), ids in by_key.items()
        if len(ids) > 1
    ]
    ids = {(row.user_id, row.id) for row in rows}
    anomalies += [
        f"{row.user_id}: fact {row.id} superseded by {row.superseded_by}, which is not theirs"
        for row in rows
        if row.status == "superseded" and (row.user_id, row.superseded_by) not in ids
    ]
    said = {(row.user_id, row.id, row.text) for row in rows}
    said |= {(row.user_id, row.superseded_by, row.text) for row in rows if row.superseded_by}
    anomalies += [
        f"{user}: the acknowledged edit of {fact_id} to {new_text!r} is lost"
        for user, fact_id, new_text in history.edits
        if (user, fact_id, new_text) not in said
    ]
    return Report(len(rows), len(current), anomalies)
