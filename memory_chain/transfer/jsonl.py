"""Export to and import from JSON Lines files (``memory-chain export`` / ``import``).

The line format is in :mod:`memory_chain.transfer.format`; the store-level reads and writes
in :mod:`memory_chain.tiers.sql.transfer`. An export writes the conversations in scope, then
the facts of their users (every status). An import reads and checks the whole file before
writing anything, then writes one transaction per conversation and stores the facts with
:meth:`~memory_chain.tiers.sql.facts.FactStore.restore` (ids, statuses and dates kept; a fact
already stored is left as it is).

Example:
    >>> import io
    >>> from memory_chain.tiers.sql import create_sql_engine
    >>> from memory_chain.transfer import export_jsonl
    >>> out = io.StringIO()
    >>> export_jsonl(create_sql_engine("sqlite:////tmp/mc.db"), out)  # doctest: +SKIP
    TransferReport(conversations=3, turns=42, summaries=4, skipped=0, facts=7, skipped_facts=0)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO

from sqlalchemy import Engine

from memory_chain.errors import ConversationNotFoundError, InvalidInputError, MemoryChainError
from memory_chain.facts.model import Fact
from memory_chain.schemas import utcnow
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.store import SQLStore
from memory_chain.tiers.sql.transfer import (
    ConversationExistsError,
    ConversationRecord,
    OnConflict,
    check_fact,
    check_record,
    count_conversations,
    existing_conversations,
    existing_facts,
    read_export,
    write_conversation,
)
from memory_chain.transfer.format import (
    FACT_FORMAT,
    fact_to_json,
    line_from_json,
    record_to_json,
)

#: Called with (conversations done, conversations in total).
Progress = Callable[[int, int], None]
#: Facts stored per transaction by an import.
_FACT_BATCH = 500


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
        facts: Facts written (every status).
        skipped_facts: Facts left out because they were stored already (import only).
    """

    conversations: int = 0
    turns: int = 0
    summaries: int = 0
    skipped: int = 0
    facts: int = 0
    skipped_facts: int = 0


def export_jsonl(
    engine: Engine,
    out: IO[str],
    *,
    user_id: str | None = None,
    conversation_id: str | None = None,
    progress: Progress | None = None,
) -> TransferReport:
    """Write conversations, then facts, to ``out``, one JSON object per line.

    Conversations come oldest first; then the facts of every status, by user and oldest
    first: every user's (or ``user_id``'s), or with ``conversation_id`` the facts learnt in
    the conversations of that id.

    Args:
        engine: The tier-2 engine (the schema must exist).
        out: A text stream (UTF-8 for files).
        user_id: Only this user's conversations and facts.
        conversation_id: Only this conversation and the facts learnt in it.
        progress: Called after each conversation with (done, total).

    Returns:
        How many conversations, turns, summaries and facts were written.

    Raises:
        ConversationNotFoundError: If ``conversation_id`` is given and not stored (for the
            user); nothing is written.
        StorageError: If the database fails (``SchemaNotReadyError`` without a schema).
    """
    total = count_conversations(engine, user_id=user_id, conversation_id=conversation_id)
    if conversation_id is not None and total == 0:
        raise ConversationNotFoundError(conversation_id)
    done = turn_total = summary_total = fact_total = 0
    if progress is not None:
        progress(0, total)
    for item in read_export(engine, user_id=user_id, conversation_id=conversation_id):
        out.write(export_line(item))
        if isinstance(item, Fact):
            fact_total += 1
            continue
        done += 1
        turn_total += len(item.turns)
        summary_total += len(item.summaries)
        if progress is not None:
            progress(done, max(total, done))
    return TransferReport(done, turn_total, summary_total, facts=fact_total)


