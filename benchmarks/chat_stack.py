"""The chat benchmark's stack, data and fakes: what ``bench_chat.py`` measures against.

The stack is the embedded default: ``open_services(MemorySettings(data_dir=<temp>,
llm_fallback="off"), background=True)`` (SQLite, EdgeIndex, the bundled all-MiniLM-L6-v2,
the tier-3 backfill thread running), an idle ``ConsolidationService`` registered as the
manager's listener as the server does, and ``build_chat_chain(manager, fake_llm)`` over a
model that answers at once. :func:`build_stack` fills it with template-generated
conversations (:mod:`corpus`), all embedded and summarized up to their last few turns, as
consolidation would have left them.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from chat_recorder import Recorder
from corpus import chat_turn, fill, make_theme, question
from harness import progress, rss_mb
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field

from memory_chain.chain import build_chat_chain
from memory_chain.chat.core import ChatCore
from memory_chain.chat.models import OneModel
from memory_chain.config import MemorySettings
from memory_chain.consolidation import ConsolidationService, ConsolidationSettings
from memory_chain.facts.model import Fact, FactDraft
from memory_chain.local_llm.tokenizer import embedded_model_counter
from memory_chain.schemas import MemoryContext, NewTurn, Role, Summary
from memory_chain.services import Services, open_services
from memory_chain.summarize import build_summarization_chain
from memory_chain.tokens import EstimatingCounter, TokenCounter

GOALS = {
    "chat_overhead_p95_over_embed_p95": 1.2,
    "consolidation_p95_over_idle_p95": 1.2,
    # Memory's cost through MemoryMiddleware in create_agent against through the chain.
    "middleware_cost_p95_over_chain_cost_p95": 1.2,
    # With --facts-per-user 20,1000: memory's cost p50 of users with the largest profile
    # against the smallest's, same run (issue 38: a turn must not read every fact).
    "profile_largest_over_smallest_p50": 1.05,
}
#: Turns left unsummarized per conversation by the pre-populated summaries.
UNSUMMARIZED_TAIL = 5
#: Conversations scheduled explicitly when a phase-B block starts.
EXPLICIT_SCHEDULES = 3
NEVER = 10**9
REPLY = "Sure, I remember that. Your flight leaves at 9:40 on Friday, check in by 9."
SUMMARY_REPLY = (
    "The user is planning a trip to Osaka on Friday with their sister and asked about the "
    "flight time, the visa rules for a stay of 12 days and what to pack besides the "
    "passport. The assistant gave the departure time of 9:40, said most passports need no "
    "visa for short stays, and suggested layers because evenings get cold. The user also "
    "mentioned a budget of 1,200 dollars for the hotel and a peanut allergy."
)


@dataclass(frozen=True)
class Settings:
    conversations: int = 200
    turns: int = 50
    users: int = 20
    requests: int = 300
    summary_seconds: float = 2.0
    message_threshold: int = 4
    block_seconds: float = 10.0
    rounds: int = 6
    think_ms: float = 50.0
    breakdown_requests: int = 200
    gil_reps: int = 15
    profile_requests: int = 0
    seed: int = 1234
    facts_per_user: str = "20"
    quick: bool = False

    @property
    def profile_sizes(self) -> list[int]:
        """The profile sizes users have, user ``i`` the ``i % len``-th (``--facts-per-user``)."""
        return [int(size) for size in self.facts_per_user.split(",")]


QUICK: dict[str, Any] = {
    "conversations": 40,
    "turns": 20,
    "requests": 60,
    "breakdown_requests": 40,
    "block_seconds": 6.0,
    "rounds": 2,
    "gil_reps": 5,
}


# -- conversations and requests ----------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    user_id: str
    theme: dict[str, str]


@dataclass(frozen=True)
class Request:
    conversation: Conversation
    question: str
    facts: int = 0  # the user's profile size (notes, before the moves)

    @property
    def config(self) -> RunnableConfig:
        return {
            "configurable": {
                "conversation_id": self.conversation.conversation_id,
                "user_id": self.conversation.user_id,
            }
        }


#: Facts each user has by default (a profile of a few dozen lines, as a user of some months
#: would); ``--facts-per-user 20,1000`` gives users each size in turn.
FACTS_PER_USER = 20
#: Times each user moved: as many superseded "home" facts, each learnt at the first turn of
#: one of their conversations (what a recalled turn is checked against).
MOVES_PER_USER = 4


def make_conversations(settings: Settings, rng: random.Random) -> list[Conversation]:
    return [
        Conversation(f"conv-{i:04d}", f"user-{i % settings.users:03d}", make_theme(rng))
        for i in range(settings.conversations)
    ]


def conversation_turns(conversation: Conversation, count: int, rng: random.Random) -> list[NewTurn]:
    turns = []
    for i in range(count):
        role: Role = "user" if i % 2 == 0 else "assistant"
        turns.append(NewTurn(role, chat_turn(role, rng, conversation.theme)))
    return turns


def make_requests(
    conversations: list[Conversation],
    count: int,
    rng: random.Random,
    sizes: dict[str, int] | None = None,
) -> list[Request]:
    """Questions in random conversations; with users' profile ``sizes``, the requests go to
    each size in turn (request ``i`` to the ``i % sizes``-th), so that every size is measured
    under the same load."""
    groups: dict[int, list[Conversation]] = {}
    for conversation in conversations:
        size = (sizes or {}).get(conversation.user_id, 0)
        groups.setdefault(size, []).append(conversation)
    order = sorted(groups)
    requests = []
    for i in range(count):
        size = order[i % len(order)]
        conversation = rng.choice(groups[size])
        requests.append(Request(conversation, question(rng, conversation.theme), size))
    return requests


# -- fakes --------------------------------------------------------------------------------


class WaitingChatModel(BaseChatModel):
    """A summarization model that waits like a call to Ollama (I/O, no CPU) and replies.

    ``interrupt`` ends the wait early (used to end a phase-B block without waiting).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    seconds: float = 2.0
    reply: str = SUMMARY_REPLY
    interrupt: threading.Event = Field(default_factory=threading.Event)
    calls: list[float] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "waiting-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.interrupt.wait(self.seconds)
        self.calls.append(time.perf_counter())
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])


