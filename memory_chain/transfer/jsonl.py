"""Export to and import from JSON Lines files (``memory-chain export`` / ``import``).

The line format is in :mod:`memory_chain.transfer.format` (store-item lines in
:mod:`.items`); the store-level reads in :mod:`memory_chain.tiers.sql.export`, checks and
writes in :mod:`memory_chain.tiers.sql.restore`.
An export writes the conversations in scope, then the facts of their users (every status),
then their store items (what agents kept in ``MemoryStore``). An import reads and checks the
whole file before writing anything (:mod:`.plan`), then writes one transaction per
conversation and stores the facts with :meth:`~memory_chain.tiers.sql.facts.FactStore.restore`
(ids, statuses and dates kept; a fact already stored is left as it is) and the store items
with :meth:`~memory_chain.tiers.sql.store_items.StoreItems.restore` (dates kept; one already
stored fails the import, or is skipped, as a conversation is).

Example:
    >>> import io
    >>> from memory_chain.tiers.sql import create_sql_engine
    >>> from memory_chain.transfer import export_jsonl
    >>> out = io.StringIO()
    >>> export_jsonl(create_sql_engine("sqlite:////tmp/mc.db"), out)  # doctest: +SKIP
    TransferReport(conversations=3, turns=42, summaries=4, skipped=0, facts=7, skipped_facts=0,
    store_items=2, skipped_store_items=0)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO

from sqlalchemy import Engine

from memory_chain.errors import ConversationNotFoundError, InvalidInputError, MemoryChainError
from memory_chain.facts.model import MAX_FACTS_PER_USER, Fact
from memory_chain.schemas import utcnow
from memory_chain.tiers.sql.export import count_conversations, read_export
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.restore import OnConflict, write_conversation
from memory_chain.tiers.sql.store import SQLStore
from memory_chain.tiers.sql.store_items import StoredItem, StoreItems
from memory_chain.transfer.lines import Line, check_line, describe, export_line, line_from_json
from memory_chain.transfer.plan import ImportFileError, ImportPlan

#: Called with (conversations done, conversations in total).
Progress = Callable[[int, int], None]
#: Facts (and store items) stored per transaction by an import.
_BATCH = 500


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
        store_items: Store items written.
        skipped_store_items: Store items left out because they were stored already (import
            with ``on_conflict="skip"`` only).
    """

    conversations: int = 0
    turns: int = 0
    summaries: int = 0
    skipped: int = 0
    facts: int = 0
    skipped_facts: int = 0
    store_items: int = 0
    skipped_store_items: int = 0


def export_jsonl(
    engine: Engine,
    out: IO[str],
    *,
    user_id: str | None = None,
    conversation_id: str | None = None,
    progress: Progress | None = None,
) -> TransferReport:
    """Write conversations, then facts, then store items to ``out``, one JSON object per line.

    Conversations come oldest first; then the facts of every status, by user and oldest
    first: every user's (or ``user_id``'s), or with ``conversation_id`` the facts said in
    the conversations of that id; then every user's (or ``user_id``'s) store items, by user,
    namespace and key. With ``conversation_id`` there are no store items: they belong to a
    user, not to a conversation.

    Args:
        engine: The tier-2 engine (the schema must exist).
        out: A text stream (UTF-8 for files).
        user_id: Only this user's conversations, facts and store items.
        conversation_id: Only this conversation and the facts said in it.
        progress: Called after each conversation with (done, total).

    Returns:
        How many conversations, turns, summaries, facts and store items were written.

    Raises:
        ConversationNotFoundError: If ``conversation_id`` is given and not stored (for the
            user); nothing is written.
        StorageError: If the database fails (``SchemaNotReadyError`` without a schema).
    """
    total = count_conversations(engine, user_id=user_id, conversation_id=conversation_id)
    if conversation_id is not None and total == 0:
        raise ConversationNotFoundError(conversation_id)
    done = turn_total = summary_total = fact_total = item_total = 0
    if progress is not None:
        progress(0, total)
    for item in read_export(engine, user_id=user_id, conversation_id=conversation_id):
        out.write(export_line(item))
        if isinstance(item, Fact):
            fact_total += 1
            continue
        if isinstance(item, StoredItem):
            item_total += 1
            continue
        done += 1
        turn_total += len(item.turns)
        summary_total += len(item.summaries)
        if progress is not None:
            progress(done, max(total, done))
    return TransferReport(done, turn_total, summary_total, facts=fact_total, store_items=item_total)


def export_lines(engine: Engine, *, user_id: str) -> Iterator[str]:
    """A user's conversations, facts and store items as export lines, read as they are written.

    What ``GET /v1/users/me/export`` streams: the same lines as :func:`export_jsonl`.
    """
    for item in read_export(engine, user_id=user_id):
        yield export_line(item)


