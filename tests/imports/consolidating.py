"""Consolidating the imported trip with fake models: a fixed summary, one scripted fact."""

from __future__ import annotations

from langchain_core.runnables import RunnableLambda

from memory_chain.consolidation import ConsolidationService
from memory_chain.extraction import FactExtractor
from memory_chain.manager import MemoryManager
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from tests.fake_chat import ScriptedFacts, fact, reply

#: The conversation id of the ChatGPT sample's "Trip to Lisbon".
TRIP = "chatgpt-6627a1b0-1111-4c2d-9e8f-0a1b2c3d4e5f"


def consolidate_trip(store: SQLStore, manager: MemoryManager, user: str = "ana") -> None:
    """Consolidate the trip now: summary "Ana plans a trip to Lisbon.", the hotel from turn 3."""
    llm = ScriptedFacts(
        replies=[reply(fact("I stay at the Hotel Baixa-7733.", 3, subject="hotel"))]
    )
    summarizer = RunnableLambda(lambda _inputs: "Ana plans a trip to Lisbon.")
    service = ConsolidationService(
        store, TurnBuffer(), summarizer, extractor=FactExtractor(llm, manager.fact_store)
    )
    try:
        assert service.consolidate(TRIP, user) is not None
    finally:
        service.stop()
