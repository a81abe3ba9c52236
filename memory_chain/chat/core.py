"""One chat turn, whatever door it came through: reconcile, budget, answer, store.

:class:`ChatCore` takes a :class:`~memory_chain.chat.request.ChatRequest` and

1. resolves the model (its window and token counter) and checks that the client's
   instructions and message fit the window with the reply's room (else
   :class:`~memory_chain.errors.ContextOverflowError`, before anything is stored);
2. reads the conversation's working memory once and reconciles the client's history with
   it (:mod:`memory_chain.chat.reconcile`), storing turns the client has and memory lacks;
3. retrieves memory for the message and builds the budgeted prompt
   (:mod:`memory_chain.chat.budget`);
4. stores the user's message (before the model runs, so a failed call loses nothing), streams
   the model's reply with the client's options, and stores the reply with its token counts.

Storing wakes consolidation (in the background); tier 3 embeds the exchange once the reply
is stored. The routes only parse and map: the OpenAI-compatible route, the LCEL chain (and
LangServe through it) and the context preview all come here.

Example:
    >>> core = ChatCore(manager, OneModel(llm))  # doctest: +SKIP
    >>> turn = core.prepare(ChatRequest.checked(conversation_id="trip", user_id="ana",
    ...                                         message="When do we fly?"))  # doctest: +SKIP
    >>> "".join(chunk.text for chunk in core.stream(turn))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal

import httpx
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import run_in_executor

from memory_chain.chat.budget import PROMPT_OVERHEAD, Budget, BuiltPrompt, build_prompt, check_fits
from memory_chain.chat.lines import instructions
from memory_chain.chat.models import ModelInfo, ModelSource
from memory_chain.chat.reconcile import HistoryPlan, Said, needs_every_turn, plan_history
from memory_chain.chat.request import ChatRequest
from memory_chain.chat.sections import MESSAGE_OVERHEAD, Entry, Section
from memory_chain.chat.sent import message_tokens
from memory_chain.errors import (
    ContextOverflowError,
    LLMUnavailableError,
    MemoryChainError,
    ModelNotFoundError,
    ModelRequestError,
)
from memory_chain.manager import MemoryManager
from memory_chain.messages import message_text
from memory_chain.schemas import MemoryContext, NewTurn, TokenUsage, Turn
from memory_chain.tokens import EstimatingCounter

logger = logging.getLogger(__name__)

#: Longest reply when neither the request nor the settings say.
DEFAULT_REPLY_TOKENS = 512


@dataclass(frozen=True)
class PreparedTurn:
    """A chat turn ready for the model.

    Plain data (it is the first step's output in LangServe's playground and logs).

    Attributes:
        request: What the client asked.
        model: The name of the model that answers.
        plan: What is stored (:class:`~memory_chain.chat.reconcile.HistoryPlan`).
        prompt: The budgeted prompt.
        context: What memory found (before the budget chose from it).
        counted_with: Whether the prompt was counted with the model's own tokenizer or with
            an estimate that counts high.
    """

    request: ChatRequest
    model: str
    plan: HistoryPlan
    prompt: BuiltPrompt
    context: MemoryContext
    counted_with: Literal["tokenizer", "estimate"] = "estimate"

    @property
    def messages(self) -> list[BaseMessage]:
        """The prompt's messages."""
        return self.prompt.messages


