"""The JSON Lines format of ``memory-chain export`` / ``import``: conversations, facts, items.

One JSON object per line, UTF-8: a conversation, one fact a user's memory holds, or one item
an agent kept in the user's ``MemoryStore`` namespaces. Every object says what it is
(``"format": "memory-chain/conversation"``, ``"memory-chain/fact"`` or
``"memory-chain/store-item"``) and in which version (``"version": 3``), so files can be
concatenated, and a reader refuses versions it does not know. A conversation line, in
version 3 as in versions 1 and 2::

    {"format": "memory-chain/conversation", "version": 3,
     "conversation_id": "trip", "user_id": "ana", "status": "active",
     "created_at": "2026-05-01T09:00:00.000000Z", "last_message_at": "2026-05-01T09:05:00.000000Z",
     "turn_count": 2, "total_tokens": 140, "summary": "Ana plans a trip to Lisbon.",
     "turns": [{"turn_number": 1, "role": "user", "content": "...",
                "timestamp": "2026-05-01T09:00:00.000000Z",
                "tokens": {"total": 5, "prompt": null, "completion": null}},
               ...],
     "summaries": [{"turn_range_start": 1, "turn_range_end": 2, "summary_text": "...",
                    "token_count": 12, "created_at": "2026-05-01T09:06:00.000000Z"}]}

A fact line (new in version 2, the same in version 3; every status, so superseded and
dismissed facts keep the history; no vector, it is computed again)::

    {"format": "memory-chain/fact", "version": 3, "id": "3f2b...e1", "user_id": "ana",
     "text": "My seat is 14C.", "kind": "other", "origin": "explicit", "status": "current",
     "subject": null, "conversation_id": "trip", "turns": [3, 3], "confidence": null,
     "created_at": "2026-05-01T09:02:00.000000Z", "valid_from": "2026-05-01T09:02:00.000000Z",
     "invalidated_at": null, "superseded_by": null}

A fact said in more than one conversation also has ``"sources"``: each conversation it was
said in, first said first, with the first and last turn that said it and when it was first
said there (``[{"conversation_id": "trip", "turns": [3, 3], "said_at": "..."}, ...]``); a
purge of one of them leaves the fact to the others. Without it (files written before, and
facts said in one conversation), the fact's ``conversation_id`` and ``turns`` are its one
source, said at the earlier of ``valid_from`` and ``created_at``.

A fact put under a LangGraph store key (``MemoryStore``) also has ``"key"``: the key, any
string of up to 512 characters (one current fact of a user per key). Files written before
keys had their own field held the key as the fact's ``id``: such an id (not 32 hexadecimal
digits; 1-128 letters, digits and ``._:@-``) is read as the key, and the fact gets the id
:func:`~memory_chain.facts.model.keyed_id` derives from its user and key (its history's
``superseded_by`` links follow), as migration 0013 gave the facts in the database.

A store-item line (new in version 3; :mod:`.items`): what an agent kept with
``MemoryStore.put`` in a namespace of the user's own, ``namespace`` being the labels below
the user id; ``index`` says whether a query searches it. Neither the text a query is
matched against nor its vector is in the file: the text is every string of the value again
(an item put with ``index=["field", ...]`` is matched against all its strings once
imported), the vector is computed at the item's first search with an embedding model::

    {"format": "memory-chain/store-item", "version": 3, "user_id": "ana",
     "namespace": ["notes"], "key": "diet", "value": {"text": "vegan, no nuts"},
     "index": true, "created_at": "2026-05-01T09:03:00.000000Z",
     "updated_at": "2026-05-02T18:00:00.000000Z"}

An export writes the conversations, then the facts, then the store items (by user,
namespace and key); an export of one conversation has no store items (they belong to a
user, not to a conversation).

Timestamps are ISO 8601 in UTC with microseconds (``Z``; other offsets are converted, naive
values are taken as UTC). ``tokens`` and ``token_count`` may be ``null``. An export holds
what tier 2 holds but what is computed again (vectors, a store item's searched text), so
export → import into an empty database → export gives the same bytes. For files written by
hand or by other tools, only ``format``, ``version``, ``conversation_id``, ``user_id``,
``turns`` and each turn's ``role`` and ``content`` are required of a conversation; the rest
default to what the store would have written (turn numbers 1..N, the import time, counters
computed from the turns, status ``active``, no summaries). Of a fact, ``format``,
``version``, ``id``, ``user_id`` and ``text`` are required; the rest default to kind
``other``, origin ``api``, status ``current``, the import time (``created_at``;
``valid_from``: ``created_at``) and ``null``. Of a store item, ``format``, ``version``,
``user_id``, ``namespace``, ``key`` and ``value`` are required; ``index`` defaults to
``true``, ``created_at`` to the import time and ``updated_at`` to ``created_at``. Unknown
fields are refused, so that a typo does not silently drop data.

Versions: a version names the kinds of line a file may hold, so that a reader accepting a
version reads every line of it. Version 2 added fact lines, version 3 store-item lines.
Store items could have been an additive kind of version 2, but a version-2 reader (which
checks ``format`` before ``version``) would refuse such a file at its first store-item line,
deep in the file, with "format is 'memory-chain/store-item' ...: is this a file written by
`memory-chain export`?", which blames the file. As version 3, every line of the file says
it: such a reader refuses the file at its first line, "format version 3 is not supported
...: upgrade memory-chain" (a file that starts with a store item gets the format message at
line 1). Either way an import refuses the file before writing anything, and never drops a
line it does not know. Conversation and fact lines are the same in every version that has
them; files of versions 1 (conversations only) and 2 (conversations and facts) are read as
they were, and written again as version 3.

Example:
    >>> from memory_chain.transfer.format import record_from_json
    >>> line = {"format": "memory-chain/conversation", "version": 1, "conversation_id": "c1",
    ...         "user_id": "ana", "turns": [{"role": "user", "content": "Hi"}]}
    >>> record = record_from_json(line)
    >>> record.info.turn_count, record.turns[0].turn_number
    (1, 1)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from memory_chain.errors import InvalidInputError
from memory_chain.schemas import (
    ROLES,
    ConversationInfo,
    Role,
    Summary,
    TokenUsage,
    Turn,
    utcnow,
)
from memory_chain.tiers.sql.rows import ConversationRecord
from memory_chain.transfer.fields import (
    check_fields,
    check_version,
    format_timestamp,
    read_int,
    read_list,
    read_object,
    read_str,
    read_time,
)

#: The ``format`` field of a conversation's line.
FORMAT = "memory-chain/conversation"
#: The ``format`` field of a fact's line.
FACT_FORMAT = "memory-chain/fact"
#: The ``format`` field of a store item's line.
STORE_ITEM_FORMAT = "memory-chain/store-item"
#: The version this package writes; :data:`READABLE_VERSIONS` are the ones it reads.
#: Version 2 added fact lines, version 3 store-item lines; the other lines did not change.
VERSION = 3
READABLE_VERSIONS = frozenset({1, 2, 3})
#: The versions that have fact lines.
FACT_VERSIONS = frozenset({2, 3})
#: The versions that have store-item lines.
STORE_ITEM_VERSIONS = frozenset({3})

_CONVERSATION_FIELDS = frozenset(
    {
        "format",
        "version",
        "conversation_id",
        "user_id",
        "status",
        "created_at",
        "last_message_at",
        "turn_count",
        "total_tokens",
        "summary",
        "turns",
        "summaries",
    }
)
_TURN_FIELDS = frozenset({"turn_number", "role", "content", "timestamp", "tokens"})
_TOKEN_FIELDS = frozenset({"total", "prompt", "completion"})
_SUMMARY_FIELDS = frozenset(
    {"turn_range_start", "turn_range_end", "summary_text", "token_count", "created_at"}
)


def _tokens_json(tokens: TokenUsage | None) -> dict[str, int | None] | None:
    if tokens is None:
        return None
    return {"total": tokens.total, "prompt": tokens.prompt, "completion": tokens.completion}


def record_to_json(record: ConversationRecord) -> dict[str, Any]:
    """A conversation as the JSON object of one line."""
    info = record.info
    return {
        "format": FORMAT,
        "version": VERSION,
        "conversation_id": info.conversation_id,
        "user_id": info.user_id,
        "status": info.status,
        "created_at": format_timestamp(info.created_at),
        "last_message_at": (
            format_timestamp(info.last_message_at) if info.last_message_at else None
        ),
        "turn_count": info.turn_count,
        "total_tokens": info.total_tokens,
        "summary": info.summary,
        "turns": [
            {
                "turn_number": turn.turn_number,
                "role": turn.role,
                "content": turn.content,
                "timestamp": format_timestamp(turn.timestamp),
                "tokens": _tokens_json(turn.tokens),
            }
            for turn in record.turns
        ],
        "summaries": [
            {
                "turn_range_start": summary.turn_range_start,
                "turn_range_end": summary.turn_range_end,
                "summary_text": summary.summary_text,
                "token_count": summary.token_count,
                "created_at": format_timestamp(summary.created_at),
            }
            for summary in record.summaries
        ],
    }


def _tokens(value: object, where: str) -> TokenUsage | None:
    if value is None:
        return None
    obj = read_object(value, where)
    check_fields(obj, _TOKEN_FIELDS, f"{where}: ")
    total = cast(int, read_int(obj.get("total"), f"{where}.total"))
    prompt = read_int(obj.get("prompt"), f"{where}.prompt", optional=True)
    completion = read_int(obj.get("completion"), f"{where}.completion", optional=True)
    return TokenUsage(total=total, prompt=prompt, completion=completion)


def _turn(value: object, index: int, cid: str, now: datetime) -> Turn:
    where = f"turns[{index}]"
    obj = read_object(value, where)
    check_fields(obj, _TURN_FIELDS, f"{where}: ")
    role = read_str(obj.get("role"), f"{where}.role")
    if role not in ROLES:
        raise InvalidInputError(f"{where}.role {role!r} is unknown: use one of {sorted(ROLES)}")
    number = obj.get("turn_number", index + 1)
    return Turn(
        conversation_id=cid,
        turn_number=cast(int, read_int(number, f"{where}.turn_number")),
        role=cast(Role, role),
        content=cast(str, read_str(obj.get("content"), f"{where}.content")),
        timestamp=read_time(obj.get("timestamp"), f"{where}.timestamp", now),
        tokens=_tokens(obj.get("tokens"), f"{where}.tokens"),
    )


def _summary(value: object, index: int, cid: str, now: datetime) -> Summary:
    where = f"summaries[{index}]"
    obj = read_object(value, where)
    check_fields(obj, _SUMMARY_FIELDS, f"{where}: ")
    return Summary(
        conversation_id=cid,
        summary_text=cast(str, read_str(obj.get("summary_text"), f"{where}.summary_text")),
        turn_range_start=cast(
            int, read_int(obj.get("turn_range_start"), f"{where}.turn_range_start")
        ),
        turn_range_end=cast(int, read_int(obj.get("turn_range_end"), f"{where}.turn_range_end")),
        created_at=read_time(obj.get("created_at"), f"{where}.created_at", now),
        token_count=read_int(obj.get("token_count"), f"{where}.token_count", optional=True),
    )


def _last_message_at(obj: dict[str, Any], last_turn: datetime | None) -> datetime | None:
    # Left out: the last turn's time, as the store would have set it. An explicit null stays.
    if "last_message_at" not in obj:
        return last_turn
    value = obj["last_message_at"]
    return None if value is None else read_time(value, "last_message_at", utcnow())


def record_from_json(value: object, *, now: datetime | None = None) -> ConversationRecord:
    """Read one conversation line's JSON object (see the module docstring for the format).

    Args:
        value: The parsed JSON value.
        now: The time given to timestamps the object leaves out (default: now).

    Returns:
        The conversation; :func:`check_record` checks it against the store's rules.

    Raises:
        InvalidInputError: If the object is not a conversation of a known format version,
            or a field has the wrong type; the message names the field.
    """
    now = now or utcnow()
    obj = read_object(value, "the line")
    if obj.get("format") != FORMAT:
        raise InvalidInputError(
            f"format is {obj.get('format')!r}, expected {FORMAT!r}: is this a file written by "
            "`memory-chain export`?"
        )
    check_version(obj, READABLE_VERSIONS, "conversations")
    check_fields(obj, _CONVERSATION_FIELDS, "")
    cid = read_str(obj.get("conversation_id"), "conversation_id") or ""
    turns = [_turn(t, i, cid, now) for i, t in enumerate(read_list(obj.get("turns"), "turns"))]
    raw_summaries = obj.get("summaries")
    summaries = (
        []
        if raw_summaries is None
        else [_summary(s, i, cid, now) for i, s in enumerate(read_list(raw_summaries, "summaries"))]
    )
    first = turns[0].timestamp if turns else now
    last = max((t.timestamp for t in turns), default=None)
    turn_count = obj.get("turn_count", len(turns))
    total_tokens = obj.get("total_tokens", sum(t.content_tokens for t in turns))
    info = ConversationInfo(
        conversation_id=cid,
        user_id=read_str(obj.get("user_id"), "user_id"),
        created_at=read_time(obj.get("created_at"), "created_at", first),
        last_message_at=_last_message_at(obj, last),
        turn_count=cast(int, read_int(turn_count, "turn_count")),
        total_tokens=cast(int, read_int(total_tokens, "total_tokens")),
        summary=read_str(obj.get("summary"), "summary", optional=True),
        status=read_str(obj.get("status", "active"), "status") or "",
    )
    return ConversationRecord(info, turns, summaries)


__all__ = [
    "FACT_FORMAT",
    "FACT_VERSIONS",
    "FORMAT",
    "READABLE_VERSIONS",
    "STORE_ITEM_FORMAT",
    "STORE_ITEM_VERSIONS",
    "VERSION",
    "format_timestamp",
    "record_from_json",
    "record_to_json",
]
