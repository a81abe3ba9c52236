"""The maintenance commands: ``migrate``, ``reindex``, ``stats``, ``status`` and ``consolidate``.

They work on the stores directly, without a server: the tier-2 schema, its counts, each
user's progress (what the background has still to consolidate and embed), tier 3 rebuilt
from tier 2, and summaries written now rather than when a conversation grows.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from memory_chain.cli.console import fail, load_settings, progress_bar

if TYPE_CHECKING:
    from memory_chain.tiers.sql.status import MemoryStatus


def migrate() -> None:
    """Create or upgrade the tier-2 database schema."""
    from memory_chain.tiers.sql import create_sql_engine, upgrade
    from memory_chain.tiers.sql.migrate import current_revision

    settings = load_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_sql_engine(settings.sql_url)
    upgrade(engine)
    typer.echo(f"schema at revision {current_revision(engine)}: {engine.url.render_as_string()}")


def reindex(
    user: Annotated[str | None, typer.Option(help="Only this user's conversations.")] = None,
    conversation: Annotated[str | None, typer.Option(help="Only this conversation.")] = None,
) -> None:
    """Rebuild tier 3 (vectors) from tier 2 (SQL): everything, one user or one conversation."""
    from memory_chain.services import open_services

    settings = load_settings()
    services = open_services(settings)
    try:
        if services.vectors is None:
            raise typer.BadParameter("tier 3 is disabled (MEMORY_CHAIN_MEMORY_TIER3_ENABLED)")
        scope = conversation or (f"user {user}" if user else "every conversation")
        with progress_bar(stderr=False) as bar:
            task = bar.add_task(f"embedding {scope}", total=None)
            done = services.vectors.reindex(
                user_id=user,
                conversation_id=conversation,
                progress=lambda finished, total: bar.update(task, completed=finished, total=total),
            )
        typer.echo(f"reindexed {done} turns into {services.vectors.backend}")
    finally:
        services.close()


def stats() -> None:
    """Print counts of conversations, turns and summaries as JSON."""
    from memory_chain.tiers.sql import SQLStore, check_schema, create_sql_engine

    settings = load_settings()
    engine = create_sql_engine(settings.sql_url)
    check_schema(engine)
    counts = SQLStore(engine).counts()
    typer.echo(json.dumps({"database": engine.url.render_as_string(), **counts}, indent=2))


def status(
    user: Annotated[str | None, typer.Option(help="Only this user.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON, for scripts.")] = False,
) -> None:
    """Per user: turns stored, consolidated and waiting, not yet searchable, facts learnt.

    Reads tier 2 only (a few grouped reads, no lock held): safe beside a running server
    using the same database, whose background work it shows.
    """
    from memory_chain.tiers.sql import SQLStore, check_schema, create_sql_engine
    from memory_chain.tiers.sql.status import memory_status

    settings = load_settings()
    engine = create_sql_engine(settings.sql_url)
    try:
        check_schema(engine)
        tier3 = settings.memory_tier3_enabled
        found = memory_status(SQLStore(engine), user_id=user, tier3=tier3)
        database = engine.url.render_as_string()
    finally:
        engine.dispose()
    if as_json:
        users = [s.as_dict() for s in found]
        typer.echo(json.dumps({"database": database, "tier3": tier3, "users": users}, indent=2))
        return
    typer.echo(f"database {database}")
    if not found:
        typer.echo("nothing stored yet")
    for entry in found:
        typer.echo(_status_lines(entry))


def _status_lines(entry: MemoryStatus) -> str:
    turns = entry.turns
    waiting = (
        f"{entry.turns_to_consolidate} wait in {entry.conversations_to_consolidate} "
        f"conversation{'' if entry.conversations_to_consolidate == 1 else 's'}"
    )
    if entry.turns_to_embed is None:
        searchable = "by keyword only (tier 3 is off)"
    else:
        searchable = (
            f"{turns - entry.turns_to_embed} of {turns} turns by meaning "
            f"({entry.turns_to_embed} wait to be embedded)"
        )
    newest = entry.last_summary_at.strftime("%Y-%m-%d %H:%M UTC") if entry.last_summary_at else "-"
    return "\n".join(
        [
            f"user {entry.user_id}: {entry.conversations} conversations, {turns} turns",
            f"  consolidated    {entry.turns_consolidated} of {turns} turns ({waiting})",
            f"  searchable      {searchable}",
            f"  facts           {entry.facts} ({entry.facts_learnt} learnt by consolidation)",
            f"  newest summary  {newest} (dated by the last turn it covers)",
        ]
    )


def consolidate(
    conversation: Annotated[str | None, typer.Option(help="The conversation.")] = None,
    user: Annotated[
        str | None,
        typer.Option(
            help="Owner of --conversation (default: default_user_id); with --all, "
            "only this user's conversations."
        ),
    ] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Every conversation with unsummarized turns.")
    ] = False,
) -> None:
    """Summarize unsummarized turns now with the configured LLM; print the new summaries."""
    from memory_chain.errors import ConversationNotFoundError, MemoryChainError
    from memory_chain.services import open_services
    from memory_chain.tiers.sql.progress import summarized_through

    if (conversation is None) == (not all_):
        raise typer.BadParameter("give --conversation ID (and --user) or --all")
    settings = load_settings()
    services = open_services(settings, llm=True)
    try:
        store, consolidation = services.store, services.consolidation
        if services.models is None or consolidation is None:
            raise typer.BadParameter("the LLM was not opened")
        if services.models.provider == "unavailable":
            fail(RuntimeError(services.models.detail))
        if conversation is not None:
            owner = user or settings.default_user_id
            if store.get_conversation(conversation, user_id=owner) is None:
                raise ConversationNotFoundError(conversation)
            targets = [(conversation, owner)]
        else:
            everything = store.list_conversations(user_id=user, limit=2**62)  # no paging
            targets = [
                (info.conversation_id, info.user_id or settings.default_user_id)
                for info in everything
                if info.status != "deleted"
            ]
        written = 0
        for cid, owner in targets:
            before = summarized_through(store, cid, owner)
            consolidation.consolidate(cid, owner)
            for summary in store.get_summaries(cid, user_id=owner):
                if summary.turn_range_start > before:
                    written += 1
                    typer.echo(
                        f"{cid} ({owner}) turns {summary.turn_range_start}-"
                        f"{summary.turn_range_end}: {summary.summary_text}"
                    )
        typer.echo(f"{written} summaries written ({len(targets)} conversations checked)")
    except MemoryChainError as exc:
        fail(exc)
    finally:
        services.close()