def user_export(engine: Engine) -> Callable[[str], Iterator[str]]:
    """:func:`export_lines` of one database, as a function of the user.

    What the memory manager's :meth:`~memory_chain.manager.MemoryManager.export` is given
    (its ``exporter``): the manager streams a user's export without importing this format.

    Example:
        >>> manager = MemoryManager(store, buffer, exporter=user_export(store.engine))
        ... # doctest: +SKIP
    """

    def export(user_id: str) -> Iterator[str]:
        return export_lines(engine, user_id=user_id)

    return export


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
) -> Iterator[tuple[int, Line]]:
    """Read and check every conversation, fact and store item of a file, with its line number.

    Blank lines are skipped.

    Args:
        path: The file.
        max_chars: Longest accepted turn content.
        now: The time given to timestamps the file leaves out.

    Yields:
        (line number, conversation, fact or store item), each checked with
        :func:`~.lines.check_line`.

    Raises:
        ImportFileError: On the first line that is not valid UTF-8, not JSON, not a
            conversation, fact or store item of a known format version, or that breaks the
            store's rules.
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
                check_line(item, max_chars=max_chars)
            except InvalidInputError as exc:
                raise ImportFileError(number, f"{describe(value)}{exc}") from None
            yield number, item


def import_jsonl(
    store: SQLStore,
    path: Path,
    *,
    max_chars: int,
    on_conflict: OnConflict = "fail",
    progress: Progress | None = None,
    max_facts_per_user: int = MAX_FACTS_PER_USER,
) -> TransferReport:
    """Import a file written by :func:`export_jsonl` (or by hand, see the module docstring).

    The whole file is read and checked first (:class:`~.plan.ImportPlan`): a malformed line,
    a conversation, fact id or store item that comes twice, a fact id stored for another
    user, more current facts for a user than ``max_facts_per_user`` (counting those stored),
    or (with ``on_conflict="fail"``) a conversation or store item that is already
    stored stops the import before anything is written. Then each conversation is written
    in its own transaction, with its turn numbers, timestamps, counters, status and
    summaries; its turns are queued for tier 3 when the store queues embeddings (drain the
    indexer afterwards). Facts are stored as they were exported (ids, statuses, dates,
    history links), a batch per transaction; a fact already stored (the same id) is left as
    it is, whatever ``on_conflict`` says, so importing twice adds none twice. Store items
    are stored with their dates, a batch per transaction; one already stored (the same user,
    namespace and key) is left as it is with ``on_conflict="skip"``. Nothing is embedded: the
    facts' vectors are computed by a server's background thread
    (:meth:`~memory_chain.tiers.sql.facts.FactStore.embed_pending`), store items' when they
    are first searched.

    Args:
        store: The tier-2 store to import into.
        path: The JSON Lines file.
        max_chars: Longest accepted turn content (``max_message_chars``).
        on_conflict: ``"fail"``: refuse the import if a conversation id or a store item is
            taken; ``"skip"``: keep the stored conversation or item and leave the line out.
        progress: Called after each conversation with (done, total).
        max_facts_per_user: The most current facts a user may have
            (``memory_max_facts_per_user``).

    Returns:
        What was imported and skipped.

    Raises:
        ImportFileError: If a line cannot be imported; the message names the line, what to
            fix, and whether earlier lines were imported.
        StorageError: If the database fails.
    """
    now = utcnow()
    plan = ImportPlan()
    for number, item in read_jsonl(path, max_chars=max_chars, now=now):
        plan.add(number, item)
    plan.check(store.engine, on_conflict, max_facts=max_facts_per_user)
    fact_store = FactStore(store.database, max_facts=max_facts_per_user)
    item_store = StoreItems(store.database)
    skip_items = on_conflict == "skip"
    report = TransferReport()
    facts: list[tuple[int, Fact]] = []
    items: list[tuple[int, StoredItem]] = []
    total = len(plan.conversations)
    if progress is not None:
        progress(0, total)
    for number, item in read_jsonl(path, max_chars=max_chars, now=now):
        if isinstance(item, Fact):
            facts.append((number, item))
            if len(facts) >= _BATCH:
                report, facts = _restore_facts(fact_store, facts, report), []
            continue
        if isinstance(item, StoredItem):
            items.append((number, item))
            if len(items) >= _BATCH:
                report, items = _restore_items(item_store, items, report, skip_items), []
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
    report = _restore_facts(fact_store, facts, report)
    return _restore_items(item_store, items, report, skip_items)


def _done(report: TransferReport) -> str:
    return (
        f"the {report.conversations} conversations, {report.facts} facts and "
        f"{report.store_items} store items"
    )


def _restore_facts(
    fact_store: FactStore, batch: list[tuple[int, Fact]], report: TransferReport
) -> TransferReport:
    """Store a batch of facts in one transaction; the report with them counted."""
    if not batch:
        return report
    stored = _stored(batch, report, "facts", lambda: fact_store.restore([f for _, f in batch]))
    return replace(
        report,
        facts=report.facts + stored,
        skipped_facts=report.skipped_facts + len(batch) - stored,
    )


def _restore_items(
    item_store: StoreItems,
    batch: list[tuple[int, StoredItem]],
    report: TransferReport,
    skip_existing: bool,
) -> TransferReport:
    """Store a batch of store items in one transaction; the report with them counted."""
    if not batch:
        return report
    stored = _stored(
        batch,
        report,
        "store items",
        lambda: item_store.restore([i for _, i in batch], skip_existing=skip_existing),
    )
    return replace(
        report,
        store_items=report.store_items + stored,
        skipped_store_items=report.skipped_store_items + len(batch) - stored,
    )


def _stored(
    batch: Sequence[tuple[int, object]],
    report: TransferReport,
    what: str,
    restore: Callable[[], int],
) -> int:
    """``restore()``, a database error becoming one of the batch's first line."""
    try:
        return restore()
    except MemoryChainError as exc:
        raise ImportFileError(
            batch[0][0],
            f"{exc} ({_done(report)} before this line were imported; the {what} from this "
            "line on were not)",
        ) from exc


__all__ = [
    "ImportFileError",
    "Progress",
    "TransferReport",
    "atomic_text_file",
    "export_jsonl",
    "export_lines",
    "import_jsonl",
    "read_jsonl",
    "user_export",
]
