"""The caller's own data: who they are, their facts, their export, their erasure.

``GET /v1/me`` and the ``/v1/facts`` routes serve the memory browser (``/ui/``) and any client
that shows or manages what memory knows about its user (:mod:`memory_chain.facts`): what the
user asked to be remembered ("remember that ..."), what was added by hand, with their history.
``GET /v1/facts`` lists the current ones (``?include=superseded&include=dismissed`` for the
history); ``POST`` adds one (201; reconciled by :mod:`memory_chain.facts.rules`: the same
fact again adds nothing and answers 200, a newer value of the same subject supersedes the
older; 409 when the user has ``memory_max_facts_per_user`` current facts); ``PATCH
/v1/facts/{id}`` edits one (the id stays, the old text is kept as a superseded copy);
``DELETE`` dismisses one (it leaves every prompt, the history keeps it).

``GET /v1/users/me/status`` says what the caller has stored and how far the background work
on it has come (turns consolidated and waiting, turns not yet searchable by meaning, facts
learnt: what ``memory-chain status`` prints, from the same function).
``GET /v1/users/me/export`` streams every conversation, fact and store item of the caller in
the JSON Lines format of ``memory-chain export``; ``DELETE /v1/users/me`` erases the caller
from every tier (rows, facts and store items at once, vectors through the tier-3 task queue,
so also when the vector store is down).
Every endpoint acts only on the calling user, as the API key (or user header) decides.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response, status
from fastapi.responses import StreamingResponse

from memory_chain.api.deps import CurrentUser, MemoryDep, ServicesDep, SettingsDep
from memory_chain.api.models import (
    Fact,
    FactAdded,
    FactIn,
    FactPatch,
    FactsResponse,
    Me,
    MemoryStatusOut,
)
from memory_chain.errors import FactNotFoundError
from memory_chain.facts.model import FactDraft
from memory_chain.schemas import ID_PATTERN
from memory_chain.tiers.sql.status import memory_status

router = APIRouter(prefix="/v1", tags=["users"])

#: A fact's id.
FACT_ID = Path(pattern="^[0-9a-f]{32}$", description="A fact's id from GET /v1/facts.")
FactId = Annotated[str, FACT_ID]


@router.get("/me", response_model=Me)
async def me(settings: SettingsDep, user: CurrentUser) -> Me:
    """The user this request acts as (checks the key, as every endpoint does)."""
    return Me(user_id=user, keys_required=settings.keys_required)


@router.get("/facts", response_model=FactsResponse)
def list_facts(
    memory: MemoryDep,
    user: CurrentUser,
    include: Annotated[
        list[Literal["superseded", "dismissed"]],
        Query(description="Past facts too: 'superseded', 'dismissed' (repeat for both)."),
    ] = [],  # noqa: B006 - FastAPI copies query defaults
    conversation_id: Annotated[
        str | None,
        Query(
            pattern=f"^{ID_PATTERN.pattern}$",
            description="Only the facts said in this conversation.",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Most facts returned.")] = 200,
) -> FactsResponse:
    """The caller's current facts, newest first (and past ones, as asked)."""
    found = memory.facts(user, include=include, conversation_id=conversation_id, limit=limit)
    return FactsResponse(facts=[Fact.model_validate(f) for f in found])


@router.post(
    "/facts",
    response_model=FactAdded,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": FactAdded, "description": "The caller had this fact already."},
        409: {
            "description": "The caller has as many current facts as memory keeps "
            "(memory_max_facts_per_user): dismiss some first."
        },
    },
)
def add_fact(body: FactIn, memory: MemoryDep, user: CurrentUser, response: Response) -> FactAdded:
    """Add a fact by hand (201); 200 when the caller has it already (no fact added)."""
    change = memory.add_fact(
        user, FactDraft(body.text, kind=body.kind, origin="api", subject=body.subject)
    )
    if not change.stored:
        response.status_code = status.HTTP_200_OK
    return FactAdded.model_validate(change)


@router.get("/facts/{fact_id}", response_model=Fact, responses={404: {"description": "None."}})
def get_fact(fact_id: FactId, memory: MemoryDep, user: CurrentUser) -> Fact:
    """One of the caller's facts, whatever its status."""
    found = memory.fact(user, fact_id)
    if found is None:
        raise FactNotFoundError(fact_id)
    return Fact.model_validate(found)


@router.patch(
    "/facts/{fact_id}",
    response_model=Fact,
    responses={404: {"description": "No such current fact of the caller."}},
)
def edit_fact(fact_id: FactId, body: FactPatch, memory: MemoryDep, user: CurrentUser) -> Fact:
    """Edit a current fact's text or kind (the old text stays in its history)."""
    edited = memory.edit_fact(user, fact_id, text=body.text, kind=body.kind)
    if edited is None:
        raise FactNotFoundError(fact_id)
    return Fact.model_validate(edited)


@router.delete(
    "/facts/{fact_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: {"description": "No such fact of the caller."}},
)
def delete_fact(fact_id: FactId, memory: MemoryDep, user: CurrentUser) -> Response:
    """Dismiss a fact: it leaves every prompt (its history keeps it). Idempotent."""
    if memory.dismiss_fact(user, fact_id) is None:
        raise FactNotFoundError(fact_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/users/me/status", response_model=MemoryStatusOut)
def status_me(services: ServicesDep, user: CurrentUser) -> MemoryStatusOut:
    """What the caller has stored, and how far consolidation and embedding have come."""
    (found,) = memory_status(services.store, user_id=user, tier3=services.vectors is not None)
    return MemoryStatusOut.model_validate(found)


@router.get(
    "/users/me/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}, "description": "JSON Lines."}},
)
async def export_me(memory: MemoryDep, user: CurrentUser) -> StreamingResponse:
    """Every conversation and fact of the caller, one JSON object per line (as exported).

    The lines are read as they are sent (Starlette iterates them in its threadpool), each
    conversation (each user's facts, each page of store items) in a short transaction of its
    own: a client that downloads slowly holds no database connection
    (:mod:`memory_chain.tiers.sql.export` says what consistency that gives).
    """
    return StreamingResponse(
        memory.export(user),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="memory-chain-export.jsonl"'},
    )


@router.delete("/users/me", status_code=status.HTTP_204_NO_CONTENT)
def delete_me(memory: MemoryDep, user: CurrentUser) -> Response:
    """Erase the caller: every conversation, turn, summary, point and fact. Idempotent."""
    memory.delete_user(user)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
