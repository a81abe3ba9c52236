"""MemoryMiddleware in real agents: ``create_agent`` over the real tiers.

SQLite, the embedded vector engine and the real embedding model; the chat model is a fake
that records what it is sent (and, in the last test, the embedded model through ChatOllama).
A fact said in one thread reaches the model's input in another thread of the same user, and
never another user's; the exchange is stored without the agent's tool steps; the memory
added fits the window with the thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from memory_chain.config import MemorySettings
from memory_chain.errors import InvalidInputError
from memory_chain.integrations.middleware import MemoryMiddleware, final_exchange
from memory_chain.local_llm.model import MODEL_NAME
from memory_chain.schemas import NewTurn
from memory_chain.services import Services, open_services
from memory_chain.tokens import EstimatingCounter
from tests.fake_chat import RecordingModel

FACT = "My locker code at the gym is 4417."
QUESTION = "What is my locker code at the gym?"


def _system(prompt: list[BaseMessage]) -> str:
    assert isinstance(prompt[0], SystemMessage)
    return prompt[0].text


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    opened = open_services(MemorySettings(data_dir=tmp_path / "data", llm_fallback="off"))
    try:
        yield opened
    finally:
        opened.close()


def _settle(services: Services) -> None:
    assert services.vectors is not None
    services.vectors.indexer.drain()


def _config(thread: str, user: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def test_a_fact_said_in_one_thread_reaches_another_thread_of_the_same_user_only(
    services: Services,
) -> None:
    model = RecordingModel(["Noted.", "It is 4417.", "I don't know.", "Hello Ana."])
    agent = create_agent(
        model,
        system_prompt="You are a terse assistant.",
        middleware=[MemoryMiddleware(services)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", FACT)]}, _config("gym", "ana"))
    _settle(services)

    agent.invoke({"messages": [("user", QUESTION)]}, _config("errands", "ana"))
    seen = _system(model.prompts[-1])
    assert "4417" in seen
    assert seen.startswith("You are a terse assistant.")  # the agent's own prompt first
    assert model.prompts[-1][-1].text == QUESTION

    # (LangGraph's checkpointer keys threads by thread id alone: another user, another id.)
    agent.invoke({"messages": [("user", QUESTION)]}, _config("bobs-gym", "bob"))
    assert "4417" not in "\n".join(m.text for m in model.prompts[-1])

    # The stored exchanges: each thread's question and answer, per user.
    ana = services.manager.turns("gym", "ana")
    assert [(t.role, t.content) for t in ana] == [("user", FACT), ("assistant", "Noted.")]
    assert [t.content for t in services.manager.turns("errands", "ana")] == [
        QUESTION,
        "It is 4417.",
    ]
    assert [t.content for t in services.manager.turns("bobs-gym", "bob")] == [
        QUESTION,
        "I don't know.",
    ]

    # A second run in a thread with history: the thread keeps its own turns, memory does
    # not repeat them as messages.
    agent.invoke({"messages": [("user", "Hi again")]}, _config("gym", "ana"))
    prompt = model.prompts[-1]
    assert [m.text for m in prompt[1:]] == [FACT, "Noted.", "Hi again"]


def test_tool_steps_are_not_stored_and_async_runs_work(services: Services) -> None:
    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}, 24 degrees."

    call = AIMessage(
        "", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": "call-1"}]
    )
    model = RecordingModel([call, "It is sunny in Lisbon."])
    agent = create_agent(
        model, tools=[weather], middleware=[MemoryMiddleware(services)], checkpointer=None
    )
    result = asyncio.run(
        agent.ainvoke({"messages": [("user", "Weather in Lisbon?")]}, _config("w", "ana"))
    )
    assert result["messages"][-1].text == "It is sunny in Lisbon."
    assert len(model.prompts) == 2  # the tool step, then the answer: memory added to both
    stored = services.manager.turns("w", "ana")
    assert [(t.role, t.content) for t in stored] == [
        ("user", "Weather in Lisbon?"),
        ("assistant", "It is sunny in Lisbon."),
    ]


def test_memory_is_searched_once_per_run_not_per_model_call(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool loop calls the model several times in one run: memory is searched at the
    first call and reused; the next run searches again and sees what the last one stored."""
    searched: list[str] = []
    retrieve = services.manager.retrieve

    def counting(conversation_id: str, user_id: str, query: str, **kwargs: Any) -> Any:
        searched.append(query)
        return retrieve(conversation_id, user_id, query, **kwargs)

    monkeypatch.setattr(services.manager, "retrieve", counting)

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}."

    def call(n: int) -> AIMessage:
        args = {"city": "Lisbon"}
        return AIMessage("", tool_calls=[{"name": "weather", "args": args, "id": f"c{n}"}])

    model = RecordingModel([call(1), call(2), "Sunny.", call(3), "Still sunny."])
    middleware = MemoryMiddleware(services)
    agent = create_agent(model, tools=[weather], middleware=[middleware])
    agent.invoke({"messages": [("user", "Weather in Lisbon?")]}, _config("w", "ana"))
    assert len(model.prompts) == 3
    assert searched == ["Weather in Lisbon?"]
    assert all("Sunny in Lisbon" not in _system(p) for p in model.prompts)

    asyncio.run(agent.ainvoke({"messages": [("user", "Weather in Lisbon?")]}, _config("w", "ana")))
    assert searched == ["Weather in Lisbon?"] * 2  # a new run searches again
    assert "Sunny." in "\n".join(m.text for m in model.prompts[-1])  # the last run's answer
    assert not middleware._recalled  # nothing kept once the runs ended


