"""Deletion that deletes, and only what it should: every kind of deletion, every read path.

Each kind of deletion a user has (a fact dismissed, a conversation purged, the user erased,
a conversation past the retention limit) is made on a stack with every tier (SQLite and the
embedded vector index, or PostgreSQL and pgvector; the real embedding model), then every
place memory shows data is
read back for the deleted thing's words: tier 1, every text column of tier 2, tier 3's
points, the chat's prompt, the export, the LangGraph store and the MCP tools. What was kept
must still be found there (the probes are live), and nothing may point at a row that no
longer exists (:func:`dangling`).

Facts follow their sources: a fact said in two conversations survives the purge of one; a
fact superseded by one learnt in a purged conversation holds again. An erasure and a
consolidation filing facts are serialized (the user's fact lock): on PostgreSQL, threads
racing a purge against a filing never leave facts of the purged conversation.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda
from sqlalchemy import inspect, select, text, update

from memory_chain.chain import build_chat_chain
from memory_chain.chat.core import ChatCore
from memory_chain.chat.models import OneModel
from memory_chain.config import MemorySettings
from memory_chain.consolidation import ConsolidationService
from memory_chain.extraction import ExtractedFact, FactExtractor
from memory_chain.facts.model import FactDraft
from memory_chain.integrations.mcp import MemoryTools
from memory_chain.integrations.store import MemoryStore
from memory_chain.retention import Retention
from memory_chain.schemas import NewTurn, utcnow
from memory_chain.services import Services, open_services
from memory_chain.tiers.sql.models import conversations
from memory_chain.tiers.sql.rows import client_id
from memory_chain.tiers.vectors.index import VectorFilter
from tests.conftest import _fresh_postgres_database
from tests.fake_chat import Scripted, ScriptedFacts

pytestmark = pytest.mark.slow


@pytest.fixture
def services(sql_url: str, tmp_path: Path) -> Iterator[Services]:
    """Every tier: SQLite with the embedded vector index, or PostgreSQL with pgvector."""
    on_postgres = sql_url.startswith("postgresql")
    settings = MemorySettings(
        data_dir=tmp_path / "data",
        llm_fallback="off",
        database_url=sql_url if on_postgres else None,
        vector_backend="pgvector" if on_postgres else "embedded",
    )
    opened = open_services(settings)
    try:
        yield opened
    finally:
        opened.close()


def _say(services: Services, user: str, conversation: str, *texts: str) -> None:
    turns: list[NewTurn] = []
    for said in texts:
        turns += [NewTurn("user", said), NewTurn("assistant", "Noted.")]
    services.manager.add_turns(conversation, user, turns)


def _settle(services: Services) -> None:
    assert services.vectors is not None
    services.vectors.apply_tasks()
    services.vectors.drain()


def _prompt(services: Services, user: str, question: str) -> str:
    model = Scripted(otherwise="ok")
    chain = build_chat_chain(ChatCore(services.manager, OneModel(model)))
    config = {"configurable": {"conversation_id": "probe", "user_id": user}}
    chain.invoke({"input": question}, config)
    services.manager.delete_conversation("probe", user)  # the probe's own chat
    return model.prompt_text()


def _tier2_text(services: Services) -> str:
    """Every text value of every tier-2 table (full-text tables' own content included)."""
    engine = services.engine
    seen: list[str] = []
    with engine.connect() as conn:
        for table in inspect(engine).get_table_names():
            if table.endswith(("_data", "_idx", "_docsize", "_config", "_content")):
                continue  # FTS5 shadow tables: the FTS table itself is read instead
            if table in ("vector_points", "vector_collections"):
                continue  # tier 3's pgvector tables (read by _points; a vector's digits match)
            for row in conn.execute(text(f'SELECT * FROM "{table}"')):
                seen.extend(str(value) for value in row if isinstance(value, str))
    return "\n".join(seen)


def _points(services: Services, user: str) -> str:
    assert services.vectors is not None
    points = services.vectors.index.scroll(VectorFilter(user_id=user))
    return "\n".join(str(point.payload.to_dict()) for point in points)


def everything(services: Services, user: str, question: str) -> dict[str, str]:
    """What every read path shows ``user`` about ``question``, as text per path."""
    manager = services.manager
    listed = manager.conversations(user, limit=1000)
    tier1 = [
        turn.content
        for info in listed
        for turn in manager.working_memory(info.conversation_id, user)[0]
    ]
    store = MemoryStore(services)
    stored = [
        str(item.value)
        for namespace in store.list_namespaces(prefix=(user,))
        for item in store.search(namespace, query=question, limit=100)
    ]
    tools = MemoryTools(manager)
    mcp = [
        tools.search(user, question, None, 20).model_dump_json(),
        tools.facts(user, include_history=False).model_dump_json(),
        tools.conversations(user).model_dump_json(),
    ]
    return {
        "tier 1": "\n".join(tier1),
        "tier 2": _tier2_text(services),
        "tier 3": _points(services, user),
        "prompt": _prompt(services, user, question),
        "export": "".join(manager.export(user)),
        "store": "\n".join(stored),
        "mcp": "\n".join(mcp),
    }


def dangling(services: Services) -> list[str]:
    """Rows that point at rows that do not exist (empty when all is well)."""
    found: list[str] = []
    with services.engine.connect() as conn:
        facts = {row.id: row for row in conn.execute(text("SELECT * FROM facts"))}
        stored = set(conn.execute(select(conversations.c.conversation_id)).scalars())
        for fact in facts.values():
            if fact.superseded_by is not None and fact.superseded_by not in facts:
                found.append(f"fact {fact.text!r} superseded by a fact that is gone")
            if fact.status == "superseded" and fact.superseded_by is None:
                found.append(f"fact {fact.text!r} superseded by nothing")
        columns = {c["name"] for c in inspect(services.engine).get_columns("facts")}
        if "conversation_id" in columns:
            for fact in facts.values():
                key = f"{fact.user_id}/{fact.conversation_id}"
                if fact.conversation_id is not None and key not in stored:
                    found.append(f"fact {fact.text!r} learnt in a purged conversation")
        for table in ("conversation_turns", "conversation_summaries"):
            rows = conn.execute(text(f"SELECT DISTINCT conversation_id FROM {table}"))
            found += [f"{table} of purged {key}" for key in rows.scalars() if key not in stored]
        orphans = conn.execute(
            text(
                "SELECT count(*) FROM embedding_outbox WHERE turn_id NOT IN "
                "(SELECT id FROM conversation_turns)"
            )
        ).scalar()
        if orphans:
            found.append(f"{orphans} outbox rows of purged turns")
    assert services.vectors is not None
    owners = {client_id(key): key.split("/", 1)[0] for key in stored}
    for point in services.vectors.index.scroll():
        cid = point.payload.conversation_id
        if owners.get(cid) != point.payload.user_id:
            found.append(f"a point of purged conversation {cid!r}")
    return found


def _shows(shown: str, word: str) -> bool:
    """Whether ``word`` is in ``shown`` as a word: a probe of digits ("3390") is also found
    inside the random hex ids a dump shows ("...5a33907ab..."), which is not the text."""
    return re.search(rf"(?<![0-9A-Za-z]){re.escape(word)}(?![0-9A-Za-z])", shown) is not None


def _absent(seen: dict[str, str], *words: str) -> None:
    for path, shown in seen.items():
        for word in words:
            assert not _shows(shown, word), f"{word!r} still shown by {path}"


def _present(seen: dict[str, str], word: str, *paths: str) -> None:
    for path in paths:
        assert _shows(seen[path], word), f"{word!r} missing from {path} (the probe is not live)"


def test_a_purged_conversation_leaves_nothing_in_any_tier_or_door(services: Services) -> None:
    _say(services, "ana", "secret", "Please remember this: my locker code is 4471.")
    _say(services, "ana", "secret", "The safe in the office opens with 9931.")
    services.store.add_summary(
        "secret", "Ana's safe opens with 9931.", (1, 2), running_summary="safe 9931", user_id="ana"
    )
    _say(services, "ana", "kept", "Please remember this: we fly to Lisbon on 3 May.")
    _settle(services)
    before = everything(services, "ana", "What is my locker code, and the safe?")
    _present(before, "4471", "tier 2", "tier 3", "prompt", "export", "store", "mcp")

    assert services.manager.delete_conversation("secret", "ana")
    _settle(services)
    after = everything(services, "ana", "What is my locker code, and the safe?")
    _absent(after, "4471", "9931")
    _present(after, "Lisbon", "tier 2", "tier 3", "export", "store", "mcp")
    assert dangling(services) == []


def test_an_erased_user_leaves_nothing_and_the_other_user_keeps_all(services: Services) -> None:
    _say(services, "ana", "trip", "Please remember this: my passport number is X123.")
    _say(services, "bob", "trip", "Please remember this: my bike lock is 5512.")
    store = MemoryStore(services)
    store.put(("ana", "notes"), "diet", {"text": "ana eats no gluten-Q7"})
    store.put(("bob", "notes"), "diet", {"text": "bob eats everything-Z9"})
    _settle(services)

    services.manager.delete_user("ana")
    _settle(services)
    ana = everything(services, "ana", "passport and diet")
    _absent(ana, "X123", "gluten-Q7")
    bob = everything(services, "bob", "bike lock and diet")
    _present(bob, "5512", "tier 2", "tier 3", "prompt", "export", "store", "mcp")
    assert "everything-Z9" in bob["store"]
    assert dangling(services) == []


def test_retention_leaves_nothing_of_an_expired_conversation(services: Services) -> None:
    _say(services, "ana", "old", "Please remember this: my old pin is 3390.")
    _say(services, "ana", "new", "Please remember this: my gym is on Elm Street.")
    with services.engine.begin() as conn:
        conn.execute(
            update(conversations)
            .where(conversations.c.conversation_id == "ana/old")
            .values(last_message_at=(utcnow() - timedelta(days=40)).replace(tzinfo=None))
        )
    _settle(services)

    assert Retention(services.manager, days=30, max_per_user=None).sweep() == 1
    _settle(services)
    seen = everything(services, "ana", "What is my pin? Where is my gym?")
    _absent(seen, "3390")
    _present(seen, "Elm Street", "tier 2", "tier 3", "prompt", "export")
    assert dangling(services) == []


def test_a_dismissed_fact_leaves_every_prompt_store_and_mcp_answer(services: Services) -> None:
    _say(services, "ana", "health", "Please remember this: I take 20 mg of Zorvax daily.")
    _say(services, "ana", "trip", "Please remember this: my seat is 14C.")
    _settle(services)
    (fact,) = [f for f in services.manager.facts("ana") if "Zorvax" in f.text]

    assert services.manager.dismiss_fact("ana", fact.id) is not None
    seen = everything(services, "ana", "Which medicine do I take?")
    # The turn that said it stays in its conversation (tiers 1-3, the export's turns); the
    # fact leaves every answer memory gives: the prompt (the fact and the recalled turns
    # stating it), the store and the MCP tools.
    for path in ("prompt", "store", "mcp"):
        assert "Zorvax" not in seen[path], f"the dismissed fact still shown by {path}"
    _present(seen, "14C", "prompt", "store", "mcp")
    exported = [json.loads(line) for line in seen["export"].splitlines()]
    facts = [line for line in exported if line["format"] == "memory-chain/fact"]
    assert [f["status"] for f in facts if "Zorvax" in f["text"]] == ["dismissed"]
    assert dangling(services) == []


def test_a_fact_said_in_two_conversations_survives_the_purge_of_one(services: Services) -> None:
    _say(services, "ana", "trip-1", "Please remember this: my seat is 14C.")
    _say(services, "ana", "trip-2", "Please remember this: my seat is 14C.")
    assert [f.text for f in services.manager.facts("ana")] == ["my seat is 14C."]

    services.manager.delete_conversation("trip-1", "ana")
    assert [f.text for f in services.manager.facts("ana")] == ["my seat is 14C."]
    assert "14C" in _prompt(services, "ana", "Which seat do I have?")
    assert dangling(services) == []

    services.manager.delete_conversation("trip-2", "ana")
    assert services.manager.facts("ana", include=["superseded", "dismissed"]) == []
    assert dangling(services) == []


def test_the_older_value_holds_again_when_its_superseder_is_purged(services: Services) -> None:
    manager = services.manager
    _say(services, "ana", "old", "I live in Lisbon, near the river.")
    _say(services, "ana", "new", "Big news: we moved from Lisbon to Porto last month.")
    lisbon = manager.fact_store.add(
        "ana",
        FactDraft(
            "I live in Lisbon.",
            kind="biography",
            origin="extracted",
            subject="home",
            conversation_id="old",
            turns=(1, 1),
        ),
    ).fact
    porto = manager.fact_store.add(
        "ana",
        FactDraft(
            "I moved to Porto.",
            kind="biography",
            origin="extracted",
            subject="home",
            conversation_id="new",
            turns=(1, 1),
        ),
    )
    assert porto.replaced is not None
    assert porto.replaced.id == lisbon.id
    _settle(services)

    manager.delete_conversation("new", "ana")
    _settle(services)
    assert [(f.id, f.status) for f in manager.facts("ana")] == [(lisbon.id, "current")]
    prompt = _prompt(services, "ana", "Where do I live?")
    assert "I live in Lisbon." in prompt
    assert "Porto" not in prompt
    # The turn that stated the older value is recalled again, not dropped as dismissed.
    found = manager.retrieve("elsewhere", "ana", "Where do I live? Lisbon river").items
    assert any("near the river" in item.content for item in found)
    assert dangling(services) == []


def test_an_erasure_during_consolidation_leaves_no_facts(services: Services) -> None:
    """The erasure lands after consolidation extracted a range's facts, before it files them."""
    _say(services, "ana", "home", "I live in Lisbon, near the river.")
    llm = ScriptedFacts(replies=[json.dumps({"facts": [_extracted("I live in Lisbon.", 1)]})])
    extractor = FactExtractor(llm, services.manager.fact_store)
    summarizer = RunnableLambda(lambda _inputs: "Ana lives in Lisbon.")
    consolidation = ConsolidationService(
        services.store, services.buffer, summarizer, extractor=extractor
    )
    file = extractor.file

    def erase_first(*args: Any, **kwargs: Any) -> Any:
        services.manager.delete_user("ana")
        return file(*args, **kwargs)

    extractor.file = erase_first  # type: ignore[method-assign]
    try:
        consolidation.consolidate("home", "ana")
    finally:
        consolidation.stop()
    assert llm.prompts, "the extraction ran"
    assert services.manager.facts("ana", include=["superseded", "dismissed"]) == []
    assert dangling(services) == []


@pytest.fixture
def postgres_services(postgres_url: str, tmp_path: Path) -> Iterator[Services]:
    """Every tier on PostgreSQL with pgvector (for the races: SQLite serializes writers)."""
    url = _fresh_postgres_database(postgres_url)
    settings = MemorySettings(
        data_dir=tmp_path / "pg", llm_fallback="off", database_url=url, vector_backend="pgvector"
    )
    opened = open_services(settings)
    try:
        yield opened
    finally:
        opened.close()


_WAITING = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
_FACTS_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended('facts:ana', 0))")


