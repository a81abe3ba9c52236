"""The conversation endpoints (``/v1/conversations``), every one scoped to the calling user.

Conversation ids are each user's own: a route about an existing conversation answers 404 when
the caller has none of that id, exactly as for an id nobody uses, and adding turns under an id
another user also has creates the caller's own conversation (201), so ids can neither be
probed nor taken (:data:`~memory_chain.api.deps.OwnedConversation`).

Every route here reads or writes a store, so each is a plain ``def`` that FastAPI runs in its
threadpool (see :mod:`memory_chain.api.deps`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Literal

from fastapi import APIRouter, Query, status

from memory_chain.api.deps import (
    ConsolidationDep,
    ConversationId,
    CurrentUser,
    MemoryDep,
    OwnedConversation,
    ServicesDep,
    SummarizerDep,
)
from memory_chain.api.models import (
    AddTurnsRequest,
    ConsolidateResponse,
    ContextPreview,
    ContextRequest,
    ConversationDetail,
    ConversationOut,
    DeleteResponse,
    EndResponse,
    SearchRequest,
    SearchResponse,
    TurnsAdded,
    TurnsPage,
)
from memory_chain.chat.request import ChatRequest, ReplyOptions
from memory_chain.errors import ConversationNotFoundError, LLMUnavailableError
from memory_chain.imports.loader import imported_titles
from memory_chain.schemas import NewTurn, TokenUsage

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


@router.get("", response_model=list[ConversationOut])
def list_conversations(
    memory: MemoryDep,
    user: CurrentUser,
    status_filter: Annotated[Literal["active", "archived"] | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[ConversationOut]:
    """The caller's conversations, most recently active first."""
    found = memory.conversations(user, status=status_filter, limit=limit, offset=offset)
    titles = imported_titles(memory.store, user, [info.conversation_id for info in found])
    return [
        ConversationOut.model_validate(info).model_copy(
            update={"title": titles.get(info.conversation_id)}
        )
        for info in found
    ]


@router.get("/{conversation_id}", response_model=ConversationDetail)
def get_conversation(
    conversation: OwnedConversation, memory: MemoryDep, user: CurrentUser
) -> ConversationDetail:
    """A conversation with its summaries and recent turns."""
    conversation_id = conversation.conversation_id
    return ConversationDetail(
        **asdict(conversation),
        title=imported_titles(memory.store, user, [conversation_id]).get(conversation_id),
        summaries=memory.summaries(conversation_id, user),
        recent_turns=memory.recent_turns(conversation_id, user),
    )