def export_line(item: ConversationRecord | Fact) -> str:
    """One conversation or fact as a line of the export format, with its newline."""
    obj = fact_to_json(item) if isinstance(item, Fact) else record_to_json(item)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def export_lines(engine: Engine, *, user_id: str) -> Iterator[str]:
    """A user's conversations, then facts, as export lines, one conversation read at a time.

    What ``GET /v1/users/me/export`` streams: the same lines as :func:`export_jsonl`.
    """
    for item in read_export(engine, user_id=user_id):
        yield export_line(item)


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
) -> Iterator[tuple[int, ConversationRecord | Fact]]:
    """Read and check every conversation and fact of a file, with its line number.

    Blank lines are skipped.

    Args:
        path: The file.
        max_chars: Longest accepted turn content.
        now: The time given to timestamps the file leaves out.

    Yields:
        (line number, conversation or fact), each checked with :func:`check_record` or
        :func:`check_fact`.

    Raises:
        ImportFileError: On the first line that is not valid UTF-8, not JSON, not a
            conversation or fact of a known format version, or that breaks the store's rules.
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
                item = line_from_json(value, now=now)
                if isinstance(item, Fact):
                    check_fact(item)
                else:
                    check_record(item, max_chars=max_chars)
            except InvalidInputError as exc:
                raise ImportFileError(number, f"{_about(value)}{exc}") from None
            yield number, item


def _about(value: object) -> str:
    """What a line is, to start its error message with (``""`` if it does not say)."""
    if not isinstance(value, dict):
        return ""
    if value.get("format") == FACT_FORMAT:
        fact_id = value.get("id")
        return f"fact {fact_id!r}: " if isinstance(fact_id, str) else "fact: "
    cid = value.get("conversation_id")
    return f"conversation {cid!r}: " if isinstance(cid, str) else ""


def _check_facts(store: SQLStore, lines: dict[str, int], facts: dict[str, Fact]) -> None:
    """Refuse facts that would replace one of another user, or whose id another user has."""
    for fact_id, number in lines.items():
        fact = facts[fact_id]
        replacement = facts.get(fact.superseded_by or "")
        if replacement is not None and replacement.user_id != fact.user_id:
            raise ImportFileError(
                number,
                f"fact {fact_id!r} of user {fact.user_id!r} is superseded by fact "
                f"{replacement.id!r} of user {replacement.user_id!r} (line "
                f"{lines[replacement.id]}): a fact is replaced by one of the same user; "
                "nothing was imported",
            )
    stored = existing_facts(store.engine, lines)
    foreign = [fact_id for fact_id, owner in stored.items() if owner != facts[fact_id].user_id]
    if foreign:
        first = min(foreign, key=lines.__getitem__)
        raise ImportFileError(
            lines[first],
            f"fact {first!r} is already stored for another user: fact ids are unique in a "
            "database, keep the file's facts to their users; nothing was imported",
        )


def import_jsonl(
    store: SQLStore,
    path: Path,
    *,
    max_chars: int,
    on_conflict: OnConflict = "fail",
    progress: Progress | None = None,
) -> TransferReport:
    """Import a file written by :func:`export_jsonl` (or by hand, see the module docstring).

    The whole file is read and checked first: a malformed line, a conversation id or fact id
    that comes twice, a fact id stored for another user, or (with ``on_conflict="fail"``) a
    conversation that is already stored stops the import before anything is written. Then
    each conversation is written in its own transaction, with its turn numbers, timestamps,
    counters, status and summaries; its turns are queued for tier 3 when the store queues
    embeddings (drain the indexer afterwards). Facts are stored as they were exported (ids,
    statuses, dates, history links), a batch per transaction; a fact already stored (the
    same id) is left as it is, whatever ``on_conflict`` says, so importing twice adds none
    twice. Their vectors are computed when they are first ranked.

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
    fact_lines: dict[str, int] = {}
    facts: dict[str, Fact] = {}
    for number, item in read_jsonl(path, max_chars=max_chars, now=now):
        if isinstance(item, Fact):
            if item.id in fact_lines:
                raise ImportFileError(
                    number,
                    f"fact {item.id!r} comes twice (first on line {fact_lines[item.id]}): keep "
                    "one; nothing was imported",
                )
            fact_lines[item.id] = number
            facts[item.id] = item
            continue
        owned = (item.info.user_id or "", item.info.conversation_id)
        if owned in lines:
            raise ImportFileError(
                number,
                f"conversation {owned[1]!r} of user {owned[0]!r} comes twice (first on line "
                f"{lines[owned]}): keep one; nothing was imported",
            )
        lines[owned] = number
    _check_facts(store, fact_lines, facts)
    if on_conflict == "fail":
        taken = existing_conversations(store.engine, lines)
        if taken:
            first = min(taken, key=lines.__getitem__)
            raise ImportFileError(
                lines[first], f"{ConversationExistsError(first[1])}; nothing was imported"
            )
    fact_store = FactStore(store.database)
    report = TransferReport()
    batch: list[tuple[int, Fact]] = []
    total = len(lines)
    if progress is not None:
        progress(0, total)
    for number, item in read_jsonl(path, max_chars=max_chars, now=now):
        if isinstance(item, Fact):
            batch.append((number, item))
            if len(batch) >= _FACT_BATCH:
                report = _restore(fact_store, batch, report)
                batch = []
            continue
        try:
            written = write_conversation(store, item, max_chars=max_chars, on_conflict=on_conflict)
        except MemoryChainError as exc:
            raise ImportFileError(
                number, f"{exc} ({_done(report)} before this line were imported; this one was not)"
            ) from exc
        report = replace(
            report,
            conversations=report.conversations + written,
            turns=report.turns + (len(item.turns) if written else 0),
            summaries=report.summaries + (len(item.summaries) if written else 0),
            skipped=report.skipped + (not written),
        )
        if progress is not None:
            progress(report.conversations + report.skipped, total)
    return _restore(fact_store, batch, report)


def _done(report: TransferReport) -> str:
    return f"the {report.conversations} conversations and {report.facts} facts"


def _restore(
    fact_store: FactStore, batch: list[tuple[int, Fact]], report: TransferReport
) -> TransferReport:
    """Store a batch of facts in one transaction; the report with them counted."""
    if not batch:
        return report
    try:
        stored = fact_store.restore([fact for _number, fact in batch])
    except MemoryChainError as exc:
        raise ImportFileError(
            batch[0][0],
            f"{exc} ({_done(report)} before this line were imported; the facts from this line "
            "on were not)",
        ) from exc
    return replace(
        report,
        facts=report.facts + stored,
        skipped_facts=report.skipped_facts + len(batch) - stored,
    )


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
