"""Request and response bodies of the memory API's own routes (conversations, the caller's data).

Responses are validated straight from the stored objects (``from_attributes``): a route
returns ``TurnOut.model_validate(turn)`` or passes the stored turns, summaries and
conversations as field values, and pydantic reads their attributes. Nested stored objects
(a turn's token counts, a page's turns) are read the same way. The OpenAI-compatible bodies
are in :mod:`memory_chain.api.openai_bodies`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memory_chain.facts.rules import FactAction
from memory_chain.schemas import Role, as_utc
from memory_chain.storable import StorableText

#: Most turns one request may add.
MAX_TURNS_PER_REQUEST = 100


class _FromStored(BaseModel):
    """A response body read from a stored object's attributes."""

    model_config = ConfigDict(from_attributes=True)


# -- conversations --------------------------------------------------------------------------


class TokensOut(_FromStored):
    """Token counts of a turn."""

    prompt: int | None = None
    completion: int | None = None
    total: int


class TurnOut(_FromStored):
    """One stored turn."""

    turn_number: int
    role: str
    content: str
    timestamp: datetime
    tokens: TokensOut | None = None


class SummaryOut(_FromStored):
    """The summary of a turn range."""

    turn_range_start: int
    turn_range_end: int
    summary_text: str
    created_at: datetime
    token_count: int | None = None


class ConversationOut(_FromStored):
    """A conversation's row."""

    conversation_id: str
    created_at: datetime
    last_message_at: datetime | None
    turn_count: int
    total_tokens: int
    summary: str | None
    status: str
    title: str | None = Field(
        default=None,
        description="The title the chat had where it was imported from (memory-chain import).",
    )


class ConversationDetail(ConversationOut):
    """A conversation with its range summaries and recent turns (tier 1)."""

    summaries: list[SummaryOut]
    recent_turns: list[TurnOut]


class TurnsPage(_FromStored):
    """A page of turns; ask for the next one with ``after=next_after``."""

    turns: list[TurnOut]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null at the end."
    )


class TurnIn(BaseModel):
    """A turn to add."""

    role: Role
    content: StorableText = Field(
        description="The message text; an empty message is left out (counted in "
        "skipped_empty), the others are stored."
    )
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


class TurnsAdded(_FromStored):
    """The stored turns, with the numbers tier 2 gave them."""

    conversation_id: str
    turns: list[TurnOut]
    skipped_empty: int = Field(
        default=0, description="Messages left out because they had no text (not stored)."
    )


class SearchRequest(BaseModel):
    """A search within a conversation."""

    query: str = Field(min_length=1, max_length=2_000)
    k: int = Field(default=5, ge=1, le=50)


class SearchHit(_FromStored):
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


class SearchResponse(_FromStored):
    """Search results, best first, and the tiers that could not answer."""

    results: list[SearchHit]
    degraded: list[str]


class DeleteResponse(BaseModel):
    """What a delete did."""

    conversation_id: str
    action: Literal["archived", "purged"]


class ConsolidateResponse(_FromStored):
    """The summary a consolidation stored (null when there was nothing new)."""

    summary: SummaryOut | None


class EndResponse(BaseModel):
    """An end-of-conversation consolidation was scheduled."""

    conversation_id: str
    scheduled: bool


# -- the caller's own data ------------------------------------------------------------------


class Me(BaseModel):
    """Who the caller is to this server."""

    user_id: str
    keys_required: bool = Field(description="Whether the server asks every request for a key.")


class MemoryStatusOut(_FromStored):
    """What the caller has stored, and how far the background work on it has come.

    The same figures as ``memory-chain status`` (:mod:`memory_chain.tiers.sql.status`).
    """

    user_id: str
    conversations: int = Field(description="Conversations stored (deleted ones left out).")
    turns: int = Field(description="Turns of those conversations.")
    turns_consolidated: int = Field(
        description="Turns a summary covers (the memory browser's 'N of M consolidated')."
    )
    turns_to_consolidate: int = Field(
        description="Turns of active conversations no summary covers yet (consolidated in "
        "the background; their facts are not learnt yet)."
    )
    conversations_to_consolidate: int = Field(description="Active conversations with such turns.")
    turns_to_embed: int | None = Field(
        description="Turns not yet searchable by meaning (queued for tier 3; found by keyword "
        "meanwhile); null when tier 3 is off."
    )
    facts: int = Field(description="Current facts about the caller.")
    facts_learnt: int = Field(description="Of those, the ones learnt by consolidation.")
    last_summary_at: datetime | None = Field(
        description="Date of the newest summary (dated by the last turn it covers)."
    )


