"""Response bodies are read from the stored objects (``memory_chain.api.models``)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime

from memory_chain.api.models import (
    ConversationDetail,
    Fact,
    FactsResponse,
    SearchResponse,
    TurnOut,
    TurnsPage,
)
from memory_chain.facts.model import Fact as StoredFact
from memory_chain.schemas import (
    ConversationInfo,
    MemoryItem,
    Summary,
    TokenUsage,
    Turn,
)

AT = datetime(2025, 5, 3, 9, 30, tzinfo=UTC)


def test_a_turn_with_and_without_token_counts() -> None:
    counted = Turn("trip", 2, "assistant", "On 3 May.", AT, TokenUsage(40, 31, 9))
    assert TurnOut.model_validate(counted).model_dump() == {
        "turn_number": 2,
        "role": "assistant",
        "content": "On 3 May.",
        "timestamp": AT,
        "tokens": {"prompt": 31, "completion": 9, "total": 40},
    }
    assert TurnOut.model_validate(Turn("trip", 1, "user", "When?", AT)).tokens is None


def test_pages_and_details_take_stored_objects_as_field_values() -> None:
    turns = [Turn("trip", n, "user", f"turn {n}", AT) for n in (3, 4)]
    page = TurnsPage(turns=turns, next_after=4)
    assert [turn.turn_number for turn in page.turns] == [3, 4]
    info = ConversationInfo("trip", "ana", AT, AT, 4, 50, "A trip.", "active")
    summary = Summary("trip", "They plan a trip.", 1, 2, AT, 12)
    detail = ConversationDetail(**asdict(info), summaries=[summary], recent_turns=turns)
    body = detail.model_dump()
    assert "user_id" not in body  # the owner is the caller: not repeated
    assert body["summaries"][0]["turn_range_end"] == 2
    assert body["recent_turns"][1]["content"] == "turn 4"


def test_search_hits_keep_their_sources_and_range() -> None:
    item = MemoryItem(
        "tier2",
        "summary",
        "trip",
        "They plan a trip.",
        AT,
        0.8,
        turn_range=(1, 2),
        sources=("keyword", "semantic"),
    )
    hit = SearchResponse(results=(item,), degraded=("tier3",)).model_dump()["results"][0]
    assert hit["turn_range"] == (1, 2)
    assert hit["sources"] == ["keyword", "semantic"]


def test_a_fact_is_shown_with_its_history_fields_and_without_its_vector() -> None:
    fact = StoredFact(
        id="a" * 32,
        user_id="ana",
        text="the code is 4711.",
        kind="other",
        origin="explicit",
        status="superseded",
        created_at=AT,
        valid_from=AT,
        conversation_id="trip",
        turns=(7, 7),
        invalidated_at=AT,
        superseded_by="b" * 32,
    )
    body = FactsResponse(facts=[Fact.model_validate(fact)]).model_dump(mode="json")
    shown = body["facts"][0]
    assert (shown["id"], shown["text"], shown["turns"]) == ("a" * 32, "the code is 4711.", [7, 7])
    assert (shown["status"], shown["superseded_by"]) == ("superseded", "b" * 32)
    assert "user_id" not in shown
    assert "embedding" not in shown
