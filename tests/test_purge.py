"""Purged, archived and expired conversations, through every read path, with the embedded index.

A purge removes the rows and the facts learnt from the conversation at once and queues the
deletion of the points in tier 2;
the vector store may be down then, and come back before the backfill has done it. Nothing of
the purged conversation may come back through any path meanwhile: the chat's memory context
(the prompt the model gets), the search endpoint's search, the LangServe retriever and the
user's facts. Archived conversations are left out too, unless the caller asks for them (the
facts learnt in them stay: they are about the user, not the conversation).
Retention purges conversations silent for too long, and each user's beyond a number, the same
way, on the idle scan.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableLambda
from sqlalchemy import update

from memory_chain.chain import build_chat_chain
from memory_chain.chat.core import ChatCore
from memory_chain.chat.models import OneModel
from memory_chain.consolidation import ConsolidationService, ConsolidationSettings
from memory_chain.manager import MemoryManager
from memory_chain.retention import Retention
from memory_chain.retrieval.retriever import MemoryRetriever
from memory_chain.schemas import NewTurn, utcnow
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.models import conversations
from memory_chain.tiers.vectors.edge import EdgeIndex
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tiers.vectors.index import VectorFilter
from memory_chain.tiers.vectors.indexer import TurnIndexer
from memory_chain.tiers.vectors.retriever import TurnRetriever
from memory_chain.tiers.vectors.tier import Tier3
from tests.fake_chat import Scripted

SECRET = [
    ("user", "Please remember this: my locker code is 4471."),
    ("assistant", "Noted: locker code 4471."),
    ("user", "The safe in the office opens with 9931."),
    ("assistant", "Noted: the safe opens with 9931."),
]
KEPT = [
    ("user", "Please remember this: we fly to Lisbon on 3 May."),
    ("assistant", "Noted: Lisbon on 3 May."),
    ("user", "Our locker at the airport is number 12."),
    ("assistant", "Noted: airport locker 12."),
]
QUERIES = ["What is my locker code?", "How does the safe open?", "When do we fly to Lisbon?"]
GONE = ("4471", "9931")


@pytest.fixture
def memory(tmp_path: Path, embeddings: SentenceEmbeddings) -> Iterator[MemoryManager]:
    engine = create_sql_engine(f"sqlite:///{tmp_path / 'memory.db'}")
    upgrade(engine)
    store = SQLStore(engine, queue_embeddings=True)
    index = EdgeIndex(tmp_path / "vectors", collection="conversation_memory")
    index.open()
    indexer = TurnIndexer(store.outbox(), index, embeddings)
    tier3 = Tier3(index=index, embeddings=embeddings, indexer=indexer)
    facts = FactStore(store.database, embed=embeddings.embed_documents)
    manager = MemoryManager(store, TurnBuffer(), tier3=tier3, facts=facts)
    yield manager
    manager.close()
    index.close()
    engine.dispose()


def _store(manager: MemoryManager, conversation_id: str, turns: list[tuple[str, str]]) -> None:
    manager.add_turns(conversation_id, "ana", [NewTurn(role, text) for role, text in turns])  # type: ignore[arg-type]


def _everything_read(manager: MemoryManager) -> tuple[str, dict[str, int]]:
    """What every read path returns for the queries, as text; and how many items each gave."""
    seen: list[str] = []
    counts = {"chat prompt": 0, "search endpoint": 0, "retriever": 0, "facts": 0}
    model = Scripted(otherwise="ok")
    chain = build_chat_chain(ChatCore(manager, OneModel(model)))
    retriever = MemoryRetriever(search=manager, user_id="ana", k=8)
    for query in QUERIES:
        chain.invoke(
            {"input": query}, {"configurable": {"conversation_id": "now", "user_id": "ana"}}
        )
        seen.append(model.prompt_text())
        counts["chat prompt"] += len(manager.retrieve("now", "ana", query).items)
        found = manager.search("kept", "ana", query, k=8).items
        counts["search endpoint"] += len(found)
        seen.extend(f"{item.conversation_id} {item.content}" for item in found)
        documents = retriever.invoke(query)
        counts["retriever"] += len(documents)
        seen.extend(f"{d.metadata['conversation_id']} {d.page_content}" for d in documents)
    facts = manager.facts("ana", include=["superseded", "dismissed"])
    counts["facts"] = len(facts)
    seen.extend(f"{fact.conversation_id} {fact.text}" for fact in facts)
    manager.delete_conversation("now", "ana")  # the probes' own chat
    return "\n".join(seen), counts


def _points_of(manager: MemoryManager, conversation_id: str) -> tuple[int, int]:
    """The conversation's points in tier 3, and the facts learnt from it in tier 2."""
    assert manager.tier3 is not None
    scope = VectorFilter(user_id="ana", conversation_id=conversation_id)
    learnt = manager.facts("ana", conversation_id=conversation_id, include=["dismissed"])
    return manager.tier3.index.count(scope), len(learnt)


