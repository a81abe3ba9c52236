"""The chat core: one request object, checked once, answered with a budgeted prompt."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from memory_chain.chain import build_chat_chain
from memory_chain.chat.core import ChatCore
from memory_chain.chat.models import OneModel
from memory_chain.chat.reconcile import Said, plan_history
from memory_chain.chat.request import ChatRequest, ReplyOptions
from memory_chain.errors import (
    ContextOverflowError,
    InvalidInputError,
    LLMUnavailableError,
    ModelNotFoundError,
)
from memory_chain.facts.model import FactDraft
from memory_chain.manager import MemoryManager
from memory_chain.schemas import NewTurn
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tokens import EstimatingCounter


class Recording(GenericFakeChatModel):
    """A fake chat model that keeps each call's messages and keyword arguments."""

    calls: list[tuple[list[Any], dict[str, Any]]] = []

    def _stream(
        self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        self.calls.append((messages, {"stop": stop, **kwargs}))
        return super()._stream(messages, stop, run_manager, **kwargs)


class Refusing(GenericFakeChatModel):
    """A model server that answers 400 (a request it will not take)."""

    def _stream(self, *args: Any, **kwargs: Any) -> Any:
        error = RuntimeError("invalid option top_k")
        error.status_code = 400  # type: ignore[attr-defined]
        raise error


def recording() -> Recording:
    return Recording(messages=iter(AIMessage(f"reply {i}") for i in range(1000)), calls=[])


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[MemoryManager]:
    engine = create_sql_engine(f"sqlite:///{tmp_path / 'memory.db'}")
    upgrade(engine)
    manager = MemoryManager(SQLStore(engine), TurnBuffer(max_turns=10))
    yield manager
    manager.close()
    engine.dispose()


def ask(core: ChatCore, message: str, **fields: Any) -> str:
    request = ChatRequest.checked(conversation_id="trip", user_id="ana", message=message, **fields)
    turn = core.prepare(request)
    return "".join(str(chunk.content) for chunk in core.stream(turn))


def stored(manager: MemoryManager) -> list[tuple[str, str]]:
    return [(t.role, t.content) for t in manager.turns("trip", "ana")]


def test_the_clients_instructions_and_options_reach_the_model(manager: MemoryManager) -> None:
    llm = recording()
    sampling = {
        "temperature": "temperature",
        "top_p": "top_p",
        "max_tokens": "num_predict",
        "seed": "seed",
    }
    core = ChatCore(manager, OneModel(llm, sampling=sampling))
    options = ReplyOptions.of(temperature=0.3, top_p=0.9, max_tokens=10, stop="ARRR", seed=7)
    ask(core, "Who are you?", system="You are Captain Hook.", options=options)
    messages, kwargs = llm.calls[0]
    assert str(messages[0].content).startswith("You are Captain Hook.")
    assert "long-term memory" in str(messages[0].content)
    assert kwargs == {
        "stop": ["ARRR"],
        "temperature": 0.3,
        "top_p": 0.9,
        "num_predict": 10,
        "seed": 7,
    }
    # The instructions are the client's, not memory: they are not stored.
    assert stored(manager) == [("user", "Who are you?"), ("assistant", "reply 0")]


def test_the_chain_takes_instructions_and_options_as_the_api_does(manager: MemoryManager) -> None:
    llm = recording()
    chain = build_chat_chain(
        ChatCore(manager, OneModel(llm, sampling={"max_tokens": "max_tokens"}))
    )
    config = {"configurable": {"conversation_id": "trip", "user_id": "ana", "max_tokens": 20}}
    chain.invoke({"input": "Hello", "system": "Answer in French."}, config)
    messages, kwargs = llm.calls[0]
    assert str(messages[0].content).startswith("Answer in French.")
    assert kwargs["max_tokens"] == 20
    with pytest.raises(InvalidInputError, match="temperature"):
        chain.invoke(
            {"input": "Hi"}, {"configurable": {**config["configurable"], "temperature": 9}}
        )
    with pytest.raises(ModelNotFoundError, match="nope:3b"):
        chain.invoke(
            {"input": "Hi"}, {"configurable": {**config["configurable"], "model": "nope:3b"}}
        )


def test_a_message_too_long_for_the_window_stores_nothing(manager: MemoryManager) -> None:
    core = ChatCore(manager, OneModel(recording(), window=512))
    ask(core, "hello")
    with pytest.raises(ContextOverflowError, match="context window") as caught:
        ask(core, "word " * 2000)
    assert caught.value.window == 512
    assert stored(manager) == [("user", "hello"), ("assistant", "reply 0")]
    # A reply's room that leaves none for the prompt is the client's mistake too.
    with pytest.raises(InvalidInputError, match="max_tokens"):
        ask(core, "hi", options=ReplyOptions(max_tokens=600))


def test_a_background_task_too_long_says_which_part_is_the_message(
    manager: MemoryManager,
) -> None:
    """A request without memory (a client's title task) over the window: the error counts
    the message as the message and the instructions with the history as the instructions."""
    core = ChatCore(manager, OneModel(recording(), window=512))
    message = "Give this chat a short title."
    request = ChatRequest.checked(
        conversation_id="trip",
        user_id="ana",
        message=message,
        system="Follow the house rules for titles. " * 200,
        memory=False,
    )
    with pytest.raises(ContextOverflowError) as caught:
        core.prepare(request)
    message_tokens = EstimatingCounter().count(message)
    assert caught.value.message_tokens == message_tokens
    assert caught.value.system_tokens > 1000
    assert str(caught.value).startswith(
        f"the message has {message_tokens:,} tokens and the instructions "
        f"{caught.value.system_tokens:,}"
    )
    assert stored(manager) == []


def test_an_unknown_model_is_refused_before_anything_is_stored(manager: MemoryManager) -> None:
    core = ChatCore(manager, OneModel(recording(), name="small:1b"))
    with pytest.raises(ModelNotFoundError, match="big:8b"):
        ask(core, "hello", model="big:8b")
    assert stored(manager) == []
    assert ask(core, "hello", model="small:1b") == "reply 0"


def test_a_request_the_model_refuses_is_a_client_error_not_an_outage(
    manager: MemoryManager,
) -> None:
    core = ChatCore(manager, OneModel(Refusing(messages=iter([]))))
    with pytest.raises(InvalidInputError, match="refused the request") as caught:
        ask(core, "hello")
    assert not isinstance(caught.value, LLMUnavailableError)
    assert "Ollama runs" not in str(caught.value)


def test_history_is_reconciled_once_in_the_core(manager: MemoryManager) -> None:
    llm = recording()
    core = ChatCore(manager, OneModel(llm))
    # A chat begun elsewhere: the turns memory lacks are stored first.
    earlier = (Said("user", "We fly on 3 May."), Said("assistant", "Noted."))
    ask(core, "When do we fly?", history=earlier)
    assert stored(manager) == [
        ("user", "We fly on 3 May."),
        ("assistant", "Noted."),
        ("user", "When do we fly?"),
        ("assistant", "reply 0"),
    ]
    # Regenerate: the same message after the same history: answered, nothing stored, and the
    # prompt does not hold the exchange being redone.
    ask(core, "When do we fly?", history=earlier, system="Be brief.")
    assert len(stored(manager)) == 4
    messages, _ = llm.calls[-1]
    assert str(messages[0].content).startswith("Be brief.")
    assert [m.content for m in messages[1:]] == ["We fly on 3 May.", "Noted.", "When do we fly?"]


def test_history_memory_lacked_is_stored_as_history_and_only_the_new_message_acts(
    manager: MemoryManager,
) -> None:
    manager.add_turns("trip", "ana", [NewTurn("user", "I grow basil on the balcony.")])
    manager.add_fact("ana", FactDraft("I grow basil on the balcony."))
    core = ChatCore(manager, OneModel(recording()))
    # Said earlier, to a model without memory (a chat continued elsewhere, then here): the
    # client resends it; stored, but old requests are history, not requests made now.
    earlier = (
        Said("user", "I grow basil on the balcony."),
        Said("user", "Remember that my locker code is 4471."),
        Said("assistant", "Noted."),
        Said("user", "Forget the basil."),
        Said("assistant", "Done."),
    )
    ask(core, "Remember that my seat is 14C.", history=earlier)
    assert [text for _, text in stored(manager)][1:4] == [
        "Remember that my locker code is 4471.",
        "Noted.",
        "Forget the basil.",
    ]
    assert sorted(f.text for f in manager.facts("ana")) == [
        "I grow basil on the balcony.",
        "my seat is 14C.",
    ]


def test_a_retry_after_a_failed_call_answers_the_stored_message(manager: MemoryManager) -> None:
    core = ChatCore(manager, OneModel(recording()))
    manager.add_turns("trip", "ana", [NewTurn("user", "Is the museum open?")])
    turn = core.prepare(
        ChatRequest.checked(conversation_id="trip", user_id="ana", message="Is the  museum open?")
    )
    assert turn.plan.action == "retry"
    assert [m.content for m in turn.messages[1:]] == ["Is the  museum open?"]
    list(core.stream(turn))
    assert stored(manager) == [("user", "Is the museum open?"), ("assistant", "reply 0")]


def test_the_preview_stores_nothing_and_calls_no_model(manager: MemoryManager) -> None:
    llm = recording()
    core = ChatCore(manager, OneModel(llm, window=1024))
    manager.add_turns("old", "ana", [NewTurn("user", "My bike is blue.")])
    request = ChatRequest.checked(
        conversation_id="trip",
        user_id="ana",
        message="What colour is my bike?",
        history=(Said("user", "hi"), Said("assistant", "hello")),
    )
    turn = core.preview(request)
    assert llm.calls == []
    assert stored(manager) == []
    assert turn.prompt.tokens <= turn.prompt.budget.prompt
    assert [s.name for s in turn.prompt.sections] == [
        "instructions",
        "facts",
        "summary",
        "recent",
        "memories",
        "message",
    ]


def test_the_async_twin_stores_the_same(manager: MemoryManager) -> None:
    core = ChatCore(manager, OneModel(recording()))

    async def run() -> str:
        request = ChatRequest.checked(conversation_id="trip", user_id="ana", message="hi")
        turn = await asyncio.to_thread(core.prepare, request)
        return "".join([str(c.content) async for c in core.astream(turn)])

    assert asyncio.run(run()) == "reply 0"
    assert stored(manager) == [("user", "hi"), ("assistant", "reply 0")]


@pytest.mark.parametrize(
    ("history", "stored_turns", "count", "action"),
    [
        (None, [], 0, "append"),
        (None, [Said("user", "hi")], 1, "retry"),
        (
            [Said("user", "a"), Said("assistant", "b")],
            [Said("user", "a"), Said("assistant", "b")],
            2,
            "append",
        ),
        ([Said("user", "a"), Said("assistant", "b")], [], 0, "import"),
        ([Said("user", "x")], [Said("user", "a"), Said("assistant", "b")], 2, "diverged"),
    ],
)
def test_plan_history(history: Any, stored_turns: list[Said], count: int, action: str) -> None:
    assert plan_history(history, stored_turns, count, "hi").action == action
