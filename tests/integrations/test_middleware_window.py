"""MemoryMiddleware counts what the model is sent: the request it builds fits the window.

With tools bound, a model reads each tool's JSON schema, the tool calls and their arguments,
the tools' results and the images, besides the messages' text. The reference here is
independent of the middleware's counting: the request is converted as ``ChatOllama`` sends
it (``_convert_messages_to_ollama_messages`` and ``convert_to_openai_tool``), rendered with
the embedded model's own chat template (Qwen2.5, whose template writes the tools and the
calls into the prompt) and counted with its own tokenizer; each image ChatOllama sends
counts as the documented estimate. Random tools (0-15 arguments of random types, nested,
enums, long and non-ASCII descriptions), random histories (tool calls, tool results,
images, reasoning), random windows: the request with memory is never over the window,
with either counter the middleware may use (the model's tokenizer, or the estimate for a
model it does not know).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest
from langchain.agents.structured_output import ToolStrategy
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_ollama import ChatOllama
from pydantic import BaseModel, Field

from memory_chain.chat.budget import MEMORY_NOTE, Budget
from memory_chain.chat.sent import IMAGE_TOKENS
from memory_chain.config import MemorySettings
from memory_chain.facts.model import FactDraft
from memory_chain.integrations.middleware import MemoryMiddleware, RunIds
from memory_chain.local_llm.model import MODEL_NAME
from memory_chain.local_llm.tokenizer import GGUFTokenCounter
from memory_chain.schemas import NewTurn
from memory_chain.services import Services, open_services
from memory_chain.tokens import EstimatingCounter

IDS = RunIds("now", "ana")
QUESTIONS = ["Which seat do I have?", "Book me the usual hotel.", "Qué tiempo hace en Oporto?"]
WORDS = " ".join(
    [
        "we fly to Lisbon on May 3rd, the hotel near the river costs 120 euros a night;",
        "ERROR worker-3 request_id=9f2c1e0b path=/api/v1/users/8812 ConnectionResetError",
        'def main(argv): return {"a": [1, 2]} # ünïcödé 東京 café 🚲 ☕ Москва <b>&amp;</b>',
    ]
).split()
PIXEL = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
_ROLES = {"user", "assistant", "system", "tool"}

# -- random text, JSON, schemas, tools ------------------------------------------------------

_ALPHABET = st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from('\n\t<>&"\\{}')
short_text = st.text(_ALPHABET, max_size=40)
long_text = st.lists(st.sampled_from(WORDS), max_size=300).map(" ".join)
any_text = st.one_of(st.text(_ALPHABET, max_size=200), long_text)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,40}", fullmatch=True)
keys = st.one_of(names, short_text.filter(bool))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=24,
)


def _described(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    return {**schema, "description": description} if description is not None else schema


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


scalar_schemas = st.sampled_from(["string", "integer", "number", "boolean"]).map(
    lambda kind: {"type": kind}
) | st.lists(short_text, min_size=1, max_size=8, unique=True).map(
    lambda values: {"type": "string", "enum": values}
)
argument_schemas = st.builds(
    _described,
    st.recursive(
        scalar_schemas,
        lambda inner: (
            st.builds(lambda items: {"type": "array", "items": items}, inner)
            | st.dictionaries(names, inner, max_size=4).map(lambda p: _object(p, sorted(p)[:1]))
            | st.builds(lambda s: {"anyOf": [s, {"type": "null"}]}, inner)
        ),
        max_leaves=6,
    ),
    st.one_of(st.none(), short_text, long_text),
)


@st.composite
def tools(draw: st.DrawFn) -> BaseTool | dict[str, Any]:
    """A tool with 0-15 arguments: a LangChain tool, or one already in the OpenAI format."""
    name = draw(names)
    description = draw(st.one_of(short_text, long_text))
    arguments = draw(st.dictionaries(names, argument_schemas, max_size=15))
    required = draw(st.lists(st.sampled_from(sorted(arguments)), unique=True)) if arguments else []
    parameters = _object(arguments, required)
    if draw(st.booleans()):
        return StructuredTool(
            name=name, description=description, args_schema=parameters, func=lambda **_: ""
        )
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


# -- random histories -----------------------------------------------------------------------


def _image(kind: int) -> dict[str, Any]:
    if kind == 0:
        return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}
    return {"type": "image", "base64": PIXEL, "mime_type": "image/png"}


@st.composite
def contents(draw: st.DrawFn, *, images: bool) -> str | list[str | dict[str, Any]]:
    """A message's content: a string, or parts (text, and images where a role sends them)."""
    if draw(st.booleans()):
        return draw(any_text)
    part = st.builds(lambda text: {"type": "text", "text": text}, any_text) | any_text
    if images:
        part = part | st.integers(0, 1).map(_image)
    return draw(st.lists(part, max_size=4))


calls = st.builds(
    lambda name, args, n: {"name": name, "args": args, "id": f"call-{n}"},
    names,
    st.dictionaries(keys, json_values, max_size=6),
    st.integers(0, 10**6),
)
invalid_calls = st.builds(
    lambda name, args: {"name": name, "args": args, "id": "bad", "error": "not JSON"},
    names,
    any_text,
)