def test_a_conversation_purged_while_tier3_is_down_never_comes_back(
    memory: MemoryManager,
) -> None:
    manager = memory
    assert manager.tier3 is not None
    _store(manager, "secret", SECRET)
    _store(manager, "kept", KEPT)
    manager.tier3.drain()
    assert _points_of(manager, "secret") == (4, 1)
    before, _ = _everything_read(manager)
    assert "4471" in before  # what the purge must take away was found by the paths

    # The vector store goes down (the embedded shard closes), then the conversation is purged.
    manager.tier3.index.close()
    assert manager.delete_conversation("secret", "ana")
    assert manager.facts("ana", conversation_id="secret", include=["dismissed"]) == []
    tasks = manager.store.tasks().pending()  # the deletion waits in tier 2
    assert [(task.kind, task.conversation_id) for task in tasks] == [("forget", "secret")]
    down, counts_down = _everything_read(manager)
    assert not [word for word in GONE if word in down], down
    assert "Lisbon" in down  # tiers 1-2 still answer

    # The store is back, the deletion not done yet: its points are all still there.
    manager.tier3.index.open()
    stale = _points_of(manager, "secret")
    assert stale == (4, 0)
    back, counts_back = _everything_read(manager)
    assert not [word for word in GONE if word in back], back
    assert "secret" not in back
    assert "Lisbon" in back
    assert counts_back["facts"] == 1  # the kept conversation's fact, not the purged one's

    # The backfill does the queued deletion: nothing is left behind.
    assert manager.tier3.drain() == 0
    assert manager.store.tasks().count() == 0
    assert _points_of(manager, "secret") == (0, 0)
    assert _points_of(manager, "kept") == (4, 1)
    after, counts_after = _everything_read(manager)
    assert not [word for word in GONE if word in after], after
    print(
        f"purged while down: {stale[0]} turn points left in tier 3 until the backfill ran, "
        f"0 after (its fact went with its rows); items read per path down {counts_down}, back "
        f"{counts_back}, after {counts_after}; none of the purged conversation"
    )


def test_archived_conversations_are_found_only_when_asked(memory: MemoryManager) -> None:
    manager = memory
    assert manager.tier3 is not None
    _store(manager, "old", SECRET)
    _store(manager, "kept", KEPT)
    manager.tier3.drain()
    manager.store.set_status("old", "archived", user_id="ana")
    query = "What is my locker code?"
    default = manager.find(query, user_id="ana", limit=10).items
    assert default
    assert {item.conversation_id for item in default} == {"kept"}
    asked = manager.find(query, user_id="ana", limit=10, include_archived=True).items
    assert "old" in {item.conversation_id for item in asked}
    # Named, an archived conversation is searched (its own search endpoint).
    named = manager.search("old", "ana", query, k=5).items
    assert named
    assert all(item.conversation_id == "old" for item in named)
    retriever = MemoryRetriever(search=manager, user_id="ana", k=10)
    assert {d.metadata["conversation_id"] for d in retriever.invoke(query)} == {"kept"}
    with_archived = retriever.invoke(query, include_archived=True)
    assert "old" in {d.metadata["conversation_id"] for d in with_archived}
    # Facts are the user's: those learnt in an archived conversation still hold.
    assert {fact.conversation_id for fact in manager.facts("ana")} == {"kept", "old"}


def _age(manager: MemoryManager, user_id: str, conversation_id: str, days: float) -> None:
    """Make a conversation look silent for ``days`` (its last message that long ago)."""
    when = (utcnow() - timedelta(days=days)).replace(tzinfo=None)
    with manager.store.engine.begin() as conn:
        conn.execute(
            update(conversations)
            .where(conversations.c.conversation_id == f"{user_id}/{conversation_id}")
            .values(last_message_at=when, created_at=when)
        )


def test_retention_purges_old_and_surplus_conversations_from_every_tier(
    memory: MemoryManager,
) -> None:
    manager = memory
    assert manager.tier3 is not None
    for user, conversation, days in [
        ("ana", "old", 100),
        ("ana", "recent", 1),
        ("bob", "b1", 20),
        ("bob", "b2", 10),
        ("bob", "b3", 5),
    ]:
        _store_as(manager, user, conversation, f"Please remember this: {conversation} is mine.")
        _age(manager, user, conversation, days)
    manager.tier3.drain()
    assert not Retention(manager, days=None, max_per_user=None).enabled
    retention = Retention(manager, days=30, max_per_user=2)
    assert retention.sweep() == 2  # ana's silent "old", bob's least recent beyond two
    assert retention.sweep() == 0
    left = {
        (user, info.conversation_id)
        for user in ("ana", "bob")
        for info in manager.store.list_conversations(user_id=user)
    }
    assert left == {("ana", "recent"), ("bob", "b2"), ("bob", "b3")}
    scroll = {(p.payload.user_id, p.payload.conversation_id) for p in manager.tier3.index.scroll()}
    assert scroll == left
    facts = {
        (user, fact.conversation_id)
        for user in ("ana", "bob")
        for fact in manager.facts(user, include=["superseded", "dismissed"])
    }
    assert facts == left