class ChatCore:
    """Answers chat requests with memory (see the module docstring).

    Args:
        manager: The memory manager (storage, retrieval, consolidation triggers).
        models: Resolves model names (windows, counters) and makes the calls' arguments.
        default_reply_tokens: The reply's room when the request sets no ``max_tokens``
            (at most a quarter of the window).
    """

    def __init__(
        self,
        manager: MemoryManager,
        models: ModelSource,
        *,
        default_reply_tokens: int = DEFAULT_REPLY_TOKENS,
    ) -> None:
        self.manager = manager
        self.models = models
        self.default_reply_tokens = default_reply_tokens

    # -- before the model ----------------------------------------------------------------

    def prepare(self, request: ChatRequest) -> PreparedTurn:
        """Resolve, check, reconcile, retrieve and build the prompt (blocking: SQL, vectors).

        Turns the client has and memory lacks are stored here (a history ``"import"``) as
        history: no remember/forget request in them is acted on. The new message is stored
        by :meth:`stream` / :meth:`astream`, and is the one request acted on.

        Raises:
            ContextOverflowError: The message cannot fit the model's window (nothing stored).
            ModelNotFoundError: The request names a model the LLM server does not have.
            LLMUnavailableError: The LLM server cannot be asked about its models.
        """
        model, budget = self._model_and_budget(request)
        if not request.memory:
            return self._without_memory(request, model, budget)
        # Before anything is read or stored.
        head = instructions(request.system)
        check_fits(budget, model.counter, head, request.message, model=model.name)
        cid, uid = request.conversation_id, request.user_id
        working = self.manager.working_memory(cid, uid)
        recent = working[0]
        count = recent[-1].turn_number if recent else self.manager.turn_count(cid, uid)
        stored: list[Turn] = recent
        if needs_every_turn(request.history, count) and len(recent) < count:
            stored = self.manager.turns(cid, uid)
        plan = plan_history(request.history, [Said.of(t) for t in stored], count, request.message)
        if plan.action not in ("append",):
            logger.info(
                "conversation %s: history %s, %d to add", cid, plan.action, len(plan.missing)
            )
        if plan.missing:
            missing = [
                HumanMessage(said.text) if said.role == "user" else AIMessage(said.text)
                for said in plan.missing
            ]
            # Said before this message, to a model without memory (or elsewhere): history,
            # so an old "remember ..." / "forget ..." in it is not acted on now (only the new
            # message is a request; consolidation learns the facts these turns state).
            self.manager.add_turns(cid, uid, missing, as_history=True)
            working = self.manager.working_memory(cid, uid)
        context = self.manager.retrieve(cid, uid, request.message, working=working)
        drop = {"repeat": 2, "retry": 1}.get(plan.action, 0)
        if drop:  # the exchange being redone is not memory of itself
            context = replace(context, recent=context.recent[: len(context.recent) - drop])
        prompt = build_prompt(
            system=request.system,
            context=context,
            message=request.message,
            budget=budget,
            counter=model.counter,
            model=model.name,
        )
        return PreparedTurn(request, model.name, plan, prompt, context, _counted_with(model))

    def preview(self, request: ChatRequest) -> PreparedTurn:
        """What :meth:`prepare` would send, storing nothing (the client's history is ignored)."""
        return self.prepare(replace(request, history=None))

    def _model_and_budget(self, request: ChatRequest) -> tuple[ModelInfo, Budget]:
        model = self.models.resolve(request.model)
        budget = Budget.of(
            window=model.window,
            max_tokens=request.options.max_tokens,
            default_reply=self.default_reply_tokens,
        )
        return model, budget

    def _without_memory(
        self, request: ChatRequest, model: ModelInfo, budget: Budget
    ) -> PreparedTurn:
        """The client's messages alone (a background task): checked against the window."""
        messages: list[BaseMessage] = [SystemMessage(request.system)] if request.system else []
        for said in request.history or ():
            messages.append(
                HumanMessage(said.text) if said.role == "user" else AIMessage(said.text)
            )
        messages.append(HumanMessage(request.message))
        counts = message_tokens(messages, model.counter)
        total = sum(counts) + PROMPT_OVERHEAD
        if total > budget.prompt:
            message = counts[-1] - MESSAGE_OVERHEAD  # its text; the markers go with the rest
            raise ContextOverflowError(
                model=model.name,
                message_tokens=message,
                system_tokens=total - message,
                window=budget.window,
                reserve=budget.reserve,
            )
        entries = tuple(
            Entry(message_text(m), c, "message") for m, c in zip(messages, counts, strict=True)
        )
        section = Section("message", total, entries, framing=PROMPT_OVERHEAD)
        prompt = BuiltPrompt(messages, (section,), budget, total)
        context = MemoryContext(request.conversation_id, request.user_id, None, (), ())
        return PreparedTurn(
            request, model.name, HistoryPlan("repeat"), prompt, context, _counted_with(model)
        )

    # -- the model and the writes ----------------------------------------------------------

    def _store(self, turn: PreparedTurn, new: NewTurn) -> None:
        # Tier 3 embeds the exchange once the reply is stored (index_queued): woken by the
        # user's message, its worker would compete with the reply for the CPU.
        request = turn.request
        self.manager.add_turns(request.conversation_id, request.user_id, [new], index_now=False)

    def _call(self, turn: PreparedTurn) -> tuple[ModelInfo, Any, dict[str, Any]]:
        info = self.models.resolve(turn.model)
        llm = self.models.chat_model(info)
        kwargs = self.models.call_options(info, turn.request.options, turn.prompt.budget.reserve)
        return info, llm, kwargs

    def stream(
        self, turn: PreparedTurn, config: RunnableConfig | None = None
    ) -> Iterator[AIMessageChunk]:
        """Store the message, stream the reply, store it (blocking I/O: the sync twin)."""
        if turn.request.memory and turn.plan.stores_message:
            self._store(turn, self._user_turn(turn))
        info, llm, kwargs = self._call(turn)
        try:
            reply: AIMessageChunk | None = None
            with model_errors(info, turn.request.model is not None):
                for chunk in llm.stream(turn.messages, config, **kwargs):
                    reply = chunk if reply is None else reply + chunk
                    yield chunk
            if reply is not None and turn.request.memory and turn.plan.stores_reply:
                self._store(turn, reply_turn(reply, self.manager))
        finally:
            if turn.request.memory:
                self.manager.index_queued()

    async def astream(
        self, turn: PreparedTurn, config: RunnableConfig | None = None
    ) -> AsyncIterator[AIMessageChunk]:
        """As :meth:`stream`, the reply over the model's async client, the writes in a thread."""
        memory = turn.request.memory
        if memory and turn.plan.stores_message:
            await run_in_executor(None, self._store, turn, self._user_turn(turn))
        info, llm, kwargs = self._call(turn)
        try:
            reply: AIMessageChunk | None = None
            with model_errors(info, turn.request.model is not None):
                async for chunk in llm.astream(turn.messages, config, **kwargs):
                    reply = chunk if reply is None else reply + chunk
                    yield chunk
            if reply is not None and memory and turn.plan.stores_reply:
                await run_in_executor(None, self._store, turn, reply_turn(reply, self.manager))
        finally:
            if memory:
                self.manager.index_queued()

    def _user_turn(self, turn: PreparedTurn) -> NewTurn:
        text = turn.request.message
        return NewTurn("user", text, tokens=TokenUsage(total=self.manager.counter.count(text)))


