"""Whole conversations, users' facts and store items checked and written back into tier 2.

An import checks everything before it writes anything: :func:`check_record` checks a
conversation and :func:`check_fact` a fact against the store's rules, and
:func:`existing_conversations`, :func:`existing_facts` and :func:`existing_store_items` say
which of them are already stored. :func:`write_conversation` then writes one conversation, as
:func:`memory_chain.tiers.sql.export.read_conversations` read it, in one transaction, keeping
its turn numbers, timestamps, counters, status and summaries (:meth:`SQLStore.append_turns`
numbers turns itself, so it cannot be used to restore), and queues its turns for tier 3 when
the store does. A conversation is either written whole or not at all. Facts are written back
by :meth:`memory_chain.tiers.sql.facts.FactStore.restore` (ids, statuses and dates kept) after
:func:`check_fact`, store items by :meth:`memory_chain.tiers.sql.store_items.StoreItems.restore`.

Example:
    >>> from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
    >>> from memory_chain.tiers.sql.export import read_conversations
    >>> from memory_chain.tiers.sql.restore import write_conversation
    >>> source = create_sql_engine("sqlite:////tmp/mc-source.db")  # doctest: +SKIP
    >>> target = SQLStore(create_sql_engine("sqlite:////tmp/mc-target.db"))  # doctest: +SKIP
    >>> upgrade(target.engine)  # doctest: +SKIP
    >>> for record in read_conversations(source):  # doctest: +SKIP
    ...     write_conversation(target, record, max_chars=200_000)
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any, Literal

from sqlalchemy import Connection, Engine, insert, select, tuple_

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.facts.model import FACT_ID, ORIGINS, STATUSES, Fact
from memory_chain.schemas import NewTurn, Summary, validate_id, validate_new_turns, validate_status
from memory_chain.storable import check_text
from memory_chain.tiers.sql.fact_checks import checked_key, checked_kind, checked_text
from memory_chain.tiers.sql.models import conversations, facts, store_items, summaries, turns
from memory_chain.tiers.sql.outbox import enqueue_range
from memory_chain.tiers.sql.rows import (
    ConversationRecord,
    naive_utc,
    storage_errors,
    stored_id,
    turn_values,
)
from memory_chain.tiers.sql.store import SQLStore
from memory_chain.tiers.sql.store_items import encode_namespace

OnConflict = Literal["fail", "skip"]
#: A store item's address: (user id, namespace below the user, key).
ItemKey = tuple[str, tuple[str, ...], str]
#: Ids looked up per query.
_PAGE = 500


class ConversationExistsError(MemoryChainError):
    """A conversation being imported already exists in the database."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"conversation {conversation_id!r} already exists in the database: skip existing "
            "conversations (--on-conflict skip), or delete it first"
        )
        self.conversation_id = conversation_id


def check_record(record: ConversationRecord, *, max_chars: int) -> None:
    """Check that a record can be stored as it is, before anything is written.

    Args:
        record: The conversation.
        max_chars: Longest accepted turn content (the store's ``max_message_chars``).

    Raises:
        InvalidInputError: On an invalid id, status or turn; turns not numbered
            ``1..turn_count`` in order or belonging to another conversation; summaries whose
            range is outside the turns or starts twice; negative counters; NUL characters.
    """
    info = record.info
    cid = validate_id(info.conversation_id)
    validate_id(info.user_id, "user id")
    validate_status(info.status)
    if info.turn_count < 0 or info.total_tokens < 0:
        raise InvalidInputError("turn_count and total_tokens must not be negative")
    if info.summary is not None:
        check_text(info.summary, "the running summary")
    numbers = [turn.turn_number for turn in record.turns]
    if numbers != list(range(1, len(numbers) + 1)):
        raise InvalidInputError(
            "turns must be numbered 1, 2, 3, ... in order with no gap or repeat "
            f"(got {_shorten(numbers)})"
        )
    if info.turn_count != len(numbers):
        raise InvalidInputError(
            f"turn_count is {info.turn_count} but there are {len(numbers)} turns: make them agree"
        )
    if any(turn.conversation_id != cid for turn in record.turns):
        raise InvalidInputError(f"every turn must belong to conversation {cid!r}")
    if record.turns:
        validate_new_turns(
            [NewTurn(t.role, t.content, t.timestamp, t.tokens) for t in record.turns],
            max_chars=max_chars,
        )
    _check_summaries(cid, record.summaries, len(numbers))


