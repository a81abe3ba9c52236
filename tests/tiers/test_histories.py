"""The chat-history contract, run against every BaseChatMessageHistory we ship.

langchain-tests (1.1) has standard suites for retrievers, vector stores and chat models but
none for chat message histories, so this is the equivalent: the behaviour
``RunnableWithMessageHistory`` relies on, sync and async, for tier 1 (over SQL) and tier 2 on
SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core._api import LangChainDeprecationWarning
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from memory_chain.errors import InvalidInputError
from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
from memory_chain.tiers.sql import SQLChatMessageHistory, SQLStore, create_sql_engine, upgrade
from tests.deprecated_doors import USES_DEPRECATED_HISTORIES

pytestmark = USES_DEPRECATED_HISTORIES

Factory = Callable[[str], BaseChatMessageHistory]


@pytest.fixture(params=["tier1", "tier2"])
def make_history(request: pytest.FixtureRequest, store: SQLStore) -> Factory:
    buffer = TurnBuffer(max_turns=50)
    if request.param == "tier1":
        return lambda conversation_id: BufferChatMessageHistory(
            buffer, conversation_id, source=store, user_id="u"
        )
    return lambda conversation_id: SQLChatMessageHistory(store, conversation_id, user_id="u")


def _contents(messages: list[BaseMessage]) -> list[tuple[str, object]]:
    return [(m.type, m.content) for m in messages]


def test_add_and_read_messages(make_history: Factory) -> None:
    history = make_history("c")
    assert history.messages == []
    history.add_messages([SystemMessage("be kind"), HumanMessage("hi")])
    history.add_message(AIMessage("hello!"))
    assert _contents(history.messages) == [
        ("system", "be kind"),
        ("human", "hi"),
        ("ai", "hello!"),
    ]
    # Another history object on the same conversation sees the same messages.
    assert _contents(make_history("c").messages) == _contents(history.messages)


def test_conversations_are_separate(make_history: Factory) -> None:
    make_history("one").add_user_message("in one")
    make_history("two").add_user_message("in two")
    assert _contents(make_history("one").messages) == [("human", "in one")]


def test_clear(make_history: Factory) -> None:
    history = make_history("c")
    history.add_user_message("hi")
    history.clear()
    assert history.messages == []
    assert make_history("c").messages == []


async def test_async_methods(make_history: Factory) -> None:
    history = make_history("c")
    await history.aadd_messages([HumanMessage("async hi"), AIMessage("async hello")])
    assert _contents(await history.aget_messages()) == [
        ("human", "async hi"),
        ("ai", "async hello"),
    ]
    await history.aclear()
    assert await history.aget_messages() == []


def test_chat_message_roles(make_history: Factory) -> None:
    history = make_history("c")
    history.add_messages(
        [ChatMessage(role="user", content="u"), ChatMessage(role="assistant", content="a")]
    )
    assert [m.type for m in history.messages] == ["human", "ai"]
    with pytest.raises(InvalidInputError, match="unknown role"):
        history.add_messages([ChatMessage(role="wizard", content="x")])
    with pytest.raises(InvalidInputError, match="cannot store a 'tool' message"):
        history.add_messages([ToolMessage("result", tool_call_id="1")])
    assert len(history.messages) == 2


def test_model_usage_is_kept(make_history: Factory, store: SQLStore) -> None:
    history = make_history("c")
    reply = AIMessage(
        "FastAPI is a modern Python web framework...",
        usage_metadata={"input_tokens": 15, "output_tokens": 120, "total_tokens": 135},
    )
    history.add_messages([HumanMessage("What is FastAPI?"), reply])
    (_, stored_reply) = store.get_turns("c", user_id="u")
    assert stored_reply.tokens is not None
    assert (stored_reply.tokens.prompt, stored_reply.tokens.completion) == (15, 120)
    last = history.messages[-1]
    assert isinstance(last, AIMessage)
    assert last.usage_metadata is not None
    assert last.usage_metadata["total_tokens"] == 135


def test_multipart_content_keeps_its_text(make_history: Factory) -> None:
    history = make_history("c")
    history.add_messages(
        [HumanMessage(content=[{"type": "text", "text": "look"}, {"type": "text", "text": "here"}])]
    )
    assert history.messages[0].content == "look\nhere"


async def test_runnable_with_message_history(make_history: Factory) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def echo(value: object) -> AIMessage:
        messages = value.to_messages()  # type: ignore[attr-defined]
        return AIMessage(f"seen {len(messages)} messages")

    chain = RunnableWithMessageHistory(
        prompt | RunnableLambda(echo),
        make_history,
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "rwmh"}}
    assert chain.invoke({"question": "first"}, config).content == "seen 1 messages"
    assert (await chain.ainvoke({"question": "second"}, config)).content == "seen 3 messages"
    assert _contents(make_history("rwmh").messages) == [
        ("human", "first"),
        ("ai", "seen 1 messages"),
        ("human", "second"),
        ("ai", "seen 3 messages"),
    ]


USER_SCRIPT = """
import warnings
from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
from memory_chain.tiers.sql import SQLChatMessageHistory, SQLStore, create_sql_engine, upgrade

engine = create_sql_engine("sqlite:///" + {db!r})
upgrade(engine)
BufferChatMessageHistory(TurnBuffer(max_turns=4), "trip")
SQLChatMessageHistory(SQLStore(engine), "trip")
"""


def test_a_users_script_sees_the_deprecation(tmp_path: Path) -> None:
    """Outside the tests' filters, building a history shows upstream's deprecation and the
    door to take instead, pointing at the user's line (Python's default filters)."""
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT.format(db=str(tmp_path / "m.db")))
    done = subprocess.run(
        [sys.executable, "-W", "default", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    warned = [line for line in done.stderr.splitlines() if "LangChainDeprecationWarning" in line]
    assert len(warned) == 2, done.stderr
    assert all("user_script.py" in line for line in warned), done.stderr
    assert "BufferChatMessageHistory is a BaseChatMessageHistory" in done.stderr
    assert "SQLChatMessageHistory is a BaseChatMessageHistory" in done.stderr
    assert "MemoryMiddleware" in done.stderr


def test_no_history_no_warning(tmp_path: Path) -> None:
    """The memory itself (manager, chain, retriever) raises no deprecation: only the
    histories, when a user builds one."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", LangChainDeprecationWarning)
        store = SQLStore(_sqlite_engine(tmp_path))
        TurnBuffer(max_turns=4)
        assert store is not None
    with pytest.warns(LangChainDeprecationWarning, match="MemoryMiddleware"):
        SQLChatMessageHistory(store, "trip")


def _sqlite_engine(tmp_path: Path) -> Any:
    engine = create_sql_engine(f"sqlite:///{tmp_path / 'm.db'}")
    upgrade(engine)
    return engine
