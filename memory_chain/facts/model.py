"""What a fact is: its text, its kind, where it came from, and when it held.

A fact is something memory knows about a user ("my daughter Mia turns 7 in May", "prefers
window seats"). It is *current* until a newer fact supersedes it (a moved city, a
correction) or the user dismisses it; either way it is kept, with the moment it stopped
holding, so the history can be shown and exported.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

FactKind = Literal["preference", "biography", "relationship", "plan", "other"]
FactOrigin = Literal["extracted", "explicit", "api"]
FactStatus = Literal["current", "superseded", "dismissed"]

KINDS: tuple[str, ...] = get_args(FactKind)
ORIGINS: tuple[str, ...] = get_args(FactOrigin)
STATUSES: tuple[str, ...] = get_args(FactStatus)

#: The longest fact text accepted (a fact is a sentence or two, not a document).
MAX_FACT_CHARS = 2000
#: A fact's id: 32 lowercase hexadecimal digits (a UUID's ``hex``).
FACT_ID = re.compile(r"[0-9a-f]{32}")
#: The longest store key accepted (LangGraph's keys are free strings; uuid4's take 36).
MAX_KEY_CHARS = 512
#: The most current facts a user has by default (``memory_max_facts_per_user``): twice the
#: 1,000-fact profile the chat benchmark measures. A chat turn's cost does not grow with it
#: (each process keeps a user's vectors in memory: 1.5 KB a fact with a 384-d model, 3 MB
#: at the limit), but a cold read of them, and every fact that a "forget ..." request or a
#: store search with a filter reads, does; and a prompt shows a few dozen facts of them all.
MAX_FACTS_PER_USER = 2_000

#: The namespace of :func:`keyed_id`'s UUIDs.
_KEYED = uuid.UUID("6f6a9d2e-4b1c-5e8f-9a3d-2c7b1e0f4d58")


def keyed_id(user_id: str, key: str) -> str:
    """The id of a fact stored under the key ``key`` before keys had their own column.

    Until migration 0013 a store key was the fact's id; such a fact (in the database, or in
    an older export file) gets this id, the same every time for a user and key.
    """
    return uuid.uuid5(_KEYED, f"{user_id}\x00{key}").hex


@dataclass(frozen=True, slots=True)
class FactDraft:
    """A fact to add.

    Attributes:
        text: The fact, as a sentence about the user.
        kind: What sort of fact it is.
        origin: ``"extracted"`` (learnt from conversation), ``"explicit"`` (the user asked
            memory to remember it), ``"api"`` (added or edited by hand).
        subject: What the fact is about ("home city", "wife's name"): a newer fact about the
            same subject supersedes the older one. ``None`` when unknown.
        conversation_id: The conversation it came from, if any.
        turns: The first and last turn it came from, if any.
        confidence: How sure the extractor was (0-1), if it said.
        valid_from: When it started to hold (default: now).
    """

    text: str
    kind: FactKind = "other"
    origin: FactOrigin = "api"
    subject: str | None = None
    conversation_id: str | None = None
    turns: tuple[int, int] | None = None
    confidence: float | None = None
    valid_from: datetime | None = None


@dataclass(frozen=True, slots=True)
class FactSource:
    """A conversation a fact was said in.

    Attributes:
        conversation_id: The conversation (the client's id).
        turns: The first and last turn of it that said the fact, if known.
        said_at: When it was first said there.
    """

    conversation_id: str
    turns: tuple[int, int] | None
    said_at: datetime


@dataclass(frozen=True, slots=True)
class Fact:
    """A stored fact.

    Attributes:
        id: Its id (32 hexadecimal digits).
        user_id: Whose fact it is.
        text: The fact.
        kind: What sort of fact it is.
        origin: How it came (see :class:`FactDraft`).
        status: ``"current"``, ``"superseded"`` or ``"dismissed"``.
        created_at: When it was stored.
        valid_from: When it started to hold.
        subject: What it is about, if known.
        conversation_id: The conversation it came from, if any.
        turns: The first and last turn it came from, if any.
        confidence: The extractor's confidence, if given.
        invalidated_at: When it stopped holding (superseded or dismissed).
        superseded_by: The fact that replaced it.
        key: The key a LangGraph store put it under (``MemoryStore``), if any: a key names
            one current fact of its user at most; a newer value that supersedes a keyed fact
            takes its key (so that the key answers what holds now), the past one keeps it.
        sources: Every conversation it was said in, first said first, when they were read
            (an export reads them; other reads leave them empty). ``conversation_id`` and
            ``turns`` are the first of them memory learnt it from (``None`` for a fact added
            outside any conversation, by hand or through the store: a source no purge
            removes); a fact learnt in conversations is deleted when the last of its
            sources is purged.
    """

    id: str
    user_id: str
    text: str
    kind: FactKind
    origin: FactOrigin
    status: FactStatus
    created_at: datetime
    valid_from: datetime
    subject: str | None = None
    conversation_id: str | None = None
    turns: tuple[int, int] | None = None
    confidence: float | None = None
    invalidated_at: datetime | None = None
    superseded_by: str | None = None
    key: str | None = None
    sources: tuple[FactSource, ...] = ()

    @property
    def current(self) -> bool:
        """Whether the fact holds now."""
        return self.status == "current"


def said_at(fact: Fact) -> datetime:
    """When a fact stored with a conversation was said there, as its own fields tell.

    The earlier of ``valid_from`` (the turn's time for a saved or learnt fact) and
    ``created_at`` (``valid_from`` of an edited fact is the edit's time).
    """
    return min(fact.valid_from, fact.created_at)


def own_source(fact: Fact) -> FactSource | None:
    """The source a fact's own fields name (``conversation_id`` and ``turns``), if any."""
    if fact.conversation_id is None:
        return None
    return FactSource(fact.conversation_id, fact.turns, said_at(fact))


def sources_of(fact: Fact) -> tuple[FactSource, ...]:
    """A fact's sources: those read with it, else the one its own fields name."""
    if fact.sources:
        return fact.sources
    own = own_source(fact)
    return (own,) if own is not None else ()


def fact_json(
    fact: Fact, timestamp: Callable[[datetime], str] = datetime.isoformat
) -> dict[str, Any]:
    """Every field of a fact as JSON values, in one order (the export file's, the stores').

    ``sources`` lists the sources read with the fact (empty when none were read).

    Args:
        fact: The fact.
        timestamp: Writes a time (default ISO 8601, as stored).
    """
    return {
        "id": fact.id,
        "user_id": fact.user_id,
        "text": fact.text,
        "kind": fact.kind,
        "origin": fact.origin,
        "status": fact.status,
        "subject": fact.subject,
        "conversation_id": fact.conversation_id,
        "turns": list(fact.turns) if fact.turns is not None else None,
        "confidence": fact.confidence,
        "created_at": timestamp(fact.created_at),
        "valid_from": timestamp(fact.valid_from),
        "invalidated_at": timestamp(fact.invalidated_at) if fact.invalidated_at else None,
        "superseded_by": fact.superseded_by,
        "key": fact.key,
        "sources": [
            {
                "conversation_id": source.conversation_id,
                "turns": list(source.turns) if source.turns is not None else None,
                "said_at": timestamp(source.said_at),
            }
            for source in fact.sources
        ],
    }
