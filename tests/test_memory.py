"""Memory manager, consolidation triggers and the chat chain, with fake chat models."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from qdrant_client import QdrantClient
from sqlalchemy import update

from memory_chain.chain import LLMUnavailableError, build_chat_chain
from memory_chain.chat.budget import Budget, build_prompt
from memory_chain.chat.core import ChatCore
from memory_chain.chat.models import OneModel
from memory_chain.consolidation import (
    ConsolidationError,
    ConsolidationService,
    ConsolidationSettings,
)
from memory_chain.errors import InvalidInputError
from memory_chain.manager import MemoryManager
from memory_chain.schemas import NewTurn, TokenUsage, utcnow
from memory_chain.summarize import build_summarization_chain
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.models import conversations
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tiers.vectors.indexer import TurnIndexer
from memory_chain.tiers.vectors.qdrant import QdrantIndex
from memory_chain.tiers.vectors.tier import Tier3
from tests.deprecated_doors import USES_DEPRECATED_HISTORIES
from tests.fake_chat import Scripted, ScriptedSummarizer

pytestmark = USES_DEPRECATED_HISTORIES

CFG = {"configurable": {"conversation_id": "trip", "user_id": "ana"}}


def chat_chain(manager: MemoryManager, llm: BaseChatModel) -> Any:
    """The chat chain over ``manager``, answered by ``llm`` (a 4,096-token window)."""
    return build_chat_chain(ChatCore(manager, OneModel(llm)))


def fake_llm(prefix: str = "reply") -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(AIMessage(f"{prefix} {i}") for i in range(10_000)))


@pytest.fixture
def memory(
    tmp_path: Path, embeddings: SentenceEmbeddings
) -> Iterator[tuple[MemoryManager, ConsolidationService, ScriptedSummarizer]]:
    engine = create_sql_engine(f"sqlite:///{tmp_path / 'memory.db'}")
    upgrade(engine)
    store = SQLStore(engine, queue_embeddings=True)
    index = QdrantIndex(QdrantClient(":memory:"))
    index.open()
    tier3 = Tier3(
        index=index,
        embeddings=embeddings,
        indexer=TurnIndexer(store.outbox(), index, embeddings),
    )
    facts = FactStore(store.database, embed=embeddings.embed_documents)
    manager = MemoryManager(store, TurnBuffer(max_turns=10), tier3=tier3, facts=facts)
    summarizer = ScriptedSummarizer()
    service = ConsolidationService(
        store,
        manager.buffer,
        summarizer,  # type: ignore[arg-type]
        tier3=tier3,
        settings=ConsolidationSettings(backoff_seconds=0.01),
    )
    manager.listeners.append(service)
    yield manager, service, summarizer
    service.stop()
    manager.close()
    engine.dispose()


def chat(manager: MemoryManager, conversation: str, user: str, *texts: str) -> None:
    for text in texts:
        manager.add_turns(
            conversation, user, [NewTurn("user", text), NewTurn("assistant", f"ok: {text}")]
        )


def wait_idle(service: ConsolidationService) -> None:
    for future in list(service._pending.values()):
        future.result(timeout=60)


# -- the memory context ---------------------------------------------------------------------


def test_retrieve_merges_every_tier(memory: Any) -> None:
    manager, service, _ = memory
    chat(manager, "trip", "ana", "We fly to Lisbon on May 3rd", "Budget is 2000 euros")
    chat(manager, "trip", "ana", *[f"filler message {i}" for i in range(8)])
    wait_idle(service)  # 20 messages: one consolidation stored a summary and embedded turns
    manager.tier3.drain()
    context = manager.retrieve("trip", "ana", "When do we fly to Lisbon?")
    assert context.summary is not None
    assert [t.turn_number for t in context.recent] == list(range(16, 21))  # pruned to 5
    recent = {t.turn_number for t in context.recent}
    assert all(item.turn_number not in recent for item in context.items if item.kind == "turn")
    keys = [(i.conversation_id, i.turn_number) for i in context.items if i.kind == "turn"]
    assert len(keys) == len(set(keys))
    assert context.items[0].turn_number == 1  # found by both keyword and semantic search
    assert {"tier2-turns", "tier3"} <= set(context.items[0].sources)
    assert context.degraded == ()


def test_retrieve_degrades_when_tier3_is_down(memory: Any) -> None:
    manager, _, _ = memory
    chat(manager, "trip", "ana", "We fly to Lisbon")
    manager.tier3.index.close()
    context = manager.retrieve("trip", "ana", "Lisbon")
    assert any("tier3" in reason for reason in context.degraded)
    assert [t.turn_number for t in context.recent] == [1, 2]


# -- triggers ----------------------------------------------------------------------------------


def test_message_trigger_every_ten_messages(memory: Any) -> None:
    manager, service, summarizer = memory
    chat(manager, "trip", "ana", *[f"m{i}" for i in range(4)])  # 8 messages
    wait_idle(service)
    assert manager.store.get_summaries("trip", user_id="ana") == []
    chat(manager, "trip", "ana", "m4")  # 10 messages
    wait_idle(service)
    (summary,) = manager.store.get_summaries("trip", user_id="ana")
    assert (summary.turn_range_start, summary.turn_range_end) == (1, 10)
    assert len(summarizer.calls) == 1
    assert summarizer.calls[0]["turns"].startswith("User: m0\nAssistant: ok: m0")
    # Tier 1 pruned to the last 5, only after the summary was stored.
    assert [t.turn_number for t in manager.buffer.get("trip", "ana")] == [6, 7, 8, 9, 10]
    chat(manager, "trip", "ana", *[f"n{i}" for i in range(5)])
    wait_idle(service)
    ranges = [
        (s.turn_range_start, s.turn_range_end)
        for s in manager.store.get_summaries("trip", user_id="ana")
    ]
    assert ranges == [(1, 10), (11, 20)]
    # Progressive: the second running summary was built from the first.
    assert summarizer.calls[-1]["summary"] == "summary #1 of 10 lines"


def test_token_trigger(memory: Any) -> None:
    manager, service, _ = memory
    long_turn = NewTurn("user", "word " * 50, tokens=TokenUsage(total=2100))
    manager.add_turns("trip", "ana", [long_turn])
    wait_idle(service)
    assert [
        (s.turn_range_start, s.turn_range_end)
        for s in manager.store.get_summaries("trip", user_id="ana")
    ] == [(1, 1)]


def test_token_trigger_counts_the_turns_text_not_the_models_prompt(memory: Any) -> None:
    manager, service, _ = memory
    # Replies billed at ~700 prompt tokens (the memory context) each: three exchanges used to
    # sum 2,000+ and trigger a summary after 6 messages instead of 10.
    for i in range(4):
        billed = TokenUsage(total=705, prompt=700, completion=5)
        turns = [
            NewTurn("user", f"m{i}", tokens=TokenUsage(3)),
            NewTurn("assistant", "ok", tokens=billed),
        ]
        manager.add_turns("trip", "ana", turns)
        wait_idle(service)
    assert manager.store.get_summaries("trip", user_id="ana") == []
    info = manager.store.get_conversation("trip", user_id="ana")
    assert info is not None
    assert info.total_tokens == 4 * (3 + 5)
    meta = manager.buffer.metadata("trip", "ana")
    assert meta is not None
    assert meta.total_tokens == 4 * (3 + 5)


class BilledChatModel(BaseChatModel):
    """A chat model that bills like Ollama: the prompt's tokens in, the reply's tokens out."""

    counter: Any
    prompts: list[int] = []
    bills: list[int] = []

    @property
    def _llm_type(self) -> str:
        return "billed-fake"

    def _generate(self, messages: list[Any], *_: Any, **__: Any) -> ChatResult:
        prompt = sum(self.counter.count_many([str(m.content) for m in messages]))
        self.prompts.append(prompt)
        text = (
            "Here is what I would suggest for that part of the trip, with the times and the "
            "prices I know of. Book the morning train if you can: it is cheaper and less "
            f"crowded, and you keep the afternoon free for the old town ({len(self.prompts)})."
        )
        completion = self.counter.count(text)
        self.bills.append(prompt + completion)
        usage = {
            "input_tokens": prompt,
            "output_tokens": completion,
            "total_tokens": prompt + completion,
        }
        message = AIMessage(text, usage_metadata=usage)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])


def test_token_trigger_fires_at_message_ten_with_the_chains_real_prompts(memory: Any) -> None:
    """The chat chain's own prompts (memory context, recent turns) billed as Ollama bills.

    With the model's prompt + completion counted as the reply's size, the 2,000-token trigger
    fired after 6 messages; counting each turn's own text it fires at message 10, as the
    message trigger does.
    """
    manager, service, _ = memory
    # What the user said in earlier conversations fills the memory context of every prompt.
    earlier = [
        f"Last year we spent {n} days in {place} in {month}; the hotel was {price} euros a "
        f"night and the train from the airport took {n * 10} minutes. We liked the {thing}."
        for n, place, month, price, thing in [
            (3, "Lisbon", "May", 120, "trams and the river walks"),
            (4, "Porto", "June", 95, "bookshops and the bridge"),
            (5, "Seville", "April", 110, "old town and the tapas bars"),
            (2, "Madrid", "March", 130, "museums and the parks"),
            (6, "Valencia", "July", 90, "beach and the rice dishes"),
            (3, "Granada", "October", 85, "hills and the palace"),
        ]
    ]
    for number, text in enumerate(earlier):
        manager.add_turns(
            f"earlier-{number}",
            "ana",
            [NewTurn("user", text), NewTurn("assistant", f"Noted, that sounds lovely: {text}")],
        )
    wait_idle(service)
    manager.tier3.drain()
    model = BilledChatModel(counter=manager.counter, prompts=[], bills=[])
    chain = chat_chain(manager, model)
    questions = [
        "We are planning a week in Portugal in May: Lisbon first, then Porto by train. "
        "What should we book first, and how early?",
        "Our budget is about 2000 euros for two people, flights from Berlin not included. "
        "Is that realistic for hotels and food?",
        "We would like a hotel near the river in Lisbon, quiet at night, with breakfast. "
        "Which neighbourhood would you pick?",
        "For Porto we only have two nights. What is worth seeing if we arrive on a Friday "
        "evening and leave on Sunday afternoon?",
        "One of us is vegetarian and the other does not eat fish. Will that be hard in "
        "Portugal, and what dishes should we look for?",
    ]
    summaries_after: list[int] = []
    for question in questions:
        chain.invoke({"input": question}, CFG)
        wait_idle(service)
        summaries_after.append(len(manager.store.get_summaries("trip", user_id="ana")))
    # The prompts carried the memory context (~550-900 tokens each): billed, the first three
    # replies alone exceed the trigger's 2,000 tokens.
    assert min(model.prompts) > 500, model.prompts
    assert sum(model.bills[:3]) > 2000, model.bills
    assert summaries_after == [0, 0, 0, 0, 1], (summaries_after, model.bills)
    (summary,) = manager.store.get_summaries("trip", user_id="ana")
    assert (summary.turn_range_start, summary.turn_range_end) == (1, 10)


def test_end_of_conversation_and_manual_trigger(memory: Any) -> None:
    manager, service, _ = memory
    chat(manager, "trip", "ana", "short one")
    wait_idle(service)
    assert manager.store.get_summaries("trip", user_id="ana") == []
    summary = service.end("trip", "ana").result(timeout=30)
    assert summary is not None
    assert (summary.turn_range_start, summary.turn_range_end) == (1, 2)
    assert service.consolidate("trip", "ana") is None  # nothing new: no-op


def test_idle_trigger(memory: Any) -> None:
    manager, service, _ = memory
    chat(manager, "trip", "ana", "old chat")
    chat(manager, "fresh", "ana", "new chat")
    with manager.store.engine.begin() as conn:
        conn.execute(
            update(conversations)
            .where(conversations.c.conversation_id == "ana/trip")
            .values(last_message_at=(utcnow() - timedelta(hours=2)).replace(tzinfo=None))
        )
    assert service.scan_idle() == 1
    wait_idle(service)
    assert len(manager.store.get_summaries("trip", user_id="ana")) == 1
    assert manager.store.get_summaries("fresh", user_id="ana") == []


def test_idle_scan_thread_runs_in_background(memory: Any) -> None:
    manager, service, _ = memory
    service.settings.idle_seconds = 0.0
    service.settings.scan_seconds = 0.1
    chat(manager, "trip", "ana", "idle soon")
    service.start()
    deadline = time.monotonic() + 30
    while not manager.store.get_summaries("trip", user_id="ana") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(manager.store.get_summaries("trip", user_id="ana")) == 1


def test_explicit_save_goes_to_user_facts_across_conversations(memory: Any) -> None:
    manager, service, _ = memory
    chat(manager, "trip", "ana", "Remember this: my passport number ends in 4471.")
    wait_idle(service)
    assert (
        len(manager.store.get_summaries("trip", user_id="ana")) == 1
    )  # explicit save consolidates too
    (fact,) = manager.facts("ana")
    assert fact.text == "my passport number ends in 4471."
    assert (fact.origin, fact.conversation_id, fact.turns) == ("explicit", "trip", (1, 1))
    # A new conversation of the same user has it; another user does not.
    chat(manager, "other", "ana", "hello again")
    context = manager.retrieve("other", "ana", "what is my passport number?")
    assert [item.content for item in context.facts] == [fact.text]
    assert context.facts[0].conversation_id == "trip"
    chat(manager, "bobs", "bob", "hi")
    bob = manager.retrieve("bobs", "bob", "what is my passport number?")
    assert bob.facts == ()
    assert all("4471" not in item.content for item in bob.items)


# -- idempotency, retries, no prune before store ------------------------------------------------


def test_bookkeeping_stays_bounded_over_many_conversations(memory: Any) -> None:
    """A long-running server consolidates ever new conversations: no per-conversation leak."""
    _, service, _ = memory
    for burst in range(10):
        futures = [service.schedule(f"c{burst}-{n}", "ana", "manual") for n in range(500)]
        for future in futures:
            assert future.result(timeout=60) is None  # no such conversation: nothing to do
    assert len(service._pending) <= 2_048  # of 5,000 conversations
    assert len(service._locks) == 64


def test_concurrent_consolidations_write_one_summary(memory: Any) -> None:
    manager, service, summarizer = memory
    summarizer.delay = 0.05
    for i in range(5):
        manager.store.append_turns("trip", [NewTurn("user", f"m{i}")], user_id="ana")
    other = ConsolidationService(manager.store, manager.buffer, summarizer)  # another replica
    results: list[object] = []
    barrier = threading.Barrier(4)

    def run(svc: ConsolidationService) -> None:
        barrier.wait()
        results.append(svc.consolidate("trip", "ana"))

    threads = [threading.Thread(target=run, args=(s,)) for s in (service, service, other, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(manager.store.get_summaries("trip", user_id="ana")) == 1
    assert sum(result is not None for result in results) == 1


def test_failed_llm_is_retried_with_backoff(memory: Any) -> None:
    manager, service, summarizer = memory
    waits: list[float] = []
    service.sleep = waits.append
    summarizer.failures = 2
    chat(manager, "trip", "ana", "a", "b", "c", "d", "e")
    wait_idle(service)
    assert len(manager.store.get_summaries("trip", user_id="ana")) == 1
    assert waits == [0.01, 0.02]


def test_failed_llm_leaves_buffer_intact(memory: Any) -> None:
    manager, service, summarizer = memory
    service.sleep = lambda _s: None
    summarizer.failures = 100
    chat(manager, "trip", "ana", "a", "b", "c", "d", "e")
    future = service._pending[("ana", "trip")]
    with pytest.raises(ConsolidationError, match="LLM reachable"):
        future.result(timeout=30)
    assert manager.store.get_summaries("trip", user_id="ana") == []
    assert [t.turn_number for t in manager.buffer.get("trip", "ana")] == list(range(1, 11))
    assert service.failures == 1


def test_no_prune_when_the_summary_cannot_be_stored(memory: Any, monkeypatch: Any) -> None:
    manager, service, _ = memory

    def broken(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(manager.store, "add_summary", broken)
    chat(manager, "trip", "ana", "a", "b", "c", "d", "e")
    with pytest.raises(RuntimeError):
        service._pending[("ana", "trip")].result(timeout=30)
    assert len(manager.buffer.get("trip", "ana")) == 10


def test_stop_abandons_the_summary_in_flight_and_the_backlog_resumes(memory: Any) -> None:
    manager, service, summarizer = memory
    summarizer.delay = 3.0  # a slow model
    chat(manager, "trip", "ana", *[f"m{i}" for i in range(5)])  # 10 messages: scheduled
    queued = service.schedule("boat", "ana", "manual")  # waits behind it
    deadline = time.monotonic() + 30
    while not summarizer.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service.stop(timeout=0.2) is False  # the call in flight is abandoned
    assert queued.cancelled()
    assert service.schedule("boat", "ana", "manual").cancelled()  # nothing new starts
    time.sleep(summarizer.delay + 0.5)  # the abandoned call returns: nothing is stored
    assert manager.store.get_summaries("trip", user_id="ana") == []
    assert len(summarizer.calls) == 1
    # The next process finds the conversation again and summarizes it.
    summarizer.delay = 0.0
    restarted = ConsolidationService(manager.store, manager.buffer, summarizer)
    assert restarted.resume() == 1
    wait_idle(restarted)
    restarted.stop()
    (summary,) = manager.store.get_summaries("trip", user_id="ana")
    assert (summary.turn_range_start, summary.turn_range_end) == (1, 10)


# -- tier-1 cache of the summary state -------------------------------------------------------------


@pytest.fixture
def sql_reads(memory: Any, monkeypatch: Any) -> dict[str, int]:
    """Counts reads of the conversation row and of the summarized range."""
    import memory_chain.consolidation as consolidation_module
    import memory_chain.manager as manager_module

    manager = memory[0]
    counts = {"get_conversation": 0, "summarized_through": 0}
    real_get = manager.store.get_conversation
    real_through = manager_module.summarized_through

    def get_conversation(*args: Any, **kwargs: Any) -> Any:
        counts["get_conversation"] += 1
        return real_get(*args, **kwargs)

    def through(*args: Any, **kwargs: Any) -> int:
        counts["summarized_through"] += 1
        return real_through(*args, **kwargs)

    monkeypatch.setattr(manager.store, "get_conversation", get_conversation)
    monkeypatch.setattr(manager_module, "summarized_through", through)
    monkeypatch.setattr(consolidation_module, "summarized_through", through)
    return counts


def test_cached_conversation_is_served_without_summary_reads(
    memory: Any, sql_reads: dict[str, int]
) -> None:
    manager, service, _ = memory
    chat(manager, "trip", "ana", "we fly to Lisbon", "hotel near the river")
    manager.buffer.clear()  # as after a restart: the next read fills tier 1 from SQL
    assert manager.retrieve("trip", "ana", "where do we fly?").summary is None
    filled = dict(sql_reads)
    assert filled["get_conversation"] >= 1
    # Cached now: requests and the trigger checks after writes read neither.
    chat(manager, "trip", "ana", "a", "b")  # 8 messages: below the trigger
    context = manager.retrieve("trip", "ana", "where do we fly?")
    assert sql_reads == filled
    assert [t.turn_number for t in context.recent] == list(range(1, 9))
    chat(manager, "trip", "ana", "c")  # 10 messages: consolidation runs
    wait_idle(service)
    (stored,) = manager.store.get_summaries("trip", user_id="ana")
    after_consolidation = dict(sql_reads)
    context = manager.retrieve("trip", "ana", "where do we fly?")
    assert sql_reads == after_consolidation
    # The running summary consolidation stored reaches the next request at once.
    assert context.summary == manager.store.get_conversation("trip", user_id="ana").summary
    assert context.summary == stored.summary_text
    assert manager.buffer.summary("trip", "ana") is not None
    assert manager.buffer.summary("trip", "ana").through == 10  # type: ignore[union-attr]


def test_summary_fill_older_than_a_write_is_not_cached(memory: Any) -> None:
    from memory_chain.tiers.buffer import CachedSummary

    manager, _, _ = memory
    chat(manager, "trip", "ana", "hello")
    buffer = manager.buffer
    epoch = buffer.summary_epoch  # a reader starts its SQL read here ...
    buffer.set_summary(
        "trip", CachedSummary("new summary", 2), user_id="ana"
    )  # ... consolidation stores
    buffer.set_summary(
        "trip", CachedSummary(None, 0), user_id="ana", epoch=epoch
    )  # ... the stale fill
    assert buffer.summary("trip", "ana") == CachedSummary("new summary", 2)
    # A fill that started after the write is kept.
    buffer.invalidate("trip", user_id="ana")
    manager.recent_turns("trip", "ana")
    assert buffer.summary("trip", "ana") is None or buffer.summary("trip", "ana").through == 0
    fresh = buffer.summary_epoch
    buffer.set_summary("trip", CachedSummary("from SQL", 2), user_id="ana", epoch=fresh)
    assert buffer.summary("trip", "ana") == CachedSummary("from SQL", 2)


def test_summary_stored_by_another_replica_is_picked_up_on_consolidation(memory: Any) -> None:
    manager, service, summarizer = memory
    for i in range(3):
        manager.store.append_turns("trip", [NewTurn("user", f"m{i}")], user_id="ana")
    assert manager.retrieve("trip", "ana", "m0").summary is None  # tier 1 caches "none yet"
    other = ConsolidationService(manager.store, TurnBuffer(), summarizer)  # another replica
    assert other.consolidate("trip", "ana") is not None
    # This replica runs its own consolidation (a trigger): nothing is left to summarize,
    # and its cached copy is refreshed from SQL.
    assert service.consolidate("trip", "ana") is None
    expected = manager.store.get_conversation("trip", user_id="ana").summary
    assert expected
    assert manager.retrieve("trip", "ana", "m0").summary == expected


# -- composed history and chat chain -------------------------------------------------------------


def test_composed_history_with_runnable_with_message_history(memory: Any) -> None:
    manager, service, _ = memory
    chat(manager, "trip", "ana", *[f"m{i}" for i in range(5)])
    wait_idle(service)
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    seen: list[list[Any]] = []

    def model(value: Any) -> AIMessage:
        seen.append(value.to_messages())
        return AIMessage("fine")

    chain = RunnableWithMessageHistory(
        prompt | RunnableLambda(model),
        lambda session_id: manager.history(session_id, "ana"),
        input_messages_key="question",
        history_messages_key="history",
    )
    chain.invoke({"question": "and now?"}, {"configurable": {"session_id": "trip"}})
    first = seen[0]
    assert first[0].type == "system"
    assert "Summary of the conversation so far" in first[0].content
    # The summary, the 5 turns left after pruning (6-10), the question.
    assert [m.content for m in first[1:]] == ["ok: m2", "m3", "ok: m3", "m4", "ok: m4", "and now?"]
    assert manager.store.get_turns("trip", user_id="ana")[-1].content == "fine"


def test_composed_history_async_path(memory: Any) -> None:
    """The async methods are langchain-core's defaults: the sync ones in a worker thread."""
    manager, _, _ = memory
    chain = RunnableWithMessageHistory(
        RunnableLambda(lambda value: AIMessage(f"heard {len(value['history'])}")),
        lambda session_id: manager.history(session_id, "ana"),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "trip"}}

    async def run() -> list[Any]:
        await chain.ainvoke({"question": "first"}, config)
        await chain.ainvoke({"question": "second"}, config)
        history = manager.history("trip", "ana")
        seen = await history.aget_messages()
        await history.aclear()
        return [seen, await history.aget_messages()]

    seen, cleared = asyncio.run(run())
    assert [(m.type, m.content) for m in seen] == [
        ("human", "first"),
        ("ai", "heard 0"),
        ("human", "second"),
        ("ai", "heard 2"),
    ]
    assert cleared == []
    assert manager.store.get_conversation("trip", user_id="ana") is None


