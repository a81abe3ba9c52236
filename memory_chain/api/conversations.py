"""The seed's conversation endpoints, every one scoped to the calling user.

Conversation ids are each user's own: a conversation of another user answers exactly like a
missing one (404), and writing under an id another user also has creates the caller's own
conversation, as under a free id (201), so ids can neither be probed nor taken.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, status
from langchain_core.runnables.config import run_in_executor
from pydantic import BaseModel, Field, field_validator

from memory_chain.api.deps import CurrentUser, ServicesDep
from memory_chain.chain import LLMUnavailableError
from memory_chain.errors import ConversationNotFoundError
from memory_chain.schemas import (
    ID_PATTERN,
    ConversationInfo,
    MemoryItem,
    NewTurn,
    Role,
    Summary,
    TokenUsage,
    Turn,
    as_utc,
)

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

ConversationId = Annotated[
    str,
    Path(
        pattern=f"^{ID_PATTERN.pattern}$",
        description="1-128 letters, digits and '._:@-', starting with a letter or digit.",
    ),
]


class TokensOut(BaseModel):
    """Token counts of a turn."""

    prompt: int | None = None
    completion: int | None = None
    total: int


class TurnOut(BaseModel):
    """One stored turn."""

    turn_number: int
    role: str
    content: str
    timestamp: datetime
    tokens: TokensOut | None = None

    @classmethod
    def of(cls, turn: Turn) -> TurnOut:
        """From a stored turn."""
        tokens = None
        if turn.tokens is not None:
            tokens = TokensOut(
                prompt=turn.tokens.prompt,
                completion=turn.tokens.completion,
                total=turn.tokens.total,
            )
        return cls(
            turn_number=turn.turn_number,
            role=turn.role,
            content=turn.content,
            timestamp=turn.timestamp,
            tokens=tokens,
        )


class SummaryOut(BaseModel):
    """The summary of a turn range."""

    turn_range_start: int
    turn_range_end: int
    summary_text: str
    created_at: datetime
    token_count: int | None = None

    @classmethod
    def of(cls, summary: Summary) -> SummaryOut:
        """From a stored summary."""
        return cls(
            turn_range_start=summary.turn_range_start,
            turn_range_end=summary.turn_range_end,
            summary_text=summary.summary_text,
            created_at=summary.created_at,
            token_count=summary.token_count,
        )


class ConversationOut(BaseModel):
    """A conversation's row."""

    conversation_id: str
    created_at: datetime
    last_message_at: datetime | None
    turn_count: int
    total_tokens: int
    summary: str | None
    status: str

    @classmethod
    def of(cls, info: ConversationInfo) -> ConversationOut:
        """From a stored conversation."""
        return cls(
            conversation_id=info.conversation_id,
            created_at=info.created_at,
            last_message_at=info.last_message_at,
            turn_count=info.turn_count,
            total_tokens=info.total_tokens,
            summary=info.summary,
            status=info.status,
        )


class ConversationDetail(ConversationOut):
    """A conversation with its range summaries and recent turns (tier 1)."""

    summaries: list[SummaryOut]
    recent_turns: list[TurnOut]


class TurnsPage(BaseModel):
    """A page of turns; ask for the next one with ``after=next_after``."""

    turns: list[TurnOut]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null at the end."
    )


#: Most turns one request may add.
MAX_TURNS_PER_REQUEST = 100


class TurnIn(BaseModel):
    """A turn to add."""

    role: Role
    content: str = Field(min_length=1, description="The message text (not empty).")
    timestamp: datetime | None = Field(
        default=None, description="When it was said (ISO 8601; UTC if no offset); default now."
    )

    @field_validator("timestamp")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        try:
            return as_utc(value)
        except OverflowError as exc:
            raise ValueError("timestamp is out of range once converted to UTC") from exc


class AddTurnsRequest(BaseModel):
    """Turns to append to a conversation, in order."""

    turns: list[TurnIn] = Field(min_length=1, max_length=MAX_TURNS_PER_REQUEST)


