"""``memory-chain import``: what it does, apart from parsing its options.

:func:`run_import` tells the file's format by its content (or takes ``--format``), imports
memory-chain's own JSON Lines export exactly as it was (:func:`memory_chain.transfer.
import_jsonl`) and every other format as history (:func:`memory_chain.imports.
import_history`), then embeds the new turns into tier 3 and says what consolidation has
left to do. It writes nothing itself: lines go to ``echo``, progress to ``bar``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memory_chain.errors import InvalidInputError, MemoryChainError, VectorStoreError
from memory_chain.imports.detect import detect_format, read_history
from memory_chain.imports.loader import HistorySink, owner_rule, proxy_namespace, store_history
from memory_chain.imports.model import HistoryFormat
from memory_chain.imports.progress import history_progress
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.tier import Tier3

if TYPE_CHECKING:
    from memory_chain.config import MemorySettings


class ImportManager(HistorySink, Protocol):
    """What the import needs of the memory manager: the history door and the facts."""

    fact_store: FactStore


class ImportServices(Protocol):
    """What the import needs of the opened services (:class:`memory_chain.services.Services`)."""

    @property
    def settings(self) -> MemorySettings:
        """The settings read at the edge."""
        ...

    @property
    def store(self) -> SQLStore:
        """Tier 2."""
        ...

    @property
    def vectors(self) -> Tier3 | None:
        """Tier 3, or ``None`` when it is off."""
        ...

    @property
    def manager(self) -> ImportManager:
        """The memory manager."""
        ...


class Echo(Protocol):
    """Writes a line for people (``typer.echo``); ``err=True`` for warnings."""

    def __call__(self, message: str, *, err: bool = False) -> None:
        """Write ``message``."""
        ...


#: A progress bar: ``bar(description)`` opens one, the callable it yields takes
#: ``(done, total)``.
Bar = Callable[[str], AbstractContextManager[Callable[[int, int], None]]]


@dataclass(frozen=True)
class ImportOptions:
    """What ``memory-chain import`` was asked (see ``docs/cli.md``)."""

    source: Path
    format: HistoryFormat | None = None
    user: str | None = None
    namespace: str | None = None
    dry_run: bool = False


#: Restores memory-chain's own export (``memory_chain.transfer.import_jsonl``, which sits
#: above this package): given the file and a bar, returns the line saying what it stored.
Restore = Callable[[Path, Bar], str]


def run_import(
    services: ImportServices, options: ImportOptions, echo: Echo, bar: Bar, *, restore: Restore
) -> bool:
    """Import a file; embed what it stored. Returns whether every conversation was stored.

    Args:
        services: The opened stores.
        options: What was asked.
        echo: Where lines for people go.
        bar: Opens progress bars.
        restore: Imports memory-chain's own export, exactly as exported.

    Raises:
        MemoryChainError: If the file cannot be read (nothing stored), or the store fails.
    """
    found = options.format or detect_format(options.source)
    if found == "memory-chain":
        if options.dry_run or options.user is not None:
            raise InvalidInputError(
                "--dry-run and --user are for chat exports, not for memory-chain's own export"
            )
        echo(restore(options.source, bar))
        complete = True
    else:
        complete = _import_history(services, options, found, echo, bar)
        if options.dry_run:
            return complete
    try:
        _embed(services, echo, bar)
    except VectorStoreError as exc:
        echo(
            f"warning: tier 3 is unavailable ({exc}); the imported turns stay queued: run "
            "`memory-chain reindex` later (a running server embeds them too)",
            err=True,
        )
    echo(history_progress(services.store, queued=services.vectors is not None).describe())
    return complete


def _import_history(
    services: ImportServices,
    options: ImportOptions,
    found: HistoryFormat,
    echo: Echo,
    bar: Bar,
) -> bool:
    settings = services.settings
    _, conversations = read_history(options.source, format=found)
    namespace = proxy_namespace(settings.proxy_api_keys.values(), options.namespace)
    owner = owner_rule(
        user=options.user, namespace=namespace, default_user=settings.default_user_id
    )
    with bar(f"importing {options.source.name} ({found})") as progress:
        report = store_history(
            services.manager,
            conversations,
            format=found,
            owner=owner,
            dry_run=options.dry_run,
            progress=progress,
        )
    echo(report.describe())
    return not report.failed


def _embed(services: ImportServices, echo: Echo, bar: Bar) -> None:
    """Embed the queued turns and the facts without a vector, as a server would."""
    if services.vectors is None:
        return
    worker = services.vectors.worker
    if worker is not None and not worker.index_open:  # open_services could not open it
        raise VectorStoreError(worker.last_error or "the vector index is not open")
    with bar("embedding turns into tier 3") as progress:
        embedded = services.vectors.drain(progress=progress)
    echo(f"embedded {embedded} turns into {services.vectors.backend}")
    facts = 0
    try:
        while done := services.manager.fact_store.embed_pending():
            facts += done
    except MemoryChainError as exc:
        echo(f"warning: facts not embedded ({exc}): a running server embeds them", err=True)
    if facts:
        echo(f"embedded {facts} facts")


__all__ = ["Bar", "Echo", "ImportOptions", "ImportServices", "Restore", "run_import"]