def test_a_thread_without_history_gets_the_conversations_recent_turns(
    services: Services,
) -> None:
    """No checkpointer: each run starts empty, so memory gives the conversation's turns."""
    model = RecordingModel(["Noted.", "You said 4417."])
    agent = create_agent(model, middleware=[MemoryMiddleware(services)])
    agent.invoke({"messages": [("user", FACT)]}, _config("gym", "ana"))
    agent.invoke({"messages": [("user", QUESTION)]}, _config("gym", "ana"))
    assert [m.text for m in model.prompts[-1][1:]] == [FACT, "Noted.", QUESTION]


def test_the_memory_added_fits_the_window_with_the_thread(services: Services) -> None:
    counter = EstimatingCounter()
    for i in range(30):
        services.manager.add_turns(
            f"old-{i}",
            "ana",
            [NewTurn("user", f"Note {i}: the gym locker code was {4400 + i}. " * 8)],
        )
    _settle(services)
    window = 1024
    model = RecordingModel(["Fine."])
    middleware = MemoryMiddleware(services, window=window, reply_tokens=200)
    agent = create_agent(model, middleware=[middleware])
    agent.invoke({"messages": [("user", QUESTION)]}, _config("now", "ana"))
    prompt = model.prompts[-1]
    assert "locker code was 44" in _system(prompt)  # memory was added...
    used = sum(counter.count(m.text) + 8 for m in prompt) + 16
    assert used <= window - 200  # ...within the window, the reply's room kept


def test_a_run_without_a_conversation_is_refused_with_what_to_pass(services: Services) -> None:
    agent = create_agent(RecordingModel(["x"]), middleware=[MemoryMiddleware(services)])
    with pytest.raises(InvalidInputError, match="thread_id"):
        agent.invoke({"messages": [("user", "hello")]})


def test_final_exchange_needs_an_answer_without_tool_calls() -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    call = AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "1"}])
    assert final_exchange([HumanMessage("q"), call]) is None
    assert final_exchange([HumanMessage("q"), call, ToolMessage("r", tool_call_id="1")]) is None
    assert final_exchange([HumanMessage("q"), call, AIMessage("a")]) == ("q", "a")
    assert final_exchange([AIMessage("a")]) is None


class _Inputs(BaseCallbackHandler):
    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.prompts.extend(messages)


def test_the_embedded_model_through_chat_ollama(tmp_path: Path, local_llm_url: str) -> None:
    """The real-model path: ChatOllama on the embedded model, its window from /api/show."""
    from langchain_ollama import ChatOllama

    settings = MemorySettings(
        data_dir=tmp_path / "data",
        ollama_base_url=local_llm_url,
        ollama_chat_model=MODEL_NAME,
        ollama_summary_model=MODEL_NAME,
        llm_fallback="off",
    )
    services = open_services(settings, llm=True)
    try:
        model = ChatOllama(base_url=local_llm_url, model=MODEL_NAME, temperature=0, num_predict=24)
        inputs = _Inputs()
        agent = create_agent(
            model, middleware=[MemoryMiddleware(services)], checkpointer=InMemorySaver()
        )
        config = {**_config("gym", "ana"), "callbacks": [inputs]}
        agent.invoke({"messages": [("user", FACT)]}, config)
        _settle(services)
        config = {**_config("errands", "ana"), "callbacks": [inputs]}
        result = agent.invoke({"messages": [("user", QUESTION)]}, config)
        assert result["messages"][-1].text.strip()
        assert "4417" in inputs.prompts[-1][0].text
        assert services.models is not None
        info = services.models.resolve(MODEL_NAME)
        assert info.counter.count(inputs.prompts[-1][0].text) < info.window
        assert [t.role for t in services.manager.turns("errands", "ana")] == [
            "user",
            "assistant",
        ]
    finally:
        services.close()