@st.composite
def ai_messages(draw: st.DrawFn) -> list[BaseMessage]:
    """An AI message (text, tool calls, a call that did not parse, reasoning) and the tool
    results of its calls."""
    made = draw(st.lists(calls, max_size=3))
    message = AIMessage(
        draw(contents(images=False)),
        tool_calls=made,
        invalid_tool_calls=draw(st.lists(invalid_calls, max_size=1)),
        additional_kwargs=draw(
            st.one_of(st.just({}), any_text.map(lambda t: {"reasoning_content": t}))
        ),
    )
    results = [ToolMessage(draw(contents(images=False)), tool_call_id=c["id"]) for c in made]
    return [message, *results]


human_messages = st.builds(HumanMessage, contents(images=True))
exchanges = st.lists(st.one_of(human_messages.map(lambda m: [m]), ai_messages()), max_size=6)


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    """Earlier messages, the run's question (text, maybe with an image), the run's steps."""
    earlier = [message for exchange in draw(exchanges) for message in exchange]
    text = draw(st.sampled_from(QUESTIONS))
    question = HumanMessage(
        text if draw(st.booleans()) else [{"type": "text", "text": text}, _image(0)]
    )
    steps = [m for exchange in draw(st.lists(ai_messages(), max_size=2)) for m in exchange]
    return [*earlier, question, *steps]


# -- the reference: the request as ChatOllama sends it, as the model reads it ---------------


def as_the_model_reads_it(request: ModelRequest, qwen: GGUFTokenCounter) -> int:
    """The request's tokens: converted by ChatOllama, rendered by the model's template."""
    model = request.model
    assert isinstance(model, ChatOllama)
    system = [request.system_message] if request.system_message else []
    sent = model._convert_messages_to_ollama_messages([*system, *request.messages])
    rendered = [
        {
            "role": message["role"],
            "content": message["content"],
            **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}),
        }
        for message in sent
    ]
    assert {message["role"] for message in rendered} <= _ROLES
    images = sum(len(message.get("images") or ()) for message in sent)
    tools = [convert_to_openai_tool(t) for t in request.tools]
    return qwen.render_and_count(rendered, tools or None) + images * IMAGE_TOKENS


# -- the memory and the middleware ----------------------------------------------------------


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """Memory that can fill any window: facts, other conversations, this one's turns."""
    opened = open_services(MemorySettings(data_dir=tmp_path / "data", llm_fallback="off"))
    manager = opened.manager
    for n in range(12):
        manager.add_fact(
            "ana", FactDraft(f"Ana's seat preference number {n} is {n}A by the window.")
        )
    for n in range(30):
        said = f"Note {n}: my seat on flight TP{1000 + n} is {n}C, hotel Quinta {n}. " * 12
        manager.add_turns(f"old-{n}", "ana", [NewTurn("user", said)])
    for n in range(8):
        manager.add_turns("now", "ana", [NewTurn("user", f"Earlier question {n} " * 20)])
    assert opened.vectors is not None
    opened.vectors.indexer.drain()
    try:
        yield opened
    finally:
        opened.close()


def _request(
    messages: list[BaseMessage],
    tools: list[BaseTool | dict[str, Any]],
    system: str | None,
    num_predict: int | None,
) -> ModelRequest:
    model = ChatOllama(model=MODEL_NAME, base_url="http://127.0.0.1:9", num_predict=num_predict)
    return ModelRequest(
        model=model,
        messages=list(messages),  # type: ignore[arg-type]
        system_message=SystemMessage(system) if system is not None else None,
        tools=tools,
        state={"messages": list(messages)},  # type: ignore[typeddict-item]
    )


@pytest.mark.parametrize("counted_with", ["tokenizer", "estimate"])
@settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(
    toolset=st.lists(tools(), max_size=6),
    messages=histories(),
    system=st.one_of(st.none(), any_text),
    num_predict=st.one_of(st.none(), st.integers(1, 512)),
    reply_tokens=st.integers(16, 1024),
    spare=st.floats(0, 1.5),
    slack=st.integers(-200, 3000),
)
def test_the_request_with_memory_never_exceeds_the_window(
    services: Services,
    qwen: GGUFTokenCounter,
    counted_with: str,
    toolset: list[BaseTool | dict[str, Any]],
    messages: list[BaseMessage],
    system: str | None,
    num_predict: int | None,
    reply_tokens: int,
    spare: float,
    slack: int,
) -> None:
    request = _request(messages, toolset, system, num_predict)
    # A window the thread alone fits (or nearly), with up to 1.5 times the thread to spare.
    thread = as_the_model_reads_it(request, qwen)
    window = max(thread + int(thread * spare) + (num_predict or reply_tokens) + slack, 256)
    counter = qwen if counted_with == "tokenizer" else EstimatingCounter()
    middleware = MemoryMiddleware(
        services, window=window, reply_tokens=reply_tokens, counter=counter
    )
    built = middleware.with_memory(request, IDS)
    if built is request:
        event("no room for memory")
        return
    event("memory added")
    assert built.system_message is not None
    assert MEMORY_NOTE in built.system_message.text
    assert built.messages[-len(messages) :] == messages  # the thread whole, in order
    budget = Budget.of(window=window, max_tokens=num_predict, default_reply=reply_tokens)
    assert as_the_model_reads_it(built, qwen) <= budget.prompt


