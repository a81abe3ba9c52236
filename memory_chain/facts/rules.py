"""The one rulebook of a user's facts: what a new fact does to the facts memory has.

Whoever brings the fact (extraction at consolidation, an explicit "remember ...",
``POST /v1/facts``, MCP's ``remember``, a LangGraph store ``put``), :func:`decide` says what
happens, from the user's current facts (and, for an extracted fact, the past ones); the SQL
store (:mod:`memory_chain.tiers.sql.facts`) only carries the :class:`Decision` out, in the
transaction that read those facts. The outcomes (:data:`FactAction`), one meaning each:

* ``same``: the user has this fact (current), with all it could learn: nothing changes.
* ``filled``: the user has this fact; it takes the subject and/or kind it lacked (no new
  row). If its subject now shows that it and another current fact are two values of one
  subject, the value that started to hold later stays and the other is retired
  (``replaced``, or the known fact itself).
* ``added``: stored as a new current fact; nothing retired.
* ``superseded``: stored as a new current fact that retires ``replaced``: an older value of
  its subject, or, for a fact put under a store key, the same fact kept already (unkeyed, or
  under another key), so that the key names a current fact and no fact is current twice.
* ``corrected``: the fact the new one corrects (``replaces``) is retired in its favour: the
  new fact is stored as current, or, when the user has the correction already, the known
  fact takes the corrected one's place (no new row).
* ``history``: stored as a past value: it started to hold before the current value of its
  subject, or before the fact it claims to correct (an older conversation consolidated after
  a newer one). Stored superseded by that value, which stays.
* ``past``: an extracted fact that says what a past (superseded or dismissed) fact said:
  extraction reads old turns again and does not bring that fact back; nothing is stored.

A decision retires at most one fact.

The rules, in order:

1. **A client's key** (a store ``put``): the fact is always stored, so that the key names a
   current fact; the same fact kept already is superseded by it, else the subject rule (5).
2. **Known**: the same fact among the current ones (:func:`~.reconcile.same_as`) is the
   fact said again: ``same`` or ``filled``, or ``corrected`` through it (4).
3. **Past** (extracted facts only): otherwise, the same fact among the past ones is ``past``.
4. **Correction**: ``replaces`` names a current fact of the user the draft corrects; it is
   a claim (the extractor's, trusted when the two are similar), so when it names no current
   fact (retired or deleted since the extractor read the profile) the subject rule decides.
5. **Subject**: a current fact of the same subject, related to the draft, not said together
   with it (``keep``), is an older value (:func:`~.reconcile.updated_by_subject`).
6. **Order**: of two values, the one that started to hold later stays. A value never
   retires a value that started to hold after it, whatever ``replaces`` says: a late-learnt
   value goes into the history. When a value started is its ``valid_from`` (then
   ``created_at``, then id, so the answer is always the same); for a correction, when the
   correction was said; for a known fact given a subject, when the known fact started. A
   correction said in the same turn as the fact it names corrects nothing (the user's
   "Remember: my wife is Ana" filed, then a model's "I remember my wife is Ana." extracted
   from that turn as its correction): said together, the two hold together.

A request to forget ("forget that I smoke") is decided here too (:func:`named_by`): which
current facts it names.

**Deleting** a fact (the last conversation it was said in purged) re-links the facts it
superseded, so that none points at a fact that no longer exists (:func:`relinked`):

* it was **superseded** itself: they point at its superseder (the chain skips it);
* it was **current**: the newest of them (:func:`held_since`) holds again (current), and the
  others point at it: the value the deleted one had replaced is what the user's memory held
  before the deleted conversation said otherwise;
* it was **dismissed**: they are dismissed too. Nothing held in their place while it was
  kept (the user had taken the value that replaced them off the record), and a purge takes
  what a conversation said away; it never brings back what the user's memory no longer held.

A fact that holds again keeps its store key unless a current fact that stays has that key
(a key names one current fact); of two holding again under one key, the one the deleted
fact had taken the key from gets it back.

Example:
    >>> decision = decide(new, vector, current)  # doctest: +SKIP
    >>> decision.action  # doctest: +SKIP
    'superseded'
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, get_args

import numpy as np

from memory_chain.facts.grounding import names
from memory_chain.facts.model import Fact
from memory_chain.facts.reconcile import Known, filled, normalized, same_as, updated_by_subject

#: A cosine at which a "forget ..." request names a fact its words do not.
FORGET_COSINE = 0.6

FactAction = Literal["same", "filled", "added", "superseded", "corrected", "history", "past"]
ACTIONS: tuple[str, ...] = get_args(FactAction)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a new fact (see the module docstring for each action).

    Attributes:
        action: The outcome.
        known: The user's fact the new one is (``same``, ``filled``, ``past``, and
            ``corrected`` when the user has the correction already).
        fill: The fields ``known`` takes (``subject``, ``kind``).
        store: How the new fact is stored: ``"current"``, ``"superseded"`` (history, superseded
            by ``held_by``) or ``None`` (not stored).
        held_by: For ``store="superseded"``: the current fact that stays.
        retire: A current fact that stops holding (superseded).
        retire_for: The fact holding in its place (``None``: the new fact).
    """

    action: FactAction
    known: Fact | None = None
    fill: Mapping[str, str] = field(default_factory=dict)
    store: Literal["current", "superseded"] | None = None
    held_by: Fact | None = None
    retire: Fact | None = None
    retire_for: Fact | None = None