class TurnsAdded(BaseModel):
    """The stored turns, with the numbers tier 2 gave them."""

    conversation_id: str
    turns: list[TurnOut]


class SearchRequest(BaseModel):
    """A search within a conversation."""

    query: str = Field(min_length=1, max_length=2_000)
    k: int = Field(default=5, ge=1, le=50)


class SearchHit(BaseModel):
    """A search result: where it comes from, and its fused relevance (higher is better)."""

    tier: str
    kind: str
    content: str
    timestamp: datetime
    score: float
    turn_number: int | None = None
    role: str | None = None
    turn_range: tuple[int, int] | None = None
    sources: list[str]

    @classmethod
    def of(cls, item: MemoryItem) -> SearchHit:
        """From a memory item."""
        return cls(
            tier=item.tier,
            kind=item.kind,
            content=item.content,
            timestamp=item.timestamp,
            score=item.score,
            turn_number=item.turn_number,
            role=item.role,
            turn_range=item.turn_range,
            sources=list(item.sources),
        )


class SearchResponse(BaseModel):
    """Search results, best first, and the tiers that could not answer."""

    results: list[SearchHit]
    degraded: list[str]


class DeleteResponse(BaseModel):
    """What a delete did."""

    conversation_id: str
    action: Literal["archived", "purged"]


class ConsolidateResponse(BaseModel):
    """The summary a consolidation stored (null when there was nothing new)."""

    summary: SummaryOut | None


class EndResponse(BaseModel):
    """An end-of-conversation consolidation was scheduled."""

    conversation_id: str
    scheduled: bool


async def _owned(services: ServicesDep, conversation_id: str, user: str) -> ConversationInfo:
    info = await services.store.aget_conversation(conversation_id, user_id=user)
    if info is None:
        raise ConversationNotFoundError(conversation_id)
    return info