def test_prompt_contains_memory_recent_turns_and_message(memory: Any) -> None:
    manager, _, _ = memory
    chat(manager, "trip", "ana", "We fly to Lisbon")
    context = manager.retrieve("trip", "ana", "Lisbon")
    built = build_prompt(
        system="Be helpful.",
        context=context,
        message="When?",
        budget=Budget.of(window=4096, max_tokens=None, default_reply=512),
        counter=manager.counter,
    )
    messages = built.messages
    assert messages[0].type == "system"
    assert messages[0].content.startswith("Be helpful.")
    assert [m.content for m in messages[1:]] == [
        "We fly to Lisbon",
        "ok: We fly to Lisbon",
        "When?",
    ]


def test_chat_chain_all_entry_points_store_both_turns(memory: Any) -> None:
    manager, service, _ = memory
    chain = chat_chain(manager, fake_llm())
    reply = chain.invoke({"input": "first"}, CFG)
    assert reply.content == "reply 0"
    assert "".join(c.content for c in chain.stream({"input": "second"}, CFG)) == "reply 1"
    assert len(chain.batch([{"input": "b1"}, {"input": "b2"}], CFG)) == 2

    async def run_async() -> list[str]:
        await chain.ainvoke({"input": "third"}, CFG)
        chunks = [c.content async for c in chain.astream({"input": "fourth"}, CFG)]
        events = [e async for e in chain.astream_events({"input": "fifth"}, CFG, version="v2")]
        assert any(e["event"] == "on_chat_model_stream" for e in events)
        return chunks

    assert len(asyncio.run(run_async())) > 1
    turns = manager.store.get_turns("trip", user_id="ana")
    assert len(turns) == 14
    # A batch runs its inputs at once: both messages are stored before either reply.
    assert [t.role for t in turns[:4]] == ["user", "assistant"] * 2
    assert sorted(t.role for t in turns[4:8]) == ["assistant", "assistant", "user", "user"]
    assert [t.role for t in turns[8:]] == ["user", "assistant"] * 3
    assert turns[0].tokens is not None
    assert turns[0].tokens.total > 0
    wait_idle(service)
    assert manager.store.get_summaries(
        "trip", user_id="ana"
    )  # 14 messages triggered a consolidation