# -- one agent's request, worked through ------------------------------------------------------


class Booking(BaseModel):
    """The arguments of a flight booking."""

    origin: str = Field(description="IATA code of the departure airport, e.g. LIS")
    destination: str = Field(description="IATA code of the arrival airport, e.g. OPO")
    date: str = Field(description="Departure date, YYYY-MM-DD")
    return_date: str | None = Field(None, description="Return date, YYYY-MM-DD, if any")
    passengers: int = Field(1, description="Number of passengers")
    cabin: str = Field("economy", description="economy, premium, business or first")
    seat: str | None = Field(None, description="Preferred seat, e.g. 14A")
    bags: int = Field(0, description="Checked bags per passenger")
    loyalty_number: str | None = Field(None, description="Frequent flyer number")


@tool(args_schema=Booking)
def book_flight(**booking: Any) -> str:
    """Book a flight for the user."""
    return "booked"


def test_a_nine_argument_tool_a_call_and_an_image_are_counted(
    services: Services, qwen: GGUFTokenCounter
) -> None:
    """The tool's schema, the call's arguments, the tool's result and the image leave their
    room: memory fills what is left, and the request fits the window."""
    call = {
        "name": "book_flight",
        "args": {"origin": "LIS", "destination": "OPO", "date": "2026-06-01", "seat": "14A"},
        "id": "call-1",
    }
    messages: list[BaseMessage] = [
        HumanMessage([{"type": "text", "text": "Book my usual flight."}, _image(0)]),
        AIMessage("", tool_calls=[call]),
        ToolMessage('{"status": "booked", "locator": "X7K2PQ"}', tool_call_id="call-1"),
        AIMessage("Booked: locator X7K2PQ."),
        HumanMessage("Which seat do I have?"),
    ]
    request = _request(messages, [book_flight], "You are a travel agent.", None)
    window = as_the_model_reads_it(request, qwen) + IMAGE_TOKENS // 2 + 512
    middleware = MemoryMiddleware(services, window=window, reply_tokens=256, counter=qwen)
    built = middleware.with_memory(request, IDS)
    assert built is not request
    assert built.system_message is not None
    assert "seat" in built.system_message.text  # memory was added...
    assert as_the_model_reads_it(built, qwen) <= window - 256  # ...within the window


def test_a_part_that_cannot_be_counted_adds_no_memory(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    """An audio part: its tokens are unknown, so memory is not added (the request goes on
    unchanged), and the log says why."""
    audio = {"type": "audio", "base64": "UklGRg==", "mime_type": "audio/wav"}
    request = _request(
        [HumanMessage([{"type": "text", "text": "What did I say here?"}, audio])],
        [],
        None,
        None,
    )
    middleware = MemoryMiddleware(services, window=8192, counter=EstimatingCounter())
    with caplog.at_level(logging.WARNING):
        assert middleware.with_memory(request, IDS) is request
    assert "'audio'" in caplog.text


class _Recording(GenericFakeChatModel):
    """Answers from a script; keeps the messages and the tools it is sent."""

    prompts: list[list[BaseMessage]] = []  # one list per instance (set in __init__)
    bound: list[list[dict[str, Any]]] = []

    def __init__(self, answers: list[AIMessage]) -> None:
        super().__init__(messages=iter(answers), prompts=[], bound=[])

    def bind_tools(self, tools: Any, **kwargs: Any) -> _Recording:
        self.bound.append([convert_to_openai_tool(t) for t in tools])
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def test_an_agents_tools_and_structured_output_are_counted(
    services: Services, qwen: GGUFTokenCounter
) -> None:
    """Through ``create_agent``: the model is bound with the agent's tool and the structured
    output's tool (``ToolStrategy``); what it is sent, rendered, fits the window."""
    answer = AIMessage(
        "",
        tool_calls=[
            {
                "name": "Booking",
                "args": {"origin": "LIS", "destination": "OPO", "date": "2026-06-01"},
                "id": "call-1",
            }
        ],
    )
    model = _Recording([answer])
    window, reply = 3000, 256
    middleware = MemoryMiddleware(services, window=window, reply_tokens=reply, counter=qwen)
    agent = create_agent(
        model, tools=[book_flight], response_format=ToolStrategy(Booking), middleware=[middleware]
    )
    agent.invoke(
        {"messages": [("user", "Which seat do I have?")]},
        {"configurable": {"thread_id": "now", "user_id": "ana"}},
    )
    (prompt,), (tools,) = model.prompts, model.bound
    assert [t["function"]["name"] for t in tools] == ["book_flight", "Booking"]
    assert MEMORY_NOTE in prompt[0].text
    converted = ChatOllama(model=MODEL_NAME)._convert_messages_to_ollama_messages(prompt)
    rendered = [{"role": m["role"], "content": m["content"]} for m in converted]
    assert qwen.render_and_count(rendered, tools) <= window - reply