def _until(done: Any, what: str) -> None:
    """Wait for ``done()`` (a condition, not a duration: the deadline only stops a hang)."""
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.01)


@pytest.mark.postgres
@pytest.mark.parametrize("first", ["filing", "purge"])
def test_a_purge_racing_a_consolidations_filing_leaves_no_facts(
    postgres_services: Services, first: str
) -> None:
    """Both wait on the user's fact lock, held here; released, either may go first.

    The filing first: it files, and the purge deletes what it filed. The purge first: the
    filing finds no conversation. Either way no fact of the purged conversation stays (a purge
    that took no lock went ahead at once, and the filing then filed facts of a purged one).
    """
    services = postgres_services
    _say(services, "ana", "home", "I live in Lisbon, near the river.")
    llm = ScriptedFacts(replies=[json.dumps({"facts": [_extracted("I live in Lisbon.", 1)]})])
    consolidation = ConsolidationService(
        services.store,
        services.buffer,
        RunnableLambda(lambda _inputs: "Ana lives in Lisbon."),
        extractor=FactExtractor(llm, services.manager.fact_store),
    )
    errors: list[BaseException] = []

    def run(work: Any) -> threading.Thread:
        def target() -> None:
            try:
                work()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    def waiting() -> int:
        with services.engine.connect() as conn:
            return int(conn.execute(_WAITING).scalar_one())

    def file() -> None:
        consolidation.consolidate("home", "ana")

    def purge() -> None:
        services.manager.delete_conversation("home", "ana")

    try:
        with services.engine.connect() as holder:
            holder.execute(_FACTS_LOCK)  # held until this transaction ends
            threads = []
            for step in (file, purge) if first == "filing" else (purge, file):
                threads.append(run(step))
                _until(
                    lambda: waiting() >= len(threads) or not threads[-1].is_alive(),
                    f"{step.__name__} to wait for the fact lock",
                )
            holder.rollback()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
    finally:
        consolidation.stop()
    if first == "filing":
        assert llm.prompts, "the extraction ran"
    assert services.manager.facts("ana", include=["superseded", "dismissed"]) == []
    assert dangling(services) == []


@pytest.mark.postgres
def test_purges_and_filings_in_free_races_leave_no_facts(postgres_services: Services) -> None:
    """Threads started together, no lock held by the test: whatever the order, no facts stay."""
    services = postgres_services
    extractor = FactExtractor(ScriptedFacts(), services.manager.fact_store)
    found = [ExtractedFact("I live in Lisbon.", "biography", "home", 1, said_at=utcnow())]
    for round_ in range(6):
        conversation = f"home-{round_}"
        _say(services, "ana", conversation, "I live in Lisbon, near the river.")
        barrier = threading.Barrier(2)

        def file(conversation: str = conversation, barrier: Any = barrier) -> None:
            barrier.wait()
            extractor.file("ana", conversation, found)

        def purge(conversation: str = conversation, barrier: Any = barrier) -> None:
            barrier.wait()
            services.manager.delete_conversation(conversation, "ana")

        threads = [threading.Thread(target=step) for step in (file, purge)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert services.manager.facts("ana", include=["superseded", "dismissed"]) == []
    assert dangling(services) == []


def _extracted(text: str, turn: int) -> dict[str, Any]:
    return {"text": text, "kind": "biography", "subject": "home", "turn": turn, "replaces": None}
