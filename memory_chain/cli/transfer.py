"""The transfer commands: ``memory-chain export`` and ``import`` (JSON Lines, docs/cli.md).

``import`` itself stays short: the file is read by :mod:`memory_chain.transfer`, and what
follows any import (the report, then embedding the new turns and facts) is in helpers here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import click
import typer

from memory_chain.cli.console import fail, load_settings, progress_bar

if TYPE_CHECKING:
    from memory_chain.services import Services
    from memory_chain.transfer import TransferReport


def export_(
    out: Annotated[
        str,
        typer.Argument(
            metavar="OUT.jsonl|-", help="JSON Lines file to write, or - for standard output."
        ),
    ] = "-",
    user: Annotated[
        str | None, typer.Option(help="Only this user's conversations, facts and store items.")
    ] = None,
    conversation: Annotated[
        str | None, typer.Option(help="Only this conversation and the facts said in it.")
    ] = None,
) -> None:
    """Export conversations (turns, summaries, metadata), facts and store items as JSON Lines."""
    from memory_chain.errors import MemoryChainError
    from memory_chain.tiers.sql import check_schema, create_sql_engine
    from memory_chain.transfer import atomic_text_file, export_jsonl

    engine = create_sql_engine(load_settings().sql_url)
    try:
        check_schema(engine)
        output = (
            click.open_file("-", "w", encoding="utf-8")
            if out == "-"
            else atomic_text_file(Path(out))
        )
        with output as stream, progress_bar() as bar:
            task = bar.add_task("exporting conversations", total=None)
            report = export_jsonl(
                engine,
                stream,
                user_id=user,
                conversation_id=conversation,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
            stream.flush()
    except (MemoryChainError, OSError) as exc:
        fail(exc)
    finally:
        engine.dispose()
    where = "standard output" if out == "-" else out
    typer.echo(
        f"exported {report.conversations} conversations ({report.turns} turns, "
        f"{report.summaries} summaries) and {report.facts} facts, "
        f"{report.store_items} store items to {where}",
        err=True,
    )


def import_(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="IN.jsonl",
            help="JSON Lines file written by `memory-chain export`.",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    on_conflict: Annotated[
        Literal["fail", "skip"],
        typer.Option(
            help="A conversation id (or a store item's user, namespace and key) already "
            "stored: fail (import nothing) or skip it."
        ),
    ] = "fail",
) -> None:
    """Import conversations, facts and store items from JSON Lines, exactly as exported."""
    from memory_chain.errors import MemoryChainError, VectorStoreError
    from memory_chain.services import open_services
    from memory_chain.transfer import import_jsonl

    settings = load_settings()
    services = open_services(settings)
    try:
        with progress_bar() as bar:
            task = bar.add_task(f"checking {source.name}", total=None)
            report = import_jsonl(
                services.store,
                source,
                max_chars=settings.max_message_chars,
                on_conflict=on_conflict,
                max_facts_per_user=settings.memory_max_facts_per_user,
                progress=lambda done, total: bar.update(
                    task, description="importing conversations", completed=done, total=total
                ),
            )
        typer.echo(_imported(report))
        _embed_imported(services)
    except VectorStoreError as exc:
        typer.echo(
            f"warning: tier 3 is unavailable ({exc}); the imported turns stay queued: run "
            "`memory-chain reindex` later (a running server embeds them too)",
            err=True,
        )
    except MemoryChainError as exc:
        fail(exc)
    finally:
        services.close()


def _imported(report: TransferReport) -> str:
    """The line that says what an import stored and what it skipped."""
    return (
        f"imported {report.conversations} conversations ({report.turns} turns, "
        f"{report.summaries} summaries), skipped {report.skipped} already stored; "
        f"imported {report.facts} facts, skipped {report.skipped_facts} already stored; "
        f"imported {report.store_items} store items, skipped {report.skipped_store_items} "
        "already stored"
    )


def _embed_imported(services: Services) -> None:
    """Embed the imported turns into tier 3 now, then the facts, when tier 3 is on.

    Raises:
        VectorStoreError: The vector index is not open; the turns stay queued.
    """
    from memory_chain.errors import VectorStoreError

    if services.vectors is None:
        return
    worker = services.vectors.worker
    if worker is not None and not worker.index_open:  # open_services could not open it
        raise VectorStoreError(worker.last_error or "the vector index is not open")
    with progress_bar() as bar:
        task = bar.add_task("embedding turns into tier 3", total=None)
        embedded = services.vectors.drain(
            progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
    typer.echo(f"embedded {embedded} turns into {services.vectors.backend}")
    _embed_facts(services)


def _embed_facts(services: Services) -> None:
    """Embed the facts stored without a vector now, as a server's backfill thread would."""
    from memory_chain.errors import MemoryChainError

    embedded = 0
    try:
        while done := services.manager.fact_store.embed_pending():
            embedded += done
    except MemoryChainError as exc:
        typer.echo(f"warning: facts not embedded ({exc}): a running server embeds them", err=True)
    if embedded:
        typer.echo(f"embedded {embedded} facts")
