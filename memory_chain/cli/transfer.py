"""The transfer commands: ``memory-chain export`` and ``import`` (JSON Lines, docs/cli.md).

``import`` itself stays short: chat exports are read and stored by :mod:`memory_chain.imports`
(which also embeds what was imported); memory-chain's own export is restored by
:mod:`memory_chain.transfer`, passed in here so that ``imports`` does not reach up to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import click
import typer

from memory_chain.cli.console import fail, load_settings, progress_bar

if TYPE_CHECKING:
    from memory_chain.imports.command import Bar
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
            metavar="FILE",
            help="memory-chain's own export (JSON Lines), Open WebUI's chat export, ChatGPT's "
            "conversations.json, or the plain JSON Lines / CSV of conversation, role, content, "
            "timestamp (docs/cli.md); the format is told by the content.",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    *,
    on_conflict: Annotated[
        Literal["fail", "skip"],
        typer.Option(
            help="memory-chain's own export: a conversation id (or a store item's user, "
            "namespace and key) already stored: fail (import nothing) or skip it."
        ),
    ] = "fail",
    format_: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Force the format: memory-chain, open-webui, chatgpt, jsonl or csv.",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            help="Whose the imported chats are (default: each Open WebUI chat's account, as "
            "the proxy names it; other exports: default_user_id)."
        ),
    ] = None,
    open_webui_namespace: Annotated[
        str | None,
        typer.Option(
            help="The proxy_api_keys namespace Open WebUI's accounts live in (default: the "
            "only one configured; '' for none)."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Store nothing; say what would be stored.")
    ] = False,
) -> None:
    """Import chat history: memory-chain's own export, Open WebUI's, ChatGPT's, plain files.

    Chat exports are imported as history (no "remember ..." in them acted on); importing
    the same file again adds nothing; facts come from consolidating the imported turns.
    """
    from memory_chain.errors import MemoryChainError
    from memory_chain.imports import FORMATS
    from memory_chain.imports.command import ImportOptions, run_import
    from memory_chain.services import open_services

    if format_ is not None and format_ not in FORMATS:
        raise typer.BadParameter(f"use one of {', '.join(FORMATS)}", param_hint="--format")
    options = ImportOptions(source, format_, user, open_webui_namespace, dry_run)
    settings = load_settings()
    services = open_services(settings)

    def restore(path: Path, bar: Bar) -> str:
        from memory_chain.transfer import import_jsonl

        with bar("importing conversations") as progress:
            report = import_jsonl(
                services.store,
                path,
                max_chars=settings.max_message_chars,
                on_conflict=on_conflict,
                max_facts_per_user=settings.memory_max_facts_per_user,
                progress=progress,
            )
        return _imported(report)

    try:
        if not run_import(services, options, typer.echo, _bar, restore=restore):
            raise typer.Exit(1)
    except MemoryChainError as exc:
        fail(exc)
    finally:
        services.close()


def _imported(report: TransferReport) -> str:
    """The line that says what an import of memory-chain's own export stored and skipped."""
    return (
        f"imported {report.conversations} conversations ({report.turns} turns, "
        f"{report.summaries} summaries), skipped {report.skipped} already stored; "
        f"imported {report.facts} facts, skipped {report.skipped_facts} already stored; "
        f"imported {report.store_items} store items, skipped {report.skipped_store_items} "
        "already stored"
    )


@contextlib.contextmanager
def _bar(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on standard error, as the callback an import step reports to."""
    with progress_bar() as bar:
        task = bar.add_task(description, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)