FactKindName = Literal["preference", "biography", "relationship", "plan", "other"]


class Fact(_FromStored):
    """Something memory knows about the caller, with where it came from and when it held."""

    id: str = Field(description="The fact's id (32 hexadecimal digits).")
    text: str
    kind: FactKindName
    origin: Literal["extracted", "explicit", "api"] = Field(
        description="Learnt from conversation, asked to be remembered, or added by hand."
    )
    status: Literal["current", "superseded", "dismissed"]
    subject: str | None = Field(default=None, description="What the fact is about, if known.")
    conversation_id: str | None = Field(
        default=None, description="The conversation it came from, if any."
    )
    turns: tuple[int, int] | None = Field(
        default=None, description="The first and last turn it came from, if any."
    )
    confidence: float | None = None
    created_at: datetime
    valid_from: datetime
    invalidated_at: datetime | None = Field(
        default=None, description="When it stopped holding (superseded or dismissed)."
    )
    superseded_by: str | None = Field(
        default=None, description="The id of the fact that replaced it."
    )
    key: str | None = Field(
        default=None,
        description="The key a LangGraph store (MemoryStore) put it under, if any: any "
        "string, the caller's own; the id is what these routes take.",
    )


class FactsResponse(_FromStored):
    """The caller's facts, newest first."""

    facts: list[Fact]


class FactIn(BaseModel):
    """A fact to add by hand (``POST /v1/facts``)."""

    model_config = ConfigDict(extra="forbid")

    text: StorableText = Field(
        min_length=1, max_length=2000, description="The fact, a sentence or two."
    )
    kind: FactKindName = "other"
    subject: StorableText | None = Field(
        default=None,
        max_length=200,
        description="What it is about ('home city'): a newer fact about the same subject "
        "supersedes a related older one (not for subjects of which several may hold, such "
        "as a hobby or a pet).",
    )


class FactPatch(BaseModel):
    """A change to a current fact (``PATCH /v1/facts/{id}``): its text, its kind, or both."""

    model_config = ConfigDict(extra="forbid")

    text: StorableText | None = Field(default=None, min_length=1, max_length=2000)
    kind: FactKindName | None = None


class FactAdded(_FromStored):
    """What adding a fact did."""

    action: FactAction = Field(
        description="What the fact did (one meaning each): 'added'; 'superseded' (added, and "
        "'replaced', an older value of its subject, no longer holds); 'same' (the caller had "
        "it already: nothing changed, answered 200); 'filled' (the caller had it already and "
        "it took the subject or kind it lacked, answered 200; if that shows it and another "
        "fact are two values of one subject, the later stays and the other is retired: "
        "'replaced', or this fact itself)."
    )
    fact: Fact
    replaced: Fact | None = None


# -- the context preview ---------------------------------------------------------------------


class ContextRequest(BaseModel):
    """A message to preview the memory context of (nothing is stored, no model is called)."""

    message: str = Field(min_length=1, description="The message the user would send.")
    model: str | None = Field(default=None, description="A model of GET /v1/models.")
    system: str | None = Field(default=None, description="The client's instructions, if any.")
    max_tokens: int | None = Field(default=None, ge=1, description="The reply's room.")


class EntryOut(_FromStored):
    """One thing a section of the prompt holds."""

    kind: str
    text: str
    tokens: int
    conversation_id: str | None = None
    turn_number: int | None = None
    role: str | None = None
    cut: bool = Field(description="An excerpt of a longer text.")


class SectionOut(_FromStored):
    """A part of the prompt: what it holds, its tokens, and the tokens it could have had."""

    name: str
    room: int
    tokens: int
    entries: list[EntryOut]


class BudgetOut(_FromStored):
    """The model's window and the reply's room."""

    window: int
    reserve: int
    prompt: int


class ContextPreview(BaseModel):
    """What the model would see for a message: the prompt, part by part, within the budget."""

    model: str
    budget: BudgetOut
    prompt_tokens: int = Field(description="The prompt's tokens as counted (<= budget.prompt).")
    counted_with: Literal["tokenizer", "estimate"] = Field(
        description="The model's own tokenizer, or an estimate that counts high."
    )
    sections: list[SectionOut]
    messages: list[dict[str, str]] = Field(description="The messages, as the model gets them.")
    degraded: list[str]