def _check_summaries(cid: str, stored: list[Summary], turn_count: int) -> None:
    starts: set[int] = set()
    for index, summary in enumerate(stored):
        where = f"summary {index}"
        start, end = summary.turn_range_start, summary.turn_range_end
        if summary.conversation_id != cid:
            raise InvalidInputError(f"{where}: must belong to conversation {cid!r}")
        if not 1 <= start <= end <= turn_count:
            raise InvalidInputError(
                f"{where}: turn range {start}-{end} is not within the turns 1-{turn_count}"
            )
        if start in starts:
            raise InvalidInputError(f"{where}: a summary starting at turn {start} comes twice")
        starts.add(start)
        if not check_text(summary.summary_text, f"{where}: the summary text").strip():
            raise InvalidInputError(f"{where}: summary text is empty")
        if summary.token_count is not None and summary.token_count < 0:
            raise InvalidInputError(f"{where}: token_count must not be negative")


def _shorten(numbers: list[int]) -> str:
    return str(numbers) if len(numbers) <= 12 else f"{numbers[:12]}"[:-1] + ", ...]"


def existing_conversations(
    engine: Engine, conversations_of: Collection[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Which of these ``(user_id, conversation_id)`` are already stored."""
    found: set[tuple[str, str]] = set()
    keys = {
        stored_id(user, conversation): (user, conversation)
        for user, conversation in conversations_of
    }
    ids = list(keys)
    with storage_errors(), engine.connect() as conn:
        for start in range(0, len(ids), _PAGE):
            chunk = ids[start : start + _PAGE]
            found.update(
                keys[key]
                for key in conn.execute(
                    select(conversations.c.conversation_id).where(
                        conversations.c.conversation_id.in_(chunk)
                    )
                ).scalars()
            )
    return found


def check_fact(fact: Fact) -> None:
    """Check that an exported fact can be stored as it is, before anything is written.

    Args:
        fact: The fact, as read from a file.

    Raises:
        InvalidInputError: On an id that is not 32 hexadecimal digits; an invalid user or
            conversation id; an empty, too long or NUL-holding text, subject or key; an unknown
            kind, origin or status; a turn range that is not ``1 <= first <= last``; a
            confidence outside 0-1; or a status its dates and links contradict (a current
            fact with ``invalidated_at`` or ``superseded_by``, a past one without
            ``invalidated_at``, a superseded one without ``superseded_by``, a dismissed one
            with it).
    """
    if not FACT_ID.fullmatch(fact.id):
        raise InvalidInputError(
            f"fact id {fact.id[:40]!r} is not 32 lowercase hexadecimal digits: keep the id "
            "`memory-chain export` wrote (facts are matched by it)"
        )
    validate_id(fact.user_id, "user id")
    if fact.conversation_id is not None:
        validate_id(fact.conversation_id)
    checked_text(fact.text)
    if fact.subject is not None:
        check_text(fact.subject, "the fact's subject")
    if fact.key is not None:
        checked_key(fact.key)
    checked_kind(fact.kind)
    if fact.origin not in ORIGINS:
        raise InvalidInputError(
            f"unknown fact origin {fact.origin!r}: use one of {', '.join(ORIGINS)}"
        )
    if fact.status not in STATUSES:
        raise InvalidInputError(
            f"unknown fact status {fact.status!r}: use one of {', '.join(STATUSES)}"
        )
    if fact.turns is not None and not 1 <= fact.turns[0] <= fact.turns[1]:
        raise InvalidInputError(
            f"turns {list(fact.turns)} must be [first, last] with 1 <= first <= last, or null"
        )
    if fact.confidence is not None and not (
        math.isfinite(fact.confidence) and 0 <= fact.confidence <= 1
    ):
        raise InvalidInputError(f"confidence {fact.confidence!r} must be between 0 and 1, or null")
    _check_fact_history(fact)


def _check_fact_history(fact: Fact) -> None:
    if fact.superseded_by is not None and not FACT_ID.fullmatch(fact.superseded_by):
        raise InvalidInputError(
            f"superseded_by {fact.superseded_by[:40]!r} is not a fact id (32 lowercase "
            "hexadecimal digits)"
        )
    if fact.superseded_by == fact.id:
        raise InvalidInputError("superseded_by names the fact itself: name the fact replacing it")
    if fact.status == "current":
        if fact.invalidated_at is not None or fact.superseded_by is not None:
            raise InvalidInputError(
                "a current fact has no invalidated_at and no superseded_by: set them to null, "
                "or give the status 'superseded' or 'dismissed'"
            )
        return
    if fact.invalidated_at is None:
        raise InvalidInputError(
            f"a {fact.status} fact needs invalidated_at, when it stopped holding"
        )
    if fact.status == "superseded" and fact.superseded_by is None:
        raise InvalidInputError("a superseded fact needs superseded_by, the id of its replacement")
    if fact.status == "dismissed" and fact.superseded_by is not None:
        raise InvalidInputError(
            "a dismissed fact has no superseded_by: set it to null, or give the status 'superseded'"
        )


def existing_facts(engine: Engine, fact_ids: Collection[str]) -> dict[str, str]:
    """Which of these fact ids are already stored, with the user each belongs to."""
    found: dict[str, str] = {}
    ids = list(fact_ids)
    with storage_errors(), engine.connect() as conn:
        for start in range(0, len(ids), _PAGE):
            chunk = ids[start : start + _PAGE]
            found.update(
                (row.id, row.user_id)
                for row in conn.execute(
                    select(facts.c.id, facts.c.user_id).where(facts.c.id.in_(chunk))
                )
            )
    return found


def keys_in_use(engine: Engine, keys: Collection[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Which of these ``(user_id, store key)`` name a current fact, with that fact's id."""
    wanted = list(keys)
    columns = tuple_(facts.c.user_id, facts.c.store_key)
    found: dict[tuple[str, str], str] = {}
    with storage_errors(), engine.connect() as conn:
        for start in range(0, len(wanted), _PAGE):
            rows = conn.execute(
                select(facts.c.user_id, facts.c.store_key, facts.c.id).where(
                    facts.c.status == "current", columns.in_(wanted[start : start + _PAGE])
                )
            )
            found.update(((row.user_id, row.store_key), row.id) for row in rows)
    return found


def existing_store_items(engine: Engine, keys: Collection[ItemKey]) -> set[ItemKey]:
    """Which of these store items (user id, namespace, key) are already stored."""
    stored = {
        (user, encode_namespace(namespace), key): (user, namespace, key)
        for user, namespace, key in keys
    }
    wanted = list(stored)
    columns = tuple_(store_items.c.user_id, store_items.c.namespace, store_items.c.key)
    found: set[ItemKey] = set()
    with storage_errors(), engine.connect() as conn:
        for start in range(0, len(wanted), _PAGE):
            chunk = wanted[start : start + _PAGE]
            rows = conn.execute(
                select(store_items.c.user_id, store_items.c.namespace, store_items.c.key).where(
                    columns.in_(chunk)
                )
            )
            found.update(stored[(row.user_id, row.namespace, row.key)] for row in rows)
    return found


def write_conversation(
    store: SQLStore,
    record: ConversationRecord,
    *,
    max_chars: int,
    on_conflict: OnConflict = "fail",
) -> bool:
    """Store a whole conversation exactly as given, in one transaction.

    Args:
        store: The tier-2 store; its turns are queued for tier 3 when it queues embeddings.
        record: The conversation, its turns and summaries.
        max_chars: Longest accepted turn content.
        on_conflict: What to do when the conversation id is taken: ``"fail"`` raises,
            ``"skip"`` leaves the stored one untouched and returns ``False``.

    Returns:
        Whether the conversation was written.

    Raises:
        InvalidInputError: If the record is malformed (see :func:`check_record`); nothing
            is written.
        ConversationExistsError: If the id is taken and ``on_conflict`` is ``"fail"``.
        StorageError: If the database fails; nothing of this conversation is written.
    """
    if on_conflict not in ("fail", "skip"):
        raise ValueError(f"unknown on_conflict {on_conflict!r}: use 'fail' or 'skip'")
    check_record(record, max_chars=max_chars)
    info = record.info
    key = stored_id(info.user_id or "", info.conversation_id)
    create = (
        store.database.insert(conversations)
        .values(
            conversation_id=key,
            user_id=info.user_id,
            created_at=naive_utc(info.created_at),
            last_message_at=naive_utc(info.last_message_at) if info.last_message_at else None,
            turn_count=info.turn_count,
            total_tokens=info.total_tokens,
            summary=info.summary,
            status=info.status,
        )
        .on_conflict_do_nothing(index_elements=["conversation_id"])
        .returning(conversations.c.id)
    )

    def work(conn: Connection) -> bool:
        if conn.execute(create).first() is None:
            if on_conflict == "skip":
                return False
            raise ConversationExistsError(info.conversation_id)
        if record.turns:
            conn.execute(insert(turns), [turn_values(key, turn) for turn in record.turns])
            if store.queue_embeddings:
                enqueue_range(conn, key, 1, len(record.turns))
        if record.summaries:
            conn.execute(insert(summaries), [_summary_values(key, s) for s in record.summaries])
        return True

    return store.database.write(work)


def _summary_values(key: str, summary: Summary) -> dict[str, Any]:
    return {
        "conversation_id": key,
        "summary_text": summary.summary_text,
        "turn_range_start": summary.turn_range_start,
        "turn_range_end": summary.turn_range_end,
        "created_at": naive_utc(summary.created_at),
        "token_count": summary.token_count,
    }


__all__ = [
    "FACT_ID",
    "ConversationExistsError",
    "ItemKey",
    "OnConflict",
    "check_fact",
    "check_record",
    "existing_conversations",
    "existing_facts",
    "existing_store_items",
    "keys_in_use",
    "write_conversation",
]