@dataclass(frozen=True, slots=True)
class FactChange:
    """What adding a fact did.

    Attributes:
        action: The outcome (:data:`FactAction`, one meaning each: see :mod:`.rules`).
        fact: The new fact as stored (current, or in the history for ``history``), or the
            user's fact it is (``same``, ``filled``, ``past``; ``corrected`` with no new
            row), as it is now (its subject filled in, or retired).
        replaced: The fact retired in ``fact``'s favour, if any.
        stored: Whether a row was added.
    """

    action: FactAction
    fact: Fact
    replaced: Fact | None = None
    stored: bool = False


def held_since(fact: Fact) -> tuple[datetime, datetime, str]:
    """The order of two values: the newer started to hold later (``valid_from``).

    Then the later ``created_at``, then the id (the same answer every time).
    """
    return (fact.valid_from, fact.created_at, fact.id)


def decide(
    new: Fact,
    vector: np.ndarray | None,
    current: Sequence[Known],
    *,
    target: Fact | None = None,
    past: Callable[[], Sequence[Known]] = tuple,
    keyed: bool = False,
    keep: Collection[str] = (),
) -> Decision:
    """Decide what the new fact ``new`` does (see the module docstring for the rules).

    Args:
        new: The fact as it would be stored (current, its id, ``created_at`` the time of
            the change, ``valid_from`` when it started to hold).
        vector: Its vector, if it has one.
        current: The user's current facts, with their vectors.
        target: The fact ``replaces`` names (any status; ``None``: none given, or not one
            of the user's).
        past: The user's past facts (superseded and dismissed), with their vectors: read
            only for an extracted fact that is not a current one.
        keyed: The fact is put under a client's key: it is always stored.
        keep: Ids of facts the subject rule must not retire: facts said together with the
            new one (learnt from the same range of turns) hold beside it.

    Returns:
        The decision; nothing is read or written here.
    """
    same = same_as(new.text, vector, current)
    others = [k for k in current if k.fact.id not in keep]
    if keyed:
        if same is not None:
            return Decision("superseded", store="current", retire=same)
        return _by_subject(new, updated_by_subject(new.subject, vector, others))
    if same is None and new.origin == "extracted":
        said = same_as(new.text, vector, past())
        if said is not None:
            return Decision("past", known=said)
    corrects = target if target is not None and target.current else None
    if corrects is not None and corrects.valid_from == new.valid_from:
        corrects = None  # said in the same turn as the fact it names: the two hold together
    if same is not None:
        # Said before the value it claims to correct started: that value stays.
        late = corrects is not None and held_since(corrects) > held_since(new)
        return _known(same, new, None if late else corrects, current, others)
    if corrects is not None:
        return _in_order(new, corrects, "corrected")
    return _by_subject(new, updated_by_subject(new.subject, vector, others))


def _by_subject(new: Fact, older: Fact | None) -> Decision:
    """A new fact, and the current value of its subject if it has one."""
    if older is None:
        return Decision("added", store="current")
    return _in_order(new, older, "superseded")


def _in_order(new: Fact, older: Fact, action: FactAction) -> Decision:
    """A new fact retiring ``older`` (``action``), unless ``older`` started to hold later."""
    if held_since(older) > held_since(new):
        return Decision("history", store="superseded", held_by=older)
    return Decision(action, store="current", retire=older)


