"""Re-linking the facts a deleted fact superseded (:func:`memory_chain.facts.rules.relinked`).

No database: the rule as a table. Whatever is deleted, every fact left points at a fact that
stays, or holds again, or is dismissed; a store key stays unique among current facts.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from memory_chain.facts.model import Fact, FactStatus
from memory_chain.facts.rules import relinked


def at(month: int) -> datetime:
    return datetime(2026, month, 1, tzinfo=UTC)


def fact(
    fact_id: str,
    since: int,
    status: FactStatus = "superseded",
    by: str | None = None,
    key: str | None = None,
) -> Fact:
    gone = at(since + 1) if status != "current" else None
    return Fact(
        id=fact_id,
        user_id="ana",
        text=f"fact {fact_id}",
        kind="biography",
        origin="extracted",
        status=status,
        created_at=at(since),
        valid_from=at(since),
        subject="home",
        invalidated_at=gone,
        superseded_by=by,
        key=key,
    )


def shape(changed: list[Fact]) -> dict[str, tuple[str, str | None, bool, str | None]]:
    return {f.id: (f.status, f.superseded_by, f.invalidated_at is not None, f.key) for f in changed}


def test_the_newest_value_a_deleted_current_fact_replaced_holds_again() -> None:
    porto = fact("porto", 6, "current")
    lisbon = fact("lisbon", 3, by="porto")
    berlin = fact("berlin", 1, by="porto")  # older still
    changed = relinked([porto], [berlin, lisbon])
    assert shape(changed) == {
        "lisbon": ("current", None, False, None),  # holds again: no end, no superseder
        "berlin": ("superseded", "lisbon", True, None),  # keeps when it stopped holding
    }


def test_a_deleted_superseded_fact_is_skipped_in_the_chain() -> None:
    lisbon = fact("lisbon", 3, by="porto")
    porto = fact("porto", 6, "current")
    berlin = fact("berlin", 1, by="lisbon")
    assert shape(relinked([lisbon], [berlin])) == {"berlin": ("superseded", "porto", True, None)}
    # Two deleted in a row: the chain ends at the first fact that stays ...
    madrid = fact("madrid", 2, by="lisbon")
    lisbon_by_madrid = replace(lisbon, superseded_by="porto")
    berlin_by_madrid = replace(berlin, superseded_by="madrid")
    assert shape(relinked([madrid, lisbon_by_madrid], [berlin_by_madrid])) == {
        "berlin": ("superseded", "porto", True, None)
    }
    # ... or at a deleted current fact: the newest of those it held over holds again.
    gone = [fact("madrid", 2, by="porto"), replace(porto, id="porto")]
    athens = fact("athens", 1, by="madrid")
    rome = fact("rome", 4, by="porto")
    assert shape(relinked(gone, [athens, rome])) == {
        "rome": ("current", None, False, None),
        "athens": ("superseded", "rome", True, None),
    }


def test_what_a_deleted_dismissed_fact_replaced_is_dismissed_with_it() -> None:
    porto = fact("porto", 6, "dismissed")
    lisbon = fact("lisbon", 3, by="porto")
    chained = [fact("madrid", 5, by="porto"), fact("rome", 2, by="madrid")]
    assert shape(relinked([porto], [lisbon])) == {"lisbon": ("dismissed", None, True, None)}
    assert shape(relinked([porto, chained[0]], [chained[1]])) == {
        "rome": ("dismissed", None, True, None)
    }


def test_a_fact_that_holds_again_keeps_its_key_unless_a_current_fact_has_it() -> None:
    porto = fact("porto", 6, "current", key="home")
    lisbon = fact("lisbon", 3, by="porto", key="home")
    assert shape(relinked([porto], [lisbon])) == {"lisbon": ("current", None, False, "home")}
    assert shape(relinked([porto], [lisbon], keys_held={"home"})) == {
        "lisbon": ("current", None, False, None)
    }
    # Two facts holding again under one key: the first keeps it.
    gone = [porto, fact("oslo", 7, "current")]
    rome = fact("rome", 2, by="oslo", key="home")
    assert shape(relinked(gone, [lisbon, rome])) == {
        "lisbon": ("current", None, False, "home"),
        "rome": ("current", None, False, None),
    }


def test_nothing_left_points_at_a_deleted_fact() -> None:
    deleted = [
        fact("a", 5, "current"),
        fact("b", 4, by="a"),
        fact("c", 3, "dismissed"),
        fact("d", 2, by="x"),  # superseded by a fact that is gone already
    ]
    pointing = [fact("p", 1, by="a"), fact("q", 1, by="b"), fact("r", 1, by="c")]
    pointing.append(fact("s", 1, by="d"))
    gone = {f.id for f in deleted}
    for changed in relinked(deleted, pointing):
        assert changed.superseded_by not in gone
        assert (changed.status == "superseded") == (changed.superseded_by is not None)