def _counted_with(model: ModelInfo) -> Literal["tokenizer", "estimate"]:
    return "estimate" if isinstance(model.counter, EstimatingCounter) else "tokenizer"


def reply_turn(reply: AIMessageChunk | AIMessage, manager: MemoryManager) -> NewTurn:
    """The reply as a turn, with the model's token counts where it reported them."""
    text = message_text(reply) or "(no reply)"
    usage = reply.usage_metadata
    if usage:
        tokens = TokenUsage(
            total=int(usage.get("total_tokens", 0)),
            prompt=int(usage.get("input_tokens", 0)),
            completion=int(usage.get("output_tokens", 0)),
        )
    else:
        tokens = TokenUsage(total=manager.counter.count(text))
    return NewTurn("assistant", text, tokens=tokens)


@contextmanager
def model_errors(model: ModelInfo, asked: bool) -> Iterator[None]:
    """Turn the chat model's failures into errors that say what happened.

    The LLM server down or too slow: :class:`LLMUnavailableError` (503). A model it does not
    have: :class:`ModelNotFoundError` when the client named it, else
    :class:`LLMUnavailableError` (the configured model is not pulled). A request it refuses
    (4xx): :class:`ModelRequestError`. memory_chain's own errors pass through.
    """
    try:
        yield
    except MemoryChainError:
        raise
    except Exception as exc:
        raise _model_error(exc, model, asked) from exc


def _model_error(exc: Exception, model: ModelInfo, asked: bool) -> MemoryChainError:
    status = getattr(exc, "status_code", None)
    detail = str(getattr(exc, "error", None) or exc)
    if isinstance(status, int) and status == 404:
        if asked:
            return ModelNotFoundError(model.name, [])
        return LLMUnavailableError(
            f"the configured chat model {model.name!r} is not on the LLM server ({detail}): "
            f"pull it (`ollama pull {model.name}`) or set MEMORY_CHAIN_OLLAMA_CHAT_MODEL"
        )
    if isinstance(status, int) and 400 <= status < 500:
        return ModelRequestError(f"the model refused the request ({detail})")
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return LLMUnavailableError(
            f"the chat model did not answer within llm_timeout_seconds ({type(exc).__name__}: "
            f"{exc}): the model is overloaded or too slow for this machine; raise "
            "MEMORY_CHAIN_LLM_TIMEOUT_SECONDS, use a smaller model, or check that the LLM "
            "server is not stuck"
        )
    if isinstance(exc, httpx.TransportError | ConnectionError):
        return LLMUnavailableError(
            f"the LLM server cannot be reached ({type(exc).__name__}: {exc}): check that Ollama "
            "runs at the configured ollama_base_url"
        )
    return LLMUnavailableError(f"the chat model failed ({type(exc).__name__}: {detail})")