def _store_as(manager: MemoryManager, user: str, conversation: str, text: str) -> None:
    manager.add_turns(conversation, user, [NewTurn("user", text), NewTurn("assistant", "Noted.")])


def test_the_idle_scan_runs_the_retention_sweep(memory: MemoryManager) -> None:
    manager = memory
    _store_as(manager, "ana", "old", "An old chat.")
    _age(manager, "ana", "old", 400)
    service = ConsolidationService(
        manager.store,
        manager.buffer,
        RunnableLambda(lambda _inputs: "summary"),
        settings=ConsolidationSettings(scan_seconds=0.05),
    )
    service.on_scan.append(Retention(manager, days=365, max_per_user=None).sweep)
    service.start()
    try:
        deadline = time.monotonic() + 30
        while manager.store.list_conversations(user_id="ana") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        service.stop()
    assert manager.store.list_conversations(user_id="ana") == []


def test_points_carry_tags_and_their_ranges_summary_and_filter_by_tag(
    memory: MemoryManager,
) -> None:
    manager = memory
    assert manager.tier3 is not None
    turns = [
        ("user", "How do I fix this Python ImportError?"),
        ("assistant", "Install the package:\n```\npip install requests\n```"),
        ("user", "Please remember this: the build server is called ares."),
        ("assistant", "Noted."),
    ]
    manager.add_turns("dev", "ana", [NewTurn(role, text) for role, text in turns])  # type: ignore[arg-type]
    manager.tier3.drain()
    payloads = {p.payload.turn_number: p.payload for p in manager.tier3.index.scroll()}
    assert payloads[1].tags == ("question", "technical")
    assert payloads[2].tags == ("code", "technical")
    assert payloads[3].tags == ("technical", "fact")
    assert payloads[4].tags == ()
    assert all(p.summary is None for p in payloads.values())
    # A summary of turns 1-4 is stored: their points carry it once the backfill has run.
    manager.store.add_summary("dev", "Ana fixed an import error.", (1, 4), user_id="ana")
    manager.tier3.drain()
    summaries = {p.payload.summary for p in manager.tier3.index.scroll()}
    assert summaries == {"Ana fixed an import error."}
    # Turns embedded after the summary (a reindex) get it at once.
    manager.tier3.reindex(user_id="ana")
    assert {p.payload.summary for p in manager.tier3.index.scroll()} == summaries
    # Filtered by tag, through tier 3's retriever and the fused retriever alike.
    turn_retriever = TurnRetriever(semantic=manager.tier3, user_id="ana", k=10)
    questions = turn_retriever.invoke("python error", tags=["question"])
    assert [d.metadata["turn_number"] for d in questions] == [1]
    assert questions[0].metadata["summary"] == "Ana fixed an import error."
    fused = MemoryRetriever(search=manager, user_id="ana", k=10, tags=["code"])
    documents = fused.invoke("how to install the package")
    assert documents
    assert all("code" in d.metadata["tags"] for d in documents)
    assert {d.metadata["turn_number"] for d in documents} == {2}


def test_a_dismissed_fact_stays_dismissed_through_a_reindex(memory: MemoryManager) -> None:
    manager = memory
    assert manager.tier3 is not None
    _store_as(manager, "ana", "trip", "Please remember this: my seat is 14C.")
    _store_as(manager, "ana", "work", "Please remember this: the report is due Friday.")
    manager.tier3.drain()
    facts = {f.conversation_id: f for f in manager.facts("ana")}
    assert set(facts) == {"trip", "work"}
    assert manager.dismiss_fact("ana", "0" * 32) is None
    assert manager.dismiss_fact("bob", facts["trip"].id) is None  # another user's
    dismissed = manager.dismiss_fact("ana", facts["trip"].id)
    assert dismissed is not None
    assert dismissed.status == "dismissed"
    assert [f.conversation_id for f in manager.facts("ana")] == ["work"]
    manager.tier3.reindex()
    assert [f.conversation_id for f in manager.facts("ana")] == ["work"]
    assert "14C" not in "".join(i.content for i in manager.retrieve("x", "ana", "seat?").facts)
    first = manager.store.get_turns("trip", user_id="ana")[0]
    assert first.content.endswith("14C.")  # the turn itself is kept
