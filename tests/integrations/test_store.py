"""MemoryStore, LangGraph's BaseStore over memory_chain, on the real tiers.

The behaviours LangGraph's own store tests check (put/get/search/list_namespaces/delete,
filters, limit/offset, async) on the agent's own namespaces, on SQLite and PostgreSQL
without an embedding model (queries match words) and on SQLite with the real model (queries
rank by cosine); the facts and conversations namespaces over memory_chain's own rows; user
isolation, durability, erasure; and ``create_agent(store=...)`` with tools that use
``runtime.store``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.store.base import GetOp, ListNamespacesOp, PutOp, SearchOp

from memory_chain.config import MemorySettings
from memory_chain.errors import InvalidInputError
from memory_chain.integrations.store import MemoryStore
from memory_chain.schemas import NewTurn
from memory_chain.services import Services, open_services
from tests.fake_chat import RecordingModel

ANA = ("ana", "docs")
DOCS = [
    ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
    ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
    ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
    ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
]


def _put_docs(store: MemoryStore, namespace: tuple[str, ...] = ANA) -> None:
    for key, value in DOCS:
        store.put(namespace, key, value)


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def plain_settings(sql_url: str, tmp_path: Path) -> MemorySettings:
    """Tier 2 only, on SQLite or PostgreSQL: no embedding model, queries match words."""
    database = sql_url if sql_url.startswith("postgresql") else None
    return MemorySettings(
        data_dir=tmp_path / "plain",
        database_url=database,
        memory_tier3_enabled=False,
        llm_fallback="off",
    )


@pytest.fixture
def reopen() -> Iterator[Callable[[MemorySettings], tuple[Services, MemoryStore]]]:
    opened: list[Services] = []

    def open_store(settings: MemorySettings) -> tuple[Services, MemoryStore]:
        services = open_services(settings)
        opened.append(services)
        return services, MemoryStore(services)

    yield open_store
    for services in opened:
        services.close()


@pytest.fixture
def plain(
    plain_settings: MemorySettings,
    reopen: Callable[[MemorySettings], tuple[Services, MemoryStore]],
) -> tuple[Services, MemoryStore]:
    return reopen(plain_settings)


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """SQLite, the embedded vector engine and the real embedding model."""
    opened = open_services(MemorySettings(data_dir=tmp_path / "data", llm_fallback="off"))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def store(services: Services) -> MemoryStore:
    return MemoryStore(services)


# -- the agent's own namespaces: what LangGraph's store tests check ---------------------------


def test_put_get_update_delete(plain: tuple[Services, MemoryStore]) -> None:
    _, store = plain
    assert store.get(ANA, "doc1") is None
    store.put(ANA, "doc1", {"text": "red apple", "tags": ["fruit"], "n": {"a": 1}})
    first = store.get(ANA, "doc1")
    assert first is not None
    assert (first.namespace, first.key) == (ANA, "doc1")
    assert first.value == {"text": "red apple", "tags": ["fruit"], "n": {"a": 1}}
    store.put(ANA, "doc1", {"text": "green apple"})
    second = store.get(ANA, "doc1")
    assert second is not None
    assert second.value == {"text": "green apple"}
    assert second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    store.delete(ANA, "doc1")
    assert store.get(ANA, "doc1") is None
    store.delete(ANA, "doc1")  # nothing to delete: no error
    assert store.get(("ana", "other"), "doc1") is None


def test_search_filters_pages_and_ranks_by_words(plain: tuple[Services, MemoryStore]) -> None:
    _, store = plain
    _put_docs(store)
    store.put(("ana", "docs", "deep"), "doc5", {"text": "yellow apple", "user": {"city": "Porto"}})
    assert {i.key for i in store.search(ANA)} == {"doc1", "doc2", "doc3", "doc4", "doc5"}
    assert [i.key for i in store.search(("ana", "docs", "deep"))] == ["doc5"]
    assert {i.key for i in store.search(ANA, filter={"color": "red"})} == {"doc1", "doc2"}
    assert {i.key for i in store.search(ANA, filter={"score": {"$gt": 3.2}})} == {
        "doc1",
        "doc3",
        "doc4",
    }
    both = store.search(ANA, filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [i.key for i in both] == ["doc3"]
    assert {i.key for i in store.search(ANA, filter={"color": {"$ne": "red"}})} == {
        "doc3",
        "doc4",
        "doc5",
    }
    assert [i.key for i in store.search(ANA, filter={"score": {"$lt": 3.2, "$lte": 3}})] == ["doc2"]
    assert [i.key for i in store.search(ANA, filter={"user.city": "Porto"})] == ["doc5"]
    assert [i.key for i in store.search(ANA, filter={"user": {"city": "Porto"}})] == ["doc5"]
    # Pages: no overlap, all of them, in a stable order.
    pages = [store.search(ANA, limit=2, offset=offset) for offset in (0, 2, 4)]
    assert [len(page) for page in pages] == [2, 2, 1]
    assert len({i.key for page in pages for i in page}) == 5
    assert store.search(ANA, limit=0) == []
    # A query ranks (without a model, by the share of its words), it does not select.
    ranked = store.search(ANA, query="red car")
    assert [i.key for i in ranked][:1] == ["doc2"]
    assert len(ranked) == 5
    assert ranked[0].score == 1.0
    apples = store.search(ANA, query="apple", filter={"color": "red"})
    assert [(i.key, i.score) for i in apples] == [("doc1", 1.0), ("doc2", 0.0)]
    for query in ("", "   ", "test!@#$%^&*()", "apple " * 100):
        assert len(store.search(ANA, query=query)) == 5


def test_query_ranks_by_the_embedding_models_cosine(store: MemoryStore) -> None:
    _put_docs(store)
    results = store.search(ANA, query="apple", filter={"color": "red"})
    assert [i.key for i in results] == ["doc1", "doc2"]
    assert results[0].score is not None
    assert results[1].score is not None
    assert results[0].score > results[1].score
    assert store.search(ANA, query="a vehicle", filter={"color": "red"})[0].key == "doc2"
    assert store.search(ANA, query="something blue", filter={"score": {"$gt": 3.2}})[0].key == (
        "doc4"
    )
    # An update is embedded again; an item stored with index=False is listed, never scored.
    store.put(ANA, "doc1", {"text": "a tax form", "color": "red"})
    after = store.search(ANA, query="apple", filter={"color": "red"})
    assert next(i.score for i in after if i.key == "doc1") < results[0].score
    store.put(ANA, "doc9", {"text": "apple pie", "color": "red"}, index=False)
    store.put(ANA, "doc8", {"text": "x", "title": "apple tart", "color": "red"}, index=["title"])
    ranked = store.search(ANA, query="apple", filter={"color": "red"})
    assert next(i.key for i in ranked) == "doc8"
    assert [(i.key, i.score) for i in ranked][-1] == ("doc9", None)
    page1 = store.search(ANA, query="apple", limit=2)
    page2 = store.search(ANA, query="apple", limit=2, offset=2)
    assert not {i.key for i in page1} & {i.key for i in page2}


def test_list_namespaces_prefix_suffix_depth_and_pages(
    plain: tuple[Services, MemoryStore],
) -> None:
    services, store = plain
    spaces = [
        ("ana", "a", "b", "c"),
        ("ana", "a", "b", "d", "e"),
        ("ana", "a", "b", "d", "i"),
        ("ana", "a", "b", "f"),
        ("ana", "a", "c", "f"),
        ("ana", "b", "a", "f"),
        ("bob", "a", "f"),
    ]
    for i, namespace in enumerate(spaces):
        store.put(namespace, f"id_{i}", {"data": f"value_{i:02d}"})
    services.manager.add_turns("trip", "ana", [NewTurn("user", "We fly on 3 May.")])
    store.put(("ana", "facts"), uuid.uuid4().hex, {"text": "I am vegan"})

    assert store.list_namespaces(prefix=("ana", "a", "b")) == [
        ("ana", "a", "b", "c"),
        ("ana", "a", "b", "d", "e"),
        ("ana", "a", "b", "d", "i"),
        ("ana", "a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [
        ("ana", "a", "b", "f"),
        ("ana", "a", "c", "f"),
        ("ana", "b", "a", "f"),
        ("bob", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("ana", "*", "*", "f")) == [
        ("ana", "a", "b", "f"),
        ("ana", "a", "c", "f"),
        ("ana", "b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("ana", "a"), suffix=("*", "f")) == [
        ("ana", "a", "b", "f"),
        ("ana", "a", "c", "f"),
    ]
    assert store.list_namespaces(prefix=("ana", "a", "b"), max_depth=4) == [
        ("ana", "a", "b", "c"),
        ("ana", "a", "b", "d"),
        ("ana", "a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("ana",), max_depth=2) == [
        ("ana", "a"),
        ("ana", "b"),
        ("ana", "conversations"),
        ("ana", "facts"),
    ]
    assert store.list_namespaces(prefix=("ana", "conversations")) == [
        ("ana", "conversations"),
        ("ana", "conversations", "trip"),
    ]
    assert store.list_namespaces(max_depth=1) == [("ana",), ("bob",)]
    assert store.list_namespaces(prefix=("ana", "a", "b"), limit=2) == [
        ("ana", "a", "b", "c"),
        ("ana", "a", "b", "d", "e"),
    ]
    assert store.list_namespaces(prefix=("ana", "a", "b"), offset=2) == [
        ("ana", "a", "b", "d", "i"),
        ("ana", "a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("nobody",)) == []


async def test_async_operations_and_a_mixed_batch(plain: tuple[Services, MemoryStore]) -> None:
    _, store = plain
    await asyncio.gather(*(store.aput(ANA, key, value) for key, value in DOCS))
    item = await store.aget(ANA, "doc3")
    assert item is not None
    assert item.value["color"] == "green"
    found = await store.asearch(ANA, filter={"color": "red"}, limit=1, offset=1)
    assert len(found) == 1
    assert found[0].value["color"] == "red"
    assert ("ana", "docs") in await store.alist_namespaces(prefix=("ana",))
    await store.adelete(ANA, "doc3")
    assert await store.aget(ANA, "doc3") is None
    # A batch runs in order: the get after a put sees it, the search after a delete not.
    results = await store.abatch(
        [
            PutOp(ANA, "new", {"text": "kiwi"}),
            GetOp(ANA, "new"),
            PutOp(ANA, "doc1", None),
            SearchOp(ANA, filter={"color": "red"}),
            ListNamespacesOp(max_depth=2),
        ]
    )
    assert results[0] is None
    assert results[2] is None
    assert results[1] is not None
    assert results[1].value == {"text": "kiwi"}
    assert [i.key for i in results[3]] == ["doc2"]
    assert results[4] == [("ana", "docs")]


# -- the facts namespace -----------------------------------------------------------------------


def test_facts_namespace_is_the_users_facts(services: Services, store: MemoryStore) -> None:
    facts = services.manager.fact_store
    key = uuid.uuid4().hex
    store.put(("ana", "facts"), key, {"text": "My wife is Ana", "kind": "relationship"})
    stored = facts.by_key("ana", key)
    assert stored is not None
    assert stored.current
    assert stored.text == "My wife is Ana"
    assert stored.kind == "relationship"
    assert stored.origin == "api"
    # The key is the store's; the id is memory_chain's own (what REST and MCP take).
    assert [(f.id, f.key) for f in services.manager.facts("ana")] == [(stored.id, key)]
    item = store.get(("ana", "facts"), key)
    assert item is not None
    assert item.value["text"] == "My wife is Ana"
    assert item.value["status"] == "current"
    assert item.value["created_at"] == stored.created_at.isoformat()

    other = uuid.uuid4().hex
    store.put(("ana", "facts"), other, {"content": "I live in Porto"})  # LangMem's field
    assert [i.key for i in store.search(("ana", "facts"), query="where do I live?")][:1] == [other]
    assert {i.key for i in store.search(("ana", "facts"))} == {key, other}
    assert {i.key for i in store.search(("ana", "facts"), filter={"kind": "other"})} == {other}

    # An edit keeps the id; the old text stays in the history.
    store.put(("ana", "facts"), key, {**item.value, "text": "My wife is Anabela"})
    assert facts.by_key("ana", key).text == "My wife is Anabela"
    history = facts.of_user("ana", statuses=("superseded",))
    assert [(f.text, f.superseded_by) for f in history] == [("My wife is Ana", stored.id)]
    store.put(("ana", "facts"), key, store.get(("ana", "facts"), key).value)
    assert len(facts.of_user("ana", statuses=("superseded",))) == 1  # unchanged: no edit

    # The same fact under a new key: stored, the old one superseded by it.
    porto = facts.by_key("ana", other)
    again = uuid.uuid4().hex
    store.put(("ana", "facts"), again, {"text": "I live in Porto."})
    assert facts.get("ana", porto.id).status == "superseded"
    assert store.get(("ana", "facts"), again) is not None
    assert store.get(("ana", "facts"), other) is None

    # Delete dismisses: the history keeps it, the store and the prompts do not.
    store.delete(("ana", "facts"), key)
    assert facts.get("ana", stored.id).status == "dismissed"
    assert store.get(("ana", "facts"), key) is None
    assert key not in {i.key for i in store.search(("ana", "facts"))}
    assert key not in {f.key for f in services.manager.facts("ana")}
    # The key is free again: a put adds a new fact under it (it used to be refused).
    store.put(("ana", "facts"), key, {"text": "My wife is Ana"})
    back = store.get(("ana", "facts"), key)
    assert back is not None
    assert back.value["status"] == "current"
    assert facts.by_key("ana", key).id != stored.id


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"kind": "preference"}, "needs its text"),
        ({"text": "x", "kind": "hobby"}, "unknown fact kind"),
        ({"text": "x", "colour": "red"}, "unknown fields"),
        ({"text": "a", "content": "b"}, "not both"),
        ({"text": "   "}, "must not be empty"),
        ({"text": "x", "subject": 3}, "subject"),
    ],
)
def test_facts_namespace_refuses_bad_values(
    plain: tuple[Services, MemoryStore], value: dict[str, Any], message: str
) -> None:
    _, store = plain
    with pytest.raises(InvalidInputError, match=message):
        store.put(("ana", "facts"), uuid.uuid4().hex, value)


# -- the conversations namespaces ------------------------------------------------------------


def test_conversations_are_searched_by_memorys_retrieval_and_read_only(
    services: Services, store: MemoryStore
) -> None:
    services.manager.add_turns(
        "trip",
        "ana",
        [NewTurn("user", "We fly to Lisbon on 3 May."), NewTurn("assistant", "Noted.")],
    )
    services.manager.add_turns("cooking", "ana", [NewTurn("user", "Bake the bread at 220C.")])
    assert services.vectors is not None
    services.vectors.indexer.drain()

    found = store.search(("ana", "conversations"), query="When do we fly to Lisbon?", limit=3)
    assert (found[0].namespace, found[0].key) == (("ana", "conversations", "trip"), "1")
    assert found[0].value["content"] == "We fly to Lisbon on 3 May."
    assert found[0].score is not None
    scoped = store.search(("ana", "conversations", "cooking"), query="When do we fly?")
    assert {i.namespace for i in scoped} <= {("ana", "conversations", "cooking")}
    said = store.search(("ana", "conversations"), query="Lisbon", filter={"role": "user"})
    assert said
    assert all(i.value["role"] == "user" for i in said)

    listed = store.search(("ana", "conversations"))
    assert {i.key for i in listed} == {"trip", "cooking"}
    trip = store.get(("ana", "conversations"), "trip")
    assert trip is not None
    assert trip.value["turn_count"] == 2
    turns = store.search(("ana", "conversations", "trip"))
    assert [(i.key, i.value["role"]) for i in turns] == [("1", "user"), ("2", "assistant")]
    assert [i.key for i in store.search(("ana", "conversations", "trip"), offset=1)] == ["2"]
    turn = store.get(("ana", "conversations", "trip"), "2")
    assert turn is not None
    assert turn.value["content"] == "Noted."
    assert store.get(("ana", "conversations", "trip"), "3") is None
    assert store.get(("ana", "conversations"), "nothing") is None

    with pytest.raises(InvalidInputError, match="read-only"):
        store.put(("ana", "conversations", "trip"), "3", {"content": "x"})
    with pytest.raises(InvalidInputError, match="read-only"):
        store.delete(("ana", "conversations"), "trip")


# -- users, durability, erasure, bad input ---------------------------------------------------


def test_a_users_namespaces_never_show_another_users_data(
    services: Services, store: MemoryStore
) -> None:
    secret = "Ana's locker code is 4417"
    key = uuid.uuid4().hex
    store.put(("ana", "facts"), key, {"text": secret})
    store.put(("ana", "notes"), "locker", {"text": secret})
    services.manager.add_turns("gym", "ana", [NewTurn("user", secret)])
    store.put(("bob", "notes"), "locker", {"text": "Bob has no locker"})
    services.manager.add_turns("gym", "bob", [NewTurn("user", "I lift on Mondays.")])
    assert services.vectors is not None
    services.vectors.indexer.drain()

    seen = [
        *store.search(("bob",), query="locker code"),
        *store.search(("bob", "facts"), query="locker code"),
        *store.search(("bob", "notes"), query="locker code"),
        *store.search(("bob", "conversations"), query="locker code"),
        *store.search(("bob", "conversations", "gym"), query="locker code"),
        *store.search(("bob", "conversations", "gym")),
    ]
    assert seen
    assert all(i.namespace[0] == "bob" for i in seen)
    assert "4417" not in repr([i.value for i in seen])
    assert store.get(("bob", "facts"), key) is None
    assert store.get(("bob", "notes"), "locker").value["text"] == "Bob has no locker"
    store.delete(("bob", "facts"), key)  # not bob's: nothing happens to ana's
    assert store.get(("ana", "facts"), key) is not None
    # Keys are each user's own: bob's put of ana's key is bob's fact (it used to be refused,
    # telling bob that someone had the key).
    store.put(("bob", "facts"), key, {"text": "mine now"})
    assert store.get(("bob", "facts"), key).value["text"] == "mine now"
    assert store.get(("ana", "facts"), key).value["text"] == secret
    assert all(ns[0] == "bob" for ns in store.list_namespaces(prefix=("bob",)))


def test_items_survive_reopening_and_go_when_the_user_is_erased(
    plain_settings: MemorySettings,
    reopen: Callable[[MemorySettings], tuple[Services, MemoryStore]],
) -> None:
    services, store = reopen(plain_settings)
    _put_docs(store)
    _put_docs(store, ("bob", "docs"))
    key = uuid.uuid4().hex
    store.put(("ana", "facts"), key, {"text": "I am vegan", "kind": "preference"})
    services.close()

    services, store = reopen(plain_settings)
    assert store.get(ANA, "doc2").value["text"] == "red car"
    assert store.get(("ana", "facts"), key).value["kind"] == "preference"
    assert len(store.search(ANA)) == 4
    services.manager.delete_user("ana")
    assert store.search(ANA) == []
    assert store.search(("ana", "facts")) == []
    assert store.list_namespaces(prefix=("ana",)) == []
    assert len(store.search(("bob", "docs"))) == 4


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.batch([GetOp((), "k")]), "starts with the user"),
        (lambda s: s.get(("ana b", "notes"), "k"), "invalid user id"),
        (lambda s: s.put(("ana", "no tes"), "k", {}), "invalid namespace label"),
        (lambda s: s.put(("ana", "notes"), "a key", {}), "invalid key"),
        (lambda s: s.put(("ana",), "k", {}), "names only a user"),
        (lambda s: s.search(("ana", "facts", "x")), "no namespaces below"),
        (lambda s: s.get(("ana", "conversations", "c", "x"), "1"), "no namespaces below"),
        (lambda s: s.get(("ana", "facts"), "a\x00b"), "NUL"),
        (lambda s: s.put(("ana", "facts"), "k" * 513, {"text": "x"}), "more than 512"),
        (lambda s: s.search(("ana", "notes"), limit=-1), "limit"),
        (lambda s: s.search(("ana", "notes"), filter={"n": {"$in": [1]}}), "operator"),
        (lambda s: s.put(("ana", "notes"), "k", {"when": {1, 2}}), "must be JSON"),
        (lambda s: s.put(("ana", "notes"), "k", {"t": "x" * 70_000}), "split it"),
        (lambda s: s.put(("ana", "notes"), "k", {"t": "x"}, index="t"), "index must be"),
    ],
)
def test_malformed_input_is_refused_with_what_to_do(
    plain: tuple[Services, MemoryStore], call: Callable[[MemoryStore], Any], message: str
) -> None:
    _, store = plain
    with pytest.raises(InvalidInputError, match=message):
        call(store)


# -- in an agent ---------------------------------------------------------------------------------


def _user(runtime: ToolRuntime) -> str:
    return str(runtime.config["configurable"]["user_id"])


@tool
def remember(note: str, runtime: ToolRuntime) -> str:
    """Remember something the user said about themselves."""
    runtime.store.put((_user(runtime), "facts"), uuid.uuid4().hex, {"text": note})
    return "Remembered."


@tool
def save_note(title: str, note: str, runtime: ToolRuntime) -> str:
    """Keep a note for later."""
    runtime.store.put((_user(runtime), "notes"), title, {"text": note})
    return "Saved."


@tool
async def recall(query: str, runtime: ToolRuntime) -> str:
    """Look up what is known about the user."""
    found = await runtime.store.asearch((_user(runtime),), query=query, limit=3)
    return "\n".join(item.value["text"] for item in found) or "Nothing."


def _call(name: str, **args: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": uuid.uuid4().hex}])


def test_an_agents_tools_write_and_read_through_the_store(
    services: Services, store: MemoryStore
) -> None:
    model = RecordingModel(
        [
            _call("remember", note="My gym locker code is 4417."),
            _call("save_note", title="groceries", note="Buy oat milk and rye bread."),
            "Done.",
            _call("recall", query="locker code at the gym"),
            "It is 4417.",
            _call("recall", query="locker code at the gym"),
            "I don't know.",
        ]
    )
    agent = create_agent(model, tools=[remember, save_note, recall], store=store)

    def config(thread: str, user: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread, "user_id": user}}

    agent.invoke({"messages": [("user", "Remember my locker code: 4417.")]}, config("a", "ana"))
    assert [f.text for f in services.manager.facts("ana")] == ["My gym locker code is 4417."]
    note = store.get(("ana", "notes"), "groceries")
    assert note is not None
    assert "oat milk" in note.value["text"]

    result = asyncio.run(
        agent.ainvoke({"messages": [("user", "What is my locker code?")]}, config("b", "ana"))
    )
    tool_results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert "4417" in tool_results[-1].text
    assert result["messages"][-1].text == "It is 4417."

    other = asyncio.run(
        agent.ainvoke({"messages": [("user", "My locker code?")]}, config("c", "bob"))
    )
    assert [m.text for m in other["messages"] if isinstance(m, ToolMessage)] == ["Nothing."]
