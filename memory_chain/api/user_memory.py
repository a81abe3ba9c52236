"""The caller's identity and remembered facts: ``GET /v1/me`` and ``GET /v1/facts``.

Both serve the memory browser (``/ui/``) and any client that wants to show what memory holds
for its user. Facts are the user turns that asked to be remembered ("remember this"), as
tier 3 filed them: searchable from every conversation of the user. A fact said a moment ago
shows once the tier-3 backfill has embedded its turn (usually within a second).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from langchain_core.runnables.config import run_in_executor
from pydantic import BaseModel, Field

from memory_chain.api.deps import CurrentUser, ServicesDep
from memory_chain.errors import VectorStoreUnavailableError
from memory_chain.schemas import ID_PATTERN

router = APIRouter(prefix="/v1", tags=["users"])


class Me(BaseModel):
    """Who the caller is to this server."""

    user_id: str
    keys_required: bool = Field(description="Whether the server asks every request for a key.")


class Fact(BaseModel):
    """A remembered fact: the user turn that asked for it."""

    conversation_id: str
    turn_number: int
    content: str
    timestamp: datetime


class FactsResponse(BaseModel):
    """The caller's facts, newest first."""

    facts: list[Fact]


@router.get("/me", response_model=Me)
async def me(services: ServicesDep, user: CurrentUser) -> Me:
    """The user this request acts as (checks the key, as every endpoint does)."""
    return Me(user_id=user, keys_required=services.settings.keys_required)


@router.get("/facts", response_model=FactsResponse, responses={503: {"description": "Tier 3 off."}})
async def list_facts(
    services: ServicesDep,
    user: CurrentUser,
    conversation_id: Annotated[
        str | None,
        Query(
            pattern=f"^{ID_PATTERN.pattern}$",
            description="Only this conversation's facts (1-128 letters, digits and '._:@-').",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="Most facts returned.")] = 100,
) -> FactsResponse:
    """The caller's remembered facts, newest first."""
    vectors = services.vectors
    facts = vectors.facts if vectors is not None else None
    if facts is None:
        raise VectorStoreUnavailableError(
            "semantic memory is off on this server, so no facts are kept: set "
            "MEMORY_CHAIN_MEMORY_TIER3_ENABLED=true"
        )
    found = await run_in_executor(
        None, lambda: facts.of_user(user, conversation_id=conversation_id, limit=limit)
    )
    return FactsResponse(
        facts=[
            Fact(
                conversation_id=fact.conversation_id,
                turn_number=fact.turn_number,
                content=fact.content,
                timestamp=fact.timestamp,
            )
            for fact in found
        ]
    )