def test_chat_chain_errors(memory: Any) -> None:
    manager, _, _ = memory
    chain = chat_chain(manager, fake_llm())
    with pytest.raises(InvalidInputError, match="conversation id"):
        chain.invoke({"input": "hi"})
    with pytest.raises(InvalidInputError, match="empty"):
        chain.invoke({"input": "  "}, CFG)
    with pytest.raises(InvalidInputError, match="input"):
        chain.invoke({"text": "hi"}, CFG)

    with pytest.raises(LLMUnavailableError, match="ollama_base_url"):
        chat_chain(manager, Down(messages=iter([]))).invoke({"input": "hi"}, CFG)
    # The message was stored before the model ran; no reply was.
    assert [(t.role, t.content) for t in manager.store.get_turns("trip", user_id="ana")] == [
        ("user", "hi")
    ]


class Down(GenericFakeChatModel):
    """A chat model whose server refuses connections."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("connection refused")

    def _stream(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("connection refused")


def test_a_failed_model_call_keeps_the_message_and_a_retry_answers_it(memory: Any) -> None:
    manager, _, _ = memory
    said = "Please remember this: the locker code is 4471."
    down = chat_chain(manager, Down(messages=iter([])))
    with pytest.raises(LLMUnavailableError):
        down.invoke({"input": said}, CFG)
    with pytest.raises(LLMUnavailableError):  # an async client retries
        asyncio.run(down.ainvoke({"input": said}, CFG))
    turns = manager.store.get_turns("trip", user_id="ana")
    assert [(t.role, t.content) for t in turns] == [("user", said)]  # stored once
    # The same message again, the model back: it is answered, not stored a second time.
    model = Scripted(replies=["Noted."])
    asyncio.run(chat_chain(manager, model).ainvoke({"input": " " + said}, CFG))
    turns = manager.store.get_turns("trip", user_id="ana")
    assert [(t.role, t.content) for t in turns] == [("user", said), ("assistant", "Noted.")]
    (prompt,) = model.prompts
    assert [m.content for m in prompt if m.type == "human"] == [" " + said]
    # A message the client gave up on stays in the context of the next one.
    with pytest.raises(LLMUnavailableError):
        chat_chain(manager, Down(messages=iter([]))).invoke({"input": "And the bike?"}, CFG)
    model = Scripted(replies=["It is blue."])
    chat_chain(manager, model).invoke({"input": "What colour is it?"}, CFG)
    assert [m.content for m in model.prompts[0][1:]] == [
        said,
        "Noted.",
        "And the bike?",
        "What colour is it?",
    ]
    turns = manager.store.get_turns("trip", user_id="ana")
    assert [t.content for t in turns][2:] == ["And the bike?", "What colour is it?", "It is blue."]


def test_an_exchange_is_embedded_once_its_reply_is_stored(memory: Any, monkeypatch: Any) -> None:
    manager, _, _ = memory
    woken: list[list[str]] = []  # the stored turns each time tier 3's worker is woken

    def notify() -> None:
        woken.append([t.content for t in manager.store.get_turns("trip", user_id="ana")])

    monkeypatch.setattr(manager.tier3, "notify", notify)
    chain = chat_chain(manager, fake_llm())
    chain.invoke({"input": "We land at 9."}, CFG)
    # Not when the message is stored (the worker would embed it while the model runs and
    # the reply is stored): once, after the reply.
    assert woken == [["We land at 9.", "reply 0"]]
    asyncio.run(chain.ainvoke({"input": "Gate 12."}, CFG))
    assert woken[1][-2:] == ["Gate 12.", "reply 1"]
    assert len(woken) == 2
    # A failed call wakes it too: the message is embedded without a reply.
    down = chat_chain(manager, Down(messages=iter([])))
    with pytest.raises(LLMUnavailableError):
        down.invoke({"input": "Taxi or bus?"}, CFG)
    with pytest.raises(LLMUnavailableError):
        asyncio.run(down.ainvoke({"input": "Or the metro?"}, CFG))
    assert [turns[-1] for turns in woken[2:]] == ["Taxi or bus?", "Or the metro?"]
    manager.tier3.catch_up()  # what the woken worker does
    assert manager.tier3.index.count() == 6


def test_chat_chain_runs_its_two_steps_as_lcel_runs(memory: Any) -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    manager, _, _ = memory
    chain = chat_chain(manager, fake_llm())

    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str | None] = []

        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            self.names.append(kwargs.get("name"))

    async def stream(text: str, config: dict[str, Any]) -> list[Any]:
        return [chunk async for chunk in chain.astream({"input": text}, config)]  # type: ignore[arg-type]

    runs = Runs()
    observed = asyncio.run(stream("first", {**CFG, "callbacks": [runs]}))
    assert runs.names == ["memory_chat", "retrieve_memory", "respond_and_remember"]
    unobserved = asyncio.run(stream("second", CFG))
    assert "".join(c.content for c in observed) == "reply 0"
    assert "".join(c.content for c in unobserved) == "reply 1"
    turns = manager.store.get_turns("trip", user_id="ana")
    assert [(t.role, t.content) for t in turns] == [
        ("user", "first"),
        ("assistant", "reply 0"),
        ("user", "second"),
        ("assistant", "reply 1"),
    ]
    assert turns[2].tokens is not None
    assert turns[2].tokens.total > 0
    with pytest.raises(InvalidInputError, match="conversation id"):
        asyncio.run(stream("hi", {}))


def test_summarization_chain_with_fake_model() -> None:
    llm = GenericFakeChatModel(messages=iter([AIMessage("Ana flies to Lisbon on 3 May.")]))
    chain = build_summarization_chain(llm)
    assert chain.invoke({"summary": "(none)", "turns": "User: hi"}).startswith("Ana")
    prompt = chain.first  # type: ignore[attr-defined]
    rendered = prompt.invoke({"summary": "S", "turns": "T"}).to_messages()
    assert "Keep every name, date, number, amount and place" in rendered[0].content
    assert rendered[1].content.endswith("Summary:")  # the worked example
    assert rendered[-1].content == "Earlier summary: S\n\nChat:\nT\n\nSummary:"


def test_add_turns_rejects_mixed_input(memory: Any) -> None:
    manager, _, _ = memory
    with pytest.raises(InvalidInputError, match="mix"):
        manager.add_turns("trip", "ana", [NewTurn("user", "a"), HumanMessage("b")])


def test_two_users_with_one_conversation_id_share_nothing(memory: Any) -> None:
    """Conversation ids are each user's own: every tier keeps ana's "notes" apart from bob's."""
    manager, service, summarizer = memory
    ana = ["Remember this: my locker code is 4471.", "ok", "The boat leaves at 9.", "ok"]
    bob = ["My cat is called Miso.", "ok", "I play the cello on Sundays.", "ok"]
    for user, texts in (("ana", ana), ("bob", bob)):
        turns = [NewTurn("user" if n % 2 == 0 else "assistant", t) for n, t in enumerate(texts)]
        stored = manager.add_turns("notes", user, turns)
        assert [t.turn_number for t in stored] == [1, 2, 3, 4]  # both start at 1
    manager.tier3.drain()
    assert manager.tier3.index.count() == 8  # no point overwrote another user's
    for user, texts in (("ana", ana), ("bob", bob)):
        assert [t.content for t in manager.store.get_turns("notes", user_id=user)] == texts
        assert [t.content for t in manager.recent_turns("notes", user)] == texts
        found = manager.find("locker code cat cello boat", user_id=user, limit=8)
        assert {item.content for item in found.items} <= set(texts)
    assert [f.text for f in manager.facts("ana")] == ["my locker code is 4471."]
    assert manager.facts("bob") == []
    # Consolidating both: one run each, each summary of its own turns.
    for user in ("ana", "bob"):
        service.consolidate("notes", user)
    (ana_summary,) = manager.store.get_summaries("notes", user_id="ana")
    (bob_summary,) = manager.store.get_summaries("notes", user_id="bob")
    assert "4471" in summarizer.calls[-2]["turns"]
    assert "Miso" in summarizer.calls[-1]["turns"]
    assert ana_summary.summary_text != bob_summary.summary_text
    # Purging bob's leaves ana's in every tier.
    assert manager.delete_conversation("notes", "bob")
    assert manager.tier3.index.count() == 4
    assert [t.content for t in manager.store.get_turns("notes", user_id="ana")] == ana
    assert manager.store.get_turns("notes", user_id="bob") == []
