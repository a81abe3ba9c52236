"""Recalled turns that stated a fact since retired: noted as outdated, or left out.

A turn recalled from an older conversation keeps the user's words: "I live in Berlin" still
reaches the prompt after the user moved to Porto and that fact was superseded, and the model
then sees two homes. So a recalled user turn that states a retired fact (the fact's source
turn, or one of the :data:`LOOKBACK_TURNS` before it that "remember this" points back to,
whose words support the fact: :func:`~memory_chain.facts.grounding.grounded`) is

* **noted** when another fact holds in its place: its prompt line says
  ``outdated, now: "I live in Porto"``, and the turn stays (what held before is still
  history, and still asked about);
* **left out** when nothing does (the fact was dismissed: the user asked to forget it, or
  deleted it): a forgotten thing does not come back through the turn it was learnt from.

The turn itself stays stored and exported, and its conversation lists it; every answer of
what memory recalls (the chat's context, searches, the LangServe retriever, the MCP tools,
the LangGraph store) applies this rule, through ``MemoryManager.find``.

Example:
    >>> marked = mark_outdated(found.items, facts.retired("ana", ["trip"]))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memory_chain.facts.grounding import Evidence, grounded
from memory_chain.facts.model import Fact
from memory_chain.schemas import MemoryItem

#: Turns before a fact's source turn that may be what it was learnt from ("Remember this."
#: saves the message before it).
LOOKBACK_TURNS = 2
#: How a noted turn's line begins its note, before what holds now.
OUTDATED = "outdated, now: "


def recalled_from(items: Sequence[MemoryItem]) -> set[str]:
    """The conversations of the recalled user turns among ``items`` (where to look)."""
    return {item.conversation_id for item in items if _user_turn(item)}


def mark_outdated(
    items: Sequence[MemoryItem], retired: Sequence[tuple[Fact, Fact | None]]
) -> list[MemoryItem]:
    """``items`` with the turns that stated a retired fact noted, or left out.

    Args:
        items: Recalled items, in their order.
        retired: The user's retired facts, each with the fact that holds in its place now
            (``None``: nothing does), as :meth:`FactStore.retired
            <memory_chain.tiers.sql.facts.FactStore.retired>` gives them.

    Returns:
        The items in the same order, a turn that stated a fact with nothing in its place
        left out, one that stated a replaced fact with its ``note``.
    """
    if not retired:
        return list(items)
    kept: list[MemoryItem] = []
    for item in items:
        stated = _stated(item, retired) if _user_turn(item) else []
        if not stated:
            kept.append(item)
        elif all(now is not None for _, now in stated):
            now_texts = dict.fromkeys(f'"{now.text}"' for _, now in stated if now is not None)
            kept.append(replace(item, note=OUTDATED + "; ".join(now_texts)))
    return kept


def _user_turn(item: MemoryItem) -> bool:
    return item.kind == "turn" and item.role == "user" and item.turn_number is not None


def _stated(
    item: MemoryItem, retired: Sequence[tuple[Fact, Fact | None]]
) -> list[tuple[Fact, Fact | None]]:
    """The retired facts the recalled user turn ``item`` is where they were learnt, and says."""
    assert item.turn_number is not None
    near = [
        (old, now)
        for old, now in retired
        if old.turns is not None
        and old.conversation_id == item.conversation_id
        and old.turns[0] - LOOKBACK_TURNS <= item.turn_number <= old.turns[1]
    ]
    if not near:
        return []
    said = Evidence.of([item.content])
    return [(old, now) for old, now in near if grounded(old.text, said)]
