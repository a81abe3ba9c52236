"""Row conversions and driver-error mapping shared by the tier-2 modules.

:class:`ConversationRecord` is a whole conversation's rows, as
:mod:`memory_chain.tiers.sql.export` reads them and :mod:`memory_chain.tiers.sql.restore`
writes them back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from memory_chain.errors import (
    InvalidInputError,
    MemoryChainError,
    SchemaNotReadyError,
    StorageConflictError,
    StorageError,
)
from memory_chain.schemas import ConversationInfo, Summary, TokenUsage, Turn, as_utc

#: Values bound in one ``IN (...)`` list at most: far below SQLite's 32,766 variables (and
#: the 999 of SQLite before 3.32), and a statement PostgreSQL plans quickly.
IN_CHUNK = 500

T = TypeVar("T")


def in_chunks(items: Sequence[T], size: int | None = None) -> Iterator[list[T]]:
    """``items`` in lists of at most ``size`` (:data:`IN_CHUNK`): one ``IN`` list each."""
    size = size or IN_CHUNK
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


#: Joins the owner and the client's id in stored conversation ids. No user id contains it
#: (ids are letters, digits and ``._:@-``), so the owner is everything before the first one.
OWNER_SEPARATOR = "/"


def stored_id(user_id: str, conversation_id: str) -> str:
    """The id a conversation is stored under: its owner's, then the one clients use.

    Conversation ids are each user's own: two users may both have a conversation "notes"
    (an Open WebUI chat id, a name a client chose), and neither can learn from a write whether
    the other uses an id. Tier 2 keeps its single ``conversation_id`` column (and its
    foreign keys) by storing ``"<user_id>/<conversation_id>"`` in it; everything above tier 2
    sees the client's id.
    """
    return f"{user_id}{OWNER_SEPARATOR}{conversation_id}"


def client_id(stored: str) -> str:
    """The conversation id clients use, from a stored one (see :func:`stored_id`)."""
    _owner, separator, rest = stored.partition(OWNER_SEPARATOR)
    return rest if separator else stored


def conversation_scope(column: Any, user_id: str | None, conversation_id: str | None) -> list[Any]:
    """SQL conditions on a stored-id ``column`` for a user's, a conversation's or both's rows.

    A conversation id without a user (an operator's ``--conversation`` on the command line)
    matches that id of every user.
    """
    if conversation_id is not None and user_id is not None:
        return [column == stored_id(user_id, conversation_id)]
    conditions = []
    if conversation_id is not None:
        conditions.append(column.endswith(OWNER_SEPARATOR + conversation_id, autoescape=True))
    if user_id is not None:
        conditions.append(column.startswith(user_id + OWNER_SEPARATOR, autoescape=True))
    return conditions


def naive_utc(value: datetime) -> datetime:
    """UTC wall time without tzinfo: what the schema's ``TIMESTAMP`` columns hold."""
    return as_utc(value).replace(tzinfo=None)


def turn_from_row(row: Any) -> Turn:
    """A ``conversation_turns`` row as a :class:`Turn`."""
    tokens = None
    if row.tokens_total is not None:
        tokens = TokenUsage(
            total=row.tokens_total, prompt=row.tokens_prompt, completion=row.tokens_completion
        )
    return Turn(
        conversation_id=client_id(row.conversation_id),
        turn_number=row.turn_number,
        role=row.role,
        content=row.content,
        timestamp=as_utc(row.timestamp),
        tokens=tokens,
    )


def turn_values(stored: str, turn: Turn) -> dict[str, Any]:
    """The ``conversation_turns`` row of a turn of the conversation stored as ``stored``."""
    tokens = turn.tokens
    return {
        "conversation_id": stored,
        "turn_number": turn.turn_number,
        "role": turn.role,
        "content": turn.content,
        "timestamp": naive_utc(turn.timestamp),
        "tokens_prompt": tokens.prompt if tokens else None,
        "tokens_completion": tokens.completion if tokens else None,
        "tokens_total": tokens.total if tokens else None,
    }


def conversation_from_row(row: Any) -> ConversationInfo:
    """A ``conversations`` row as a :class:`ConversationInfo`."""
    return ConversationInfo(
        conversation_id=client_id(row.conversation_id),
        user_id=row.user_id,
        created_at=as_utc(row.created_at),
        last_message_at=as_utc(row.last_message_at) if row.last_message_at else None,
        turn_count=row.turn_count or 0,
        total_tokens=row.total_tokens or 0,
        summary=row.summary,
        status=row.status or "active",
    )


def summary_from_row(row: Any) -> Summary:
    """A ``conversation_summaries`` row as a :class:`Summary`."""
    return Summary(
        conversation_id=client_id(row.conversation_id),
        summary_text=row.summary_text,
        turn_range_start=row.turn_range_start,
        turn_range_end=row.turn_range_end,
        created_at=as_utc(row.created_at),
        token_count=row.token_count,
    )


@dataclass(frozen=True, slots=True)
class ConversationRecord:
    """One conversation as stored: its row, its turns (in order) and its range summaries.

    Attributes:
        info: The ``conversations`` row (counters, running summary, status).
        turns: Every turn, numbered ``1..info.turn_count``.
        summaries: Every range summary, in turn order.
    """

    info: ConversationInfo
    turns: list[Turn] = field(default_factory=list)
    summaries: list[Summary] = field(default_factory=list)


@contextmanager
def storage_errors() -> Iterator[None]:
    """Turn driver errors into memory_chain's errors (:func:`storage_error`)."""
    try:
        yield
    except (SQLAlchemyError, UnicodeEncodeError) as exc:
        mapped = storage_error(exc)
        if mapped is None:
            raise
        raise mapped from exc


def storage_error(exc: BaseException) -> MemoryChainError | None:
    """The memory_chain error a driver error stands for, saying what to do; ``None`` if none.

    * A value the database refuses (``DataError``: a NUL character, a number out of an
      ``INTEGER``'s range) or the driver cannot encode (an unpaired surrogate): the input
      is bad, :class:`~memory_chain.errors.InvalidInputError` (422 over HTTP). The doors
      check input first (:mod:`memory_chain.storable`); this is the net under them.
    * A unique or foreign key refused (``IntegrityError``): the write collided with what is
      stored, often a concurrent writer's row, :class:`StorageConflictError` (409).
    * A missing table: :class:`SchemaNotReadyError`.
    * Anything else the database or driver raises (server down, connection lost, lock
      timeout), and no connection free in the pool: :class:`StorageError` (503).
    """
    if isinstance(exc, DBAPIError):
        return _driver_error(exc)
    if isinstance(exc, UnicodeEncodeError):
        return InvalidInputError(
            f"a text of this request is not valid Unicode ({exc.reason} at position "
            f"{exc.start}): send UTF-8 text"
        )
    if isinstance(exc, PoolTimeoutError):
        return StorageError(
            "no tier-2 database connection was free in time (every pooled connection is busy): "
            "try again shortly"
        )
    return None


def _driver_error(exc: DBAPIError) -> MemoryChainError:
    message = _first_line(exc)
    if isinstance(exc, DataError):
        return InvalidInputError(
            f"the database refused a value of this request ({message}): check text for NUL "
            "characters and numbers for their range"
        )
    if isinstance(exc, IntegrityError):
        return StorageConflictError(
            f"the write collided with a stored row ({message}); nothing was stored: send it "
            "again (a concurrent request may have stored it first)"
        )
    if "no such table" in message or "does not exist" in message:
        return SchemaNotReadyError(message)
    return StorageError(f"tier-2 database error: {message}")


def _first_line(exc: DBAPIError) -> str:
    """The driver's own message, its first line (the next ones repeat the statement)."""
    lines = str(exc.orig).strip().splitlines()
    return lines[0] if lines else type(exc.orig).__name__