def _known(
    same: Fact,
    new: Fact,
    corrects: Fact | None,
    current: Sequence[Known],
    others: Sequence[Known],
) -> Decision:
    """The fact said again: what the known fact ``same`` learns, and what it retires."""
    fill = filled(same, new.subject, new.kind)
    if corrects is not None and corrects.id != same.id:
        # The user has the correction already: the known fact takes the corrected one's place.
        return Decision("corrected", known=same, fill=fill, retire=corrects, retire_for=same)
    subject = fill.get("subject")
    if subject is None:
        return Decision("filled" if fill else "same", known=same, fill=fill)
    own = next((k.vector for k in current if k.fact.id == same.id), None)
    rival = updated_by_subject(subject, own, [k for k in others if k.fact.id != same.id])
    if rival is None:
        return Decision("filled", known=same, fill=fill)
    newer, older = sorted((same, rival), key=held_since, reverse=True)
    return Decision("filled", known=same, fill=fill, retire=older, retire_for=newer)


def named_by(request: str, vector: np.ndarray | None, current: Sequence[Known]) -> list[Fact]:
    """The current facts a "forget ..." request names.

    The facts holding every content word of the request, by stem
    (:func:`~memory_chain.facts.grounding.names`: "that I smoke" names "I smoke a few
    cigarettes a day" and "I quit smoking last year": the user wants smoking off the record),
    or its whole text; else the one most similar to it (a cosine of at least
    :data:`FORGET_COSINE`: "my ex-husband lives in Ostwick" for "My ex-husband Femi moved to
    Ostwick").

    Args:
        request: What the user asked to forget.
        vector: Its vector, if it has one.
        current: The user's current facts, with their vectors.

    Returns:
        The facts named, newest first.
    """
    wanted = normalized(request)
    if not wanted:
        return []
    newest = sorted(current, key=lambda k: held_since(k.fact), reverse=True)
    named = [
        k.fact for k in newest if wanted in normalized(k.fact.text) or names(request, k.fact.text)
    ]
    if named or vector is None:
        return named
    scored = [
        (float(vector @ k.vector), k.fact)
        for k in newest
        if k.vector is not None and k.vector.shape == vector.shape
    ]
    if not scored:
        return []
    score, best = max(scored, key=lambda pair: pair[0])  # of equals, the newest
    return [best] if score >= FORGET_COSINE else []


def relinked(
    deleted: Sequence[Fact], pointing: Sequence[Fact], keys_held: Collection[str] = ()
) -> list[Fact]:
    """The facts that were superseded by deleted ones, as they hold once those are gone.

    See the module docstring for the rule; nothing is read or written here.

    Args:
        deleted: The facts being deleted, as they are (statuses and links).
        pointing: The user's facts that stay and whose ``superseded_by`` names a deleted one.
        keys_held: The store keys of the user's current facts that stay.

    Returns:
        The facts of ``pointing``, changed: each points at a fact that stays, holds again
        (current, its ``invalidated_at`` cleared), or is dismissed.
    """
    gone = {fact.id: fact for fact in deleted}
    changed: list[Fact] = []
    again: dict[str, list[Fact]] = {}  # by the deleted current fact they held under
    for fact in pointing:
        if fact.superseded_by not in gone:
            continue
        end, holder = _chain_end(fact.superseded_by, gone)
        if end == "holder":
            changed.append(replace(fact, superseded_by=holder))
        elif end == "dismissed":
            changed.append(replace(fact, status="dismissed", superseded_by=None))
        else:
            again.setdefault(str(holder), []).append(fact)
    taken = set(keys_held)
    newest_of = {held: max(group, key=held_since) for held, group in again.items()}

    def handed_back(held: str) -> tuple[bool, str]:
        # A key the deleted fact took over from the one holding again goes back to it first.
        return (gone[held].key is None or gone[held].key != newest_of[held].key, held)

    for held in sorted(again, key=handed_back):
        newest, *older = sorted(again[held], key=held_since, reverse=True)
        key = newest.key if newest.key not in taken else None
        if key is not None:
            taken.add(key)
        changed.append(
            replace(newest, status="current", invalidated_at=None, superseded_by=None, key=key)
        )
        changed += [replace(fact, superseded_by=newest.id) for fact in older]
    return changed


def _chain_end(
    fact_id: str, gone: Mapping[str, Fact]
) -> tuple[Literal["holder", "current", "dismissed"], str | None]:
    """Where a chain of supersessions from the deleted fact ``fact_id`` ends.

    ``("holder", id)``: at a fact that stays; ``("current", id)``: at a deleted fact that
    was current (or superseded by nothing, or in a loop of deleted facts: a broken chain
    counts as ending there); ``("dismissed", None)``: at a deleted dismissed fact.
    """
    seen: set[str] = set()
    fact = gone[fact_id]
    while True:
        seen.add(fact.id)
        if fact.status == "dismissed":
            return "dismissed", None
        later = fact.superseded_by
        if fact.status == "current" or later is None or later in seen:
            return "current", fact.id
        if later not in gone:
            return "holder", later
        fact = gone[later]