@router.get("/{conversation_id}/turns", response_model=TurnsPage)
def get_turns(
    conversation: OwnedConversation,
    memory: MemoryDep,
    user: CurrentUser,
    after: Annotated[int, Query(ge=0, le=2**31 - 1, description="Turns after this number.")] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> TurnsPage:
    """Turns in order, a page at a time."""
    turns = memory.turns(conversation.conversation_id, user, after=after, limit=limit)
    more = bool(turns) and turns[-1].turn_number < conversation.turn_count
    return TurnsPage(turns=turns, next_after=turns[-1].turn_number if more else None)


@router.post(
    "/{conversation_id}/turns",
    response_model=TurnsAdded,
    status_code=status.HTTP_201_CREATED,
)
def add_turns(
    conversation_id: ConversationId,
    request: AddTurnsRequest,
    memory: MemoryDep,
    user: CurrentUser,
) -> TurnsAdded:
    """Append turns without calling the LLM (log a chat held elsewhere, prefill a memory).

    The conversation is created for the caller if it does not exist. The turns go through the
    same path as a chat's: tier 2 (one transaction: all or nothing), tier 1, the tier-3 queue,
    and the consolidation triggers. Empty messages (no text, or only whitespace) are left
    out and counted in ``skipped_empty``; the others are stored.
    """
    counts = memory.counter.count_many([turn.content for turn in request.turns])
    new_turns = [
        NewTurn(turn.role, turn.content, timestamp=turn.timestamp, tokens=TokenUsage(total=count))
        for turn, count in zip(request.turns, counts, strict=True)
    ]
    stored = memory.add_turns(conversation_id, user, new_turns)
    return TurnsAdded(
        conversation_id=conversation_id, turns=stored, skipped_empty=len(new_turns) - len(stored)
    )


@router.post("/{conversation_id}/search", response_model=SearchResponse)
def search_conversation(
    conversation: OwnedConversation,
    request: SearchRequest,
    memory: MemoryDep,
    user: CurrentUser,
) -> SearchResponse:
    """Semantic and keyword search within the conversation (tiers 2 and 3)."""
    found = memory.search(conversation.conversation_id, user, request.query, k=request.k)
    return SearchResponse(results=found.items, degraded=found.degraded)


@router.delete("/{conversation_id}", response_model=DeleteResponse)
def delete_conversation(
    conversation: OwnedConversation,
    memory: MemoryDep,
    user: CurrentUser,
    purge: Annotated[bool, Query(description="Remove it from every tier (not undoable).")] = False,
) -> DeleteResponse:
    """Archive a conversation, or with ``purge=true`` remove it from every tier."""
    conversation_id = conversation.conversation_id
    if not purge:
        memory.archive(conversation_id, user)
        return DeleteResponse(conversation_id=conversation_id, action="archived")
    if not memory.delete_conversation(conversation_id, user):
        raise ConversationNotFoundError(conversation_id)  # purged by another request meanwhile
    return DeleteResponse(conversation_id=conversation_id, action="purged")


@router.post(
    "/{conversation_id}/consolidate",
    response_model=ConsolidateResponse,
    responses={503: {"description": "No LLM to summarize with; the message says what to start."}},
)
def consolidate_conversation(
    conversation: OwnedConversation, summarizer: SummarizerDep, user: CurrentUser
) -> ConsolidateResponse:
    """Summarize what is not summarized yet, now (the manual trigger)."""
    return ConsolidateResponse(summary=summarizer.consolidate(conversation.conversation_id, user))


@router.post(
    "/{conversation_id}/end",
    response_model=EndResponse,
    status_code=status.HTTP_202_ACCEPTED,
)
def end_conversation(
    conversation: OwnedConversation, consolidation: ConsolidationDep, user: CurrentUser
) -> EndResponse:
    """The conversation is over: consolidate it in the background."""
    conversation_id = conversation.conversation_id
    if consolidation is not None:
        consolidation.end(conversation_id, user)
    return EndResponse(conversation_id=conversation_id, scheduled=consolidation is not None)


@router.post("/{conversation_id}/context", response_model=ContextPreview)
def preview_context(
    conversation_id: ConversationId,
    request: ContextRequest,
    services: ServicesDep,
    user: CurrentUser,
) -> ContextPreview:
    """What memory would put in the prompt for this message, within the model's window.

    The sections (the instructions, the user's facts, the running summary, the recent turns,
    the recalled items, the message) with their token counts and the budget; no model is
    called and nothing is stored. A conversation that does not exist yet previews a new
    chat's context (memory from the caller's other conversations).
    """
    core = services.core
    if core is None:
        raise LLMUnavailableError("the server runs without a chat model: start it with one")
    chat = ChatRequest.checked(
        conversation_id=conversation_id,
        user_id=user,
        message=request.message,
        system=request.system or "",
        model=request.model,
        options=ReplyOptions(max_tokens=request.max_tokens),
        max_chars=services.settings.max_message_chars,
    )
    turn = core.preview(chat)
    prompt = turn.prompt
    return ContextPreview(
        model=turn.model,
        budget={
            "window": prompt.budget.window,
            "reserve": prompt.budget.reserve,
            "prompt": prompt.budget.prompt,
        },
        prompt_tokens=prompt.tokens,
        counted_with=turn.counted_with,
        sections=[
            {"name": s.name, "room": s.room, "tokens": s.tokens, "entries": s.entries}
            for s in prompt.sections
        ],
        messages=[{"role": m.type, "content": str(m.content)} for m in prompt.messages],
        degraded=list(turn.context.degraded),
    )
