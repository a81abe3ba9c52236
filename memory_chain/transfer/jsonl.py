"""Export to and import from JSON Lines files (``memory-chain export`` / ``import``).

The line format is in :mod:`memory_chain.transfer.format`; the store-level reads and writes
in :mod:`memory_chain.tiers.sql.transfer`. An import reads and checks the whole file before
writing anything, then writes one transaction per conversation.

Example:
    >>> import io
    >>> from memory_chain.tiers.sql import create_sql_engine
    >>> from memory_chain.transfer import export_jsonl
    >>> out = io.StringIO()
    >>> export_jsonl(create_sql_engine("sqlite:////tmp/mc.db"), out)  # doctest: +SKIP
    TransferReport(conversations=3, turns=42, summaries=4, skipped=0)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

from sqlalchemy import Engine

from memory_chain.errors import ConversationNotFoundError, InvalidInputError, MemoryChainError
from memory_chain.schemas import utcnow
from memory_chain.tiers.sql.store import SQLStore
from memory_chain.tiers.sql.transfer import (
    ConversationExistsError,
    ConversationRecord,
    OnConflict,
    check_record,
    count_conversations,
    existing_conversations,
    read_conversations,
    write_conversation,
)
from memory_chain.transfer.format import record_from_json, record_to_json

#: Called with (conversations done, conversations in total).
Progress = Callable[[int, int], None]


class ImportFileError(InvalidInputError):
    """A line of an import file cannot be imported.

    Attributes:
        line: The 1-based line number.
    """

    def __init__(self, line: int, detail: str) -> None:
        super().__init__(f"line {line}: {detail}")
        self.line = line


@dataclass(frozen=True, slots=True)
class TransferReport:
    """What an export or import did.

    Attributes:
        conversations: Conversations written.
        turns: Their turns.
        summaries: Their range summaries.
        skipped: Conversations left out because their id was taken (import only).
    """

    conversations: int = 0
    turns: int = 0
    summaries: int = 0
    skipped: int = 0


def export_jsonl(
    engine: Engine,
    out: IO[str],
    *,
    user_id: str | None = None,
    conversation_id: str | None = None,
    progress: Progress | None = None,
) -> TransferReport:
    """Write conversations to ``out``, one JSON object per line, oldest conversation first.

    Args:
        engine: The tier-2 engine (the schema must exist).
        out: A text stream (UTF-8 for files).
        user_id: Only this user's conversations.
        conversation_id: Only this conversation.
        progress: Called after each conversation with (done, total).

    Returns:
        How many conversations, turns and summaries were written.

    Raises:
        ConversationNotFoundError: If ``conversation_id`` is given and not stored (for the
            user); nothing is written.
        StorageError: If the database fails (``SchemaNotReadyError`` without a schema).
    """
    total = count_conversations(engine, user_id=user_id, conversation_id=conversation_id)
    if conversation_id is not None and total == 0:
        raise ConversationNotFoundError(conversation_id)
    done = turn_total = summary_total = 0
    if progress is not None:
        progress(0, total)
    for record in read_conversations(engine, user_id=user_id, conversation_id=conversation_id):
        out.write(export_line(record))
        done += 1
        turn_total += len(record.turns)
        summary_total += len(record.summaries)
        if progress is not None:
            progress(done, max(total, done))
    return TransferReport(done, turn_total, summary_total)


def export_line(record: ConversationRecord) -> str:
    """One conversation as a line of the export format, with its newline."""
    return json.dumps(record_to_json(record), ensure_ascii=False, separators=(",", ":")) + "\n"


def export_lines(engine: Engine, *, user_id: str) -> Iterator[str]:
    """A user's conversations as export lines, one conversation read at a time.

    What ``GET /v1/users/me/export`` streams: the same lines as :func:`export_jsonl`.
    """
    for record in read_conversations(engine, user_id=user_id):
        yield export_line(record)


@contextmanager
def atomic_text_file(path: Path) -> Iterator[IO[str]]:
    """A UTF-8 file written under a temporary name, renamed to ``path`` when complete.

    On an error the temporary file is removed and ``path`` is left as it was. The file is
    created readable by its owner only (it holds people's conversations).

    Args:
        path: The file to write.

    Yields:
        The open text stream.
    """
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_jsonl(
    path: Path, *, max_chars: int, now: datetime | None = None
) -> Iterator[tuple[int, ConversationRecord]]:
    """Read and check every conversation of a file, with its line number.

    Blank lines are skipped.

    Args:
        path: The file.
        max_chars: Longest accepted turn content.
        now: The time given to timestamps the file leaves out.

    Yields:
        (line number, conversation), each checked with :func:`check_record`.

    Raises:
        ImportFileError: On the first line that is not valid UTF-8, not JSON, not a
            conversation of a known format version, or that breaks the store's rules.
    """
    now = now or utcnow()
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                text = raw.decode("utf-8").removeprefix("\ufeff")
            except UnicodeDecodeError as exc:
                raise ImportFileError(
                    number, f"not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8"
                ) from None
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ImportFileError(
                    number,
                    f"not valid JSON ({exc.msg} at column {exc.colno}): each line must be one "
                    "JSON object, as `memory-chain export` writes",
                ) from None
            try:
                record = record_from_json(value, now=now)
                check_record(record, max_chars=max_chars)
            except InvalidInputError as exc:
                cid = value.get("conversation_id") if isinstance(value, dict) else None
                about = f"conversation {cid!r}: " if isinstance(cid, str) else ""
                raise ImportFileError(number, f"{about}{exc}") from None
            yield number, record


def import_jsonl(
    store: SQLStore,
    path: Path,
    *,
    max_chars: int,
    on_conflict: OnConflict = "fail",
    progress: Progress | None = None,
) -> TransferReport:
    """Import a file written by :func:`export_jsonl` (or by hand, see the module docstring).

    The whole file is read and checked first: a malformed line, a conversation id that
    comes twice, or (with ``on_conflict="fail"``) one that is already stored stops the import
    before anything is written. Then each conversation is written in its own transaction,
    with its turn numbers, timestamps, counters, status and summaries; its turns are queued
    for tier 3 when the store queues embeddings (drain the indexer afterwards).

    Args:
        store: The tier-2 store to import into.
        path: The JSON Lines file.
        max_chars: Longest accepted turn content (``max_message_chars``).
        on_conflict: ``"fail"``: refuse the import if a conversation id is taken;
            ``"skip"``: keep the stored conversation and leave the line out.
        progress: Called after each conversation with (done, total).

    Returns:
        What was imported and skipped.

    Raises:
        ImportFileError: If a line cannot be imported; the message names the line, what to
            fix, and whether earlier lines were imported.
        StorageError: If the database fails.
    """
    now = utcnow()
    lines: dict[tuple[str, str], int] = {}
    for number, record in read_jsonl(path, max_chars=max_chars, now=now):
        owned = (record.info.user_id or "", record.info.conversation_id)
        if owned in lines:
            raise ImportFileError(
                number,
                f"conversation {owned[1]!r} of user {owned[0]!r} comes twice (first on line "
                f"{lines[owned]}): keep one; nothing was imported",
            )
        lines[owned] = number
    if on_conflict == "fail":
        taken = existing_conversations(store.engine, lines)
        if taken:
            first = min(taken, key=lines.__getitem__)
            raise ImportFileError(
                lines[first], f"{ConversationExistsError(first[1])}; nothing was imported"
            )
    report = TransferReport()
    total = len(lines)
    if progress is not None:
        progress(0, total)
    for number, record in read_jsonl(path, max_chars=max_chars, now=now):
        try:
            written = write_conversation(
                store, record, max_chars=max_chars, on_conflict=on_conflict
            )
        except MemoryChainError as exc:
            raise ImportFileError(
                number,
                f"{exc} (the {report.conversations} conversations before this line were "
                "imported; this one was not)",
            ) from exc
        report = TransferReport(
            conversations=report.conversations + written,
            turns=report.turns + (len(record.turns) if written else 0),
            summaries=report.summaries + (len(record.summaries) if written else 0),
            skipped=report.skipped + (not written),
        )
        if progress is not None:
            progress(report.conversations + report.skipped, total)
    return report


__all__ = [
    "ImportFileError",
    "Progress",
    "TransferReport",
    "atomic_text_file",
    "export_jsonl",
    "export_line",
    "export_lines",
    "import_jsonl",
    "read_jsonl",
]
