"""The caller's own data: who they are, their remembered facts, their export, their erasure.

``GET /v1/me`` and ``GET /v1/facts`` serve the memory browser (``/ui/``) and any client that
wants to show what memory holds for its user. Facts are the user turns that asked to be
remembered ("remember this"), as tier 3 filed them: searchable from every conversation of the
user. A fact said a moment ago shows once the tier-3 backfill has embedded its turn (usually
within a second). ``DELETE /v1/facts/{id}`` forgets one (the turn stays in its conversation).

``GET /v1/users/me/export`` streams every conversation of the caller in the JSON Lines format
of ``memory-chain export``; ``DELETE /v1/users/me`` erases the caller from every tier (rows at
once, vectors and facts through the tier-3 task queue, so also when the vector store is down).
Every endpoint acts only on the calling user, as the API key (or user header) decides.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status
from fastapi.responses import StreamingResponse

from memory_chain.api.deps import CurrentUser, MemoryDep, SettingsDep
from memory_chain.api.models import FactsResponse, Me
from memory_chain.errors import FactNotFoundError
from memory_chain.schemas import ID_PATTERN

router = APIRouter(prefix="/v1", tags=["users"])

#: A fact's id: its conversation and the number of the turn that said it.
FACT_ID = re.compile(f"(?P<conversation>{ID_PATTERN.pattern}):(?P<turn>[1-9][0-9]{{0,9}})")


@router.get("/me", response_model=Me)
async def me(settings: SettingsDep, user: CurrentUser) -> Me:
    """The user this request acts as (checks the key, as every endpoint does)."""
    return Me(user_id=user, keys_required=settings.keys_required)


@router.get("/facts", response_model=FactsResponse, responses={503: {"description": "Tier 3 off."}})
def list_facts(
    memory: MemoryDep,
    user: CurrentUser,
    conversation_id: Annotated[
        str | None,
        Query(
            pattern=f"^{ID_PATTERN.pattern}$",
            description="Only this conversation's facts (1-128 letters, digits and '._:@-').",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="Most facts returned.")] = 100,
    include_archived: Annotated[
        bool, Query(description="Facts of archived conversations too.")
    ] = False,
) -> FactsResponse:
    """The caller's remembered facts, newest first (never those of purged conversations)."""
    found = memory.facts(
        user, conversation_id=conversation_id, include_archived=include_archived, limit=limit
    )
    return FactsResponse(facts=found)


@router.delete(
    "/facts/{fact_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: {"description": "No such fact of the caller."}},
)
def delete_fact(
    fact_id: Annotated[
        str,
        Path(
            pattern=f"^{FACT_ID.pattern}$",
            description="A fact's id from GET /v1/facts: '<conversation_id>:<turn_number>'.",
        ),
    ],
    memory: MemoryDep,
    user: CurrentUser,
) -> Response:
    """Forget a remembered fact: it is never offered again (the turn stays in its chat)."""
    match = FACT_ID.fullmatch(fact_id)
    if match is None:  # pragma: no cover - the path pattern checked it
        raise FactNotFoundError(fact_id)
    if not memory.dismiss_fact(user, match["conversation"], int(match["turn"])):
        raise FactNotFoundError(fact_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/users/me/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}, "description": "JSON Lines."}},
)
async def export_me(memory: MemoryDep, user: CurrentUser) -> StreamingResponse:
    """Every conversation of the caller, one JSON object per line (``memory-chain export``).

    The lines are read as they are sent (Starlette iterates them in its threadpool).
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