class CountingConsolidation(ConsolidationService):
    """The real service, counting what it does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count_lock = threading.Lock()
        self.running = 0
        self.completed: list[tuple[float, float, bool]] = []  # (start, end, stored a summary)

    def consolidate(
        self, conversation_id: str, user_id: str, *, reason: str = "manual"
    ) -> Summary | None:
        with self.count_lock:
            self.running += 1
        began = time.perf_counter()
        stored: Summary | None = None
        try:
            stored = super().consolidate(conversation_id, user_id, reason=reason)
            return stored
        finally:
            with self.count_lock:
                self.running -= 1
                self.completed.append((began, time.perf_counter(), stored is not None))


class NullMemory:
    """A memory that knows nothing and stores nothing: the chain and the model alone."""

    def __init__(self) -> None:
        self.counter = TokenCounter()

    def working_memory(self, conversation_id: str, user_id: str) -> tuple[list[Any], Any]:
        return [], None

    def turn_count(self, conversation_id: str, user_id: str) -> int:
        return 0

    def retrieve(
        self, conversation_id: str, user_id: str, query: str, *, working: Any = None
    ) -> MemoryContext:
        return MemoryContext(conversation_id, user_id, None, (), ())

    def add_turns(
        self, conversation_id: str, user_id: str, turns: Any, *, index_now: bool = True
    ) -> list[Any]:
        return []

    def index_queued(self) -> None:
        return None


def chat_models(llm: GenericFakeChatModel) -> OneModel:
    """The model source of the benchmark's chains: the fake model, counted as the server
    counts the embedded model (its own tokenizer, where installed)."""
    return OneModel(llm, name="bench", counter=embedded_model_counter() or EstimatingCounter())


def fake_chat_model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(REPLY)))


# -- setup --------------------------------------------------------------------------------


@dataclass
class Stack:
    services: Services
    chain: Any
    llm: GenericFakeChatModel
    idle_consolidation: CountingConsolidation
    summarizer_model: WaitingChatModel
    recorder: Recorder
    conversations: list[Conversation]
    #: Each user's profile size (notes, before the moves).
    profile_sizes: dict[str, int]

    def requests(self, count: int, rng: random.Random) -> list[Request]:
        """``count`` requests, alternating between the profile sizes."""
        return make_requests(self.conversations, count, rng, self.profile_sizes)


def consolidation_service(
    services: Services, model: WaitingChatModel, settings: ConsolidationSettings
) -> CountingConsolidation:
    return CountingConsolidation(
        services.store,
        services.buffer,
        build_summarization_chain(model),
        tier3=services.vectors,
        counter=services.manager.counter,
        settings=settings,
    )


def idle_settings(keep_last: int) -> ConsolidationSettings:
    """Triggers out of reach: the listener checks them on every write, nothing fires."""
    return ConsolidationSettings(message_threshold=NEVER, token_limit=NEVER, keep_last=keep_last)


def build_stack(settings: Settings, folder: Path, started: float) -> tuple[Stack, dict[str, Any]]:
    figures: dict[str, Any] = {}
    memory_settings = MemorySettings(
        data_dir=folder, llm_fallback="off", ollama_base_url="http://127.0.0.1:9"
    )
    services = open_services(memory_settings, background=True)
    assert services.vectors is not None
    manager = services.manager
    recorder = Recorder(services)
    rng = random.Random(settings.seed)
    conversations = make_conversations(settings, rng)

    progress("loading the embedding model", started)
    t0 = time.perf_counter()
    services.vectors.embeddings.embed_query("warm up")
    figures["model_load_seconds"] = time.perf_counter() - t0

    total = settings.conversations * settings.turns
    progress(f"storing {total:,} turns through MemoryManager.add_turns", started)
    t0 = time.perf_counter()
    for conversation in conversations:
        turns = conversation_turns(conversation, settings.turns, rng)
        for start in range(0, len(turns), 10):  # ten turns per write, as a chat would
            manager.add_turns(
                conversation.conversation_id, conversation.user_id, turns[start : start + 10]
            )
    figures["store_seconds"] = time.perf_counter() - t0

    progress(f"embedding {total:,} turns into tier 3 (TurnIndexer.drain)", started)
    t0 = time.perf_counter()
    last = [t0]

    def report_drain(done: int, queued: int) -> None:
        if time.perf_counter() - last[0] > 20:
            last[0] = time.perf_counter()
            rate = done / (last[0] - t0)
            progress(f"embedded {done:,}/{queued:,} turns ({rate:,.0f}/s)", started)

    services.vectors.indexer.drain(progress=report_drain)
    figures["drain_seconds"] = time.perf_counter() - t0
    figures["points"] = services.vectors.index.count()
    figures["drain_turns_per_second"] = figures["points"] / figures["drain_seconds"]

    # Each user's profile: a size of --facts-per-user facts, in every prompt of theirs, and
    # a home that moved MOVES_PER_USER times (the older homes retired, pointing at turns).
    t0 = time.perf_counter()
    sizes = settings.profile_sizes
    profile_sizes = {}
    for number in range(settings.users):
        user = f"user-{number:03d}"
        profile_sizes[user] = sizes[number % len(sizes)]
        store_notes(services, user, profile_sizes[user], rng)
        own = [c for c in conversations if c.user_id == user]
        for move in range(MOVES_PER_USER + 1):
            where = own[move % len(own)].conversation_id
            home = FactDraft(
                fill("I live in {city}.", rng),
                subject="home",
                origin="extracted",
                conversation_id=where,
                turns=(1, 1),
            )
            manager.fact_store.add(user, home)
    embed_notes(services, profile_sizes)
    figures["facts_seconds"] = time.perf_counter() - t0
    figures["profile_sizes"] = sorted(set(profile_sizes.values()))

    # Summaries up to the last few turns, as threshold consolidation would have left them.
    t0 = time.perf_counter()
    through = max(1, settings.turns - UNSUMMARIZED_TAIL)
    for conversation in conversations:
        services.store.add_summary(
            conversation.conversation_id,
            SUMMARY_REPLY,
            (1, through),
            running_summary=SUMMARY_REPLY,
            user_id=conversation.user_id,
        )
        services.buffer.prune(
            conversation.conversation_id, UNSUMMARIZED_TAIL, user_id=conversation.user_id
        )
    figures["summaries_seconds"] = time.perf_counter() - t0

    model = WaitingChatModel(seconds=settings.summary_seconds)
    keep_last = memory_settings.memory_tier1_keep_after_consolidation
    idle = consolidation_service(services, model, idle_settings(keep_last))
    manager.listeners.append(idle)
    llm = fake_chat_model()
    chain = build_chat_chain(ChatCore(manager, chat_models(llm)))
    # Warm every conversation into tier 1 and every code path once.
    for conversation in conversations:
        manager.recent_turns(conversation.conversation_id, conversation.user_id)
    for request in make_requests(conversations, 20, rng, profile_sizes):
        chain.invoke({"input": request.question}, request.config)
    settle(services)
    figures["rss_mb_after_setup"] = rss_mb()
    stack = Stack(services, chain, llm, idle, model, recorder, conversations, profile_sizes)
    return stack, figures


def store_notes(services: Services, user: str, count: int, rng: random.Random) -> None:
    """``count`` distinct notes about the user, current, said over the last months.

    Stored as an import stores them (``FactStore.restore``: no decision, no vector), so that
    a 1,000-fact profile takes seconds to set up on any version of the code, whatever an
    add costs there; :func:`embed_notes` gives them their vectors.
    """
    now = datetime.now(UTC)
    notes = []
    for number in range(count):
        text = fill("I care about {topic} and {food}; {person} lives in {city}.", rng)
        when = now - timedelta(days=90) + timedelta(minutes=number)
        notes.append(
            Fact(
                id=uuid.UUID(int=rng.getrandbits(128)).hex,
                user_id=user,
                text=f"Note {number}: {text}",
                kind="other",
                origin="explicit",
                status="current",
                created_at=when,
                valid_from=when,
            )
        )
    services.manager.fact_store.restore(notes)


def embed_notes(services: Services, profile_sizes: dict[str, int]) -> None:
    """Embed the facts stored without a vector, as the code being measured does it.

    With ``FactStore.embed_pending`` (the background's job since issue 38), called until
    none waits; before it, a profile read with a vector embedded them.
    """
    facts = services.manager.fact_store
    pending = getattr(facts, "embed_pending", None)
    if pending is not None:
        while pending(256):
            pass
        return
    assert services.vectors is not None
    vector = services.vectors.embeddings.embed_query("warm up")
    for user in profile_sizes:
        facts.profile(user, vector)


def settle(services: Services) -> None:
    """Catch the tier-3 backfill up in this thread, then let the worker see the empty queue."""
    assert services.vectors is not None
    services.vectors.indexer.drain(settle=False)
    time.sleep(0.005)