@router.get("", response_model=list[ConversationOut])
async def list_conversations(
    services: ServicesDep,
    user: CurrentUser,
    status_filter: Annotated[Literal["active", "archived"] | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[ConversationOut]:
    """The caller's conversations, most recently active first."""
    infos = await run_in_executor(
        None,
        lambda: services.store.list_conversations(
            user_id=user, status=status_filter, limit=limit, offset=offset
        ),
    )
    return [ConversationOut.of(info) for info in infos]


@router.get("/{conversation_id}", response_model=ConversationDetail)
async def get_conversation(
    conversation_id: ConversationId, services: ServicesDep, user: CurrentUser
) -> ConversationDetail:
    """A conversation with its summaries and recent turns."""
    info = await _owned(services, conversation_id, user)
    summaries = await run_in_executor(
        None, lambda: services.store.get_summaries(conversation_id, user_id=user)
    )
    recent = await run_in_executor(None, services.manager.recent_turns, conversation_id, user)
    return ConversationDetail(
        **ConversationOut.of(info).model_dump(),
        summaries=[SummaryOut.of(s) for s in summaries],
        recent_turns=[TurnOut.of(t) for t in recent],
    )


@router.get("/{conversation_id}/turns", response_model=TurnsPage)
async def get_turns(
    conversation_id: ConversationId,
    services: ServicesDep,
    user: CurrentUser,
    after: Annotated[int, Query(ge=0, le=2**31 - 1, description="Turns after this number.")] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> TurnsPage:
    """Turns in order, a page at a time."""
    info = await _owned(services, conversation_id, user)
    turns = await services.store.aget_turns(conversation_id, user_id=user, after=after, limit=limit)
    more = bool(turns) and turns[-1].turn_number < info.turn_count
    return TurnsPage(
        turns=[TurnOut.of(t) for t in turns],
        next_after=turns[-1].turn_number if more else None,
    )


@router.post(
    "/{conversation_id}/turns",
    response_model=TurnsAdded,
    status_code=status.HTTP_201_CREATED,
)
async def add_turns(
    conversation_id: ConversationId,
    request: AddTurnsRequest,
    services: ServicesDep,
    user: CurrentUser,
) -> TurnsAdded:
    """Append turns without calling the LLM (log a chat held elsewhere, seed a memory).

    The conversation is created for the caller if it does not exist. The turns go through the
    same path as a chat's: tier 2 (one transaction: all or nothing), tier 1, the tier-3 queue,
    and the consolidation triggers.
    """
    counts = services.manager.counter.count_many([turn.content for turn in request.turns])
    new_turns = [
        NewTurn(turn.role, turn.content, timestamp=turn.timestamp, tokens=TokenUsage(total=count))
        for turn, count in zip(request.turns, counts, strict=True)
    ]
    stored = await services.manager.aadd_turns(conversation_id, user, new_turns)
    return TurnsAdded(conversation_id=conversation_id, turns=[TurnOut.of(t) for t in stored])


@router.post("/{conversation_id}/search", response_model=SearchResponse)
async def search_conversation(
    conversation_id: ConversationId,
    request: SearchRequest,
    services: ServicesDep,
    user: CurrentUser,
) -> SearchResponse:
    """Semantic and keyword search within the conversation (tiers 2 and 3)."""
    await _owned(services, conversation_id, user)
    context = await run_in_executor(
        None,
        lambda: services.manager.search(conversation_id, user, request.query, k=request.k),
    )
    return SearchResponse(
        results=[SearchHit.of(item) for item in context.items],
        degraded=list(context.degraded),
    )


@router.delete("/{conversation_id}", response_model=DeleteResponse)
async def delete_conversation(
    conversation_id: ConversationId,
    services: ServicesDep,
    user: CurrentUser,
    purge: Annotated[bool, Query(description="Remove it from every tier (not undoable).")] = False,
) -> DeleteResponse:
    """Archive a conversation, or with ``purge=true`` remove it from every tier."""
    await _owned(services, conversation_id, user)
    if purge:
        deleted = await run_in_executor(
            None, services.manager.delete_conversation, conversation_id, user
        )
        if not deleted:
            raise ConversationNotFoundError(conversation_id)
        return DeleteResponse(conversation_id=conversation_id, action="purged")
    await run_in_executor(
        None, lambda: services.store.set_status(conversation_id, "archived", user_id=user)
    )
    return DeleteResponse(conversation_id=conversation_id, action="archived")


@router.post(
    "/{conversation_id}/consolidate",
    response_model=ConsolidateResponse,
    responses={503: {"description": "No LLM to summarize with; the message says what to start."}},
)
async def consolidate_conversation(
    conversation_id: ConversationId, services: ServicesDep, user: CurrentUser
) -> ConsolidateResponse:
    """Summarize what is not summarized yet, now (the manual trigger)."""
    await _owned(services, conversation_id, user)
    consolidation = services.consolidation
    models = services.models
    if consolidation is None or models is None:
        raise LLMUnavailableError(
            "this server runs without an LLM, so it cannot summarize: start it with one "
            "(Ollama at MEMORY_CHAIN_OLLAMA_BASE_URL, or MEMORY_CHAIN_LLM_FALLBACK=embedded); "
            "the turns stay stored and unsummarized"
        )
    if not await run_in_executor(None, models.reachable):
        raise LLMUnavailableError(
            f"no LLM to summarize with ({models.detail}); the turns stay stored and are "
            "summarized once it is reachable"
        )
    summary = await consolidation.aconsolidate(conversation_id, user)
    return ConsolidateResponse(summary=SummaryOut.of(summary) if summary else None)


@router.post(
    "/{conversation_id}/end",
    response_model=EndResponse,
    status_code=status.HTTP_202_ACCEPTED,
)
async def end_conversation(
    conversation_id: ConversationId, services: ServicesDep, user: CurrentUser
) -> EndResponse:
    """The conversation is over: consolidate it in the background."""
    await _owned(services, conversation_id, user)
    scheduled = services.consolidation is not None
    if services.consolidation is not None:
        services.consolidation.end(conversation_id, user)
    return EndResponse(conversation_id=conversation_id, scheduled=scheduled)
