"""The ``memory-chain`` command."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, cast

import click
import typer

from memory_chain.config import MemorySettings

if TYPE_CHECKING:
    from rich.progress import Progress

    from memory_chain.eval.locomo import EvalScope
    from memory_chain.retrieval import RetrievalMode

app = typer.Typer(help="Persistent three-tier conversation memory.", no_args_is_help=True)


def _settings() -> MemorySettings:
    settings = MemorySettings()
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return settings


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
) -> None:
    """Run the API server (settings from MEMORY_CHAIN_* variables or .env)."""
    import uvicorn

    from memory_chain.api import create_app

    settings = _settings()
    if host:  # the address bound is trusted as a host name (see trusted_hosts)
        settings = settings.model_copy(update={"server_host": host})
    uvicorn.run(
        create_app(settings),
        host=settings.server_host,
        port=port or settings.server_port,
        log_level=settings.log_level.lower(),
        # Open requests get the grace period; the app's shutdown then gets what is left of it.
        timeout_graceful_shutdown=max(int(settings.shutdown_grace_seconds), 1),
    )


@app.command()
def mcp(
    user: Annotated[
        str | None, typer.Option(help="Whose memory to serve (default: default_user_id).")
    ] = None,
) -> None:
    """Serve one user's memory to an MCP client over standard input and output (docs/cli.md)."""
    import anyio

    from memory_chain.errors import InvalidInputError, MemoryChainError
    from memory_chain.identity import Caller, identify
    from memory_chain.integrations.mcp import build_mcp_server
    from memory_chain.integrations.mcp_stdio import protocol_stdout, serve_stdio
    from memory_chain.services import open_services

    settings = _settings()
    try:
        # In process: this command holds the stores, so no key is asked.
        owner = identify(settings, Caller.in_process(user or None))
    except InvalidInputError as exc:
        raise typer.BadParameter(str(exc), param_hint="--user") from exc
    # SIGTERM (from a client that gave up waiting for the exit, or a process manager) stops
    # the server as Ctrl-C does, so that the stores are closed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # Standard output carries the protocol alone, from before the stores open (a library
    # printing there would break the client's stream); everything else goes to stderr.
    with protocol_stdout() as out:
        try:
            services = open_services(settings)
        except MemoryChainError as exc:
            _fail(exc)
        try:
            anyio.run(serve_stdio, build_mcp_server(services, user=owner), out)
        finally:
            services.close()


@app.command()
def migrate() -> None:
    """Create or upgrade the tier-2 database schema."""
    from memory_chain.tiers.sql import create_sql_engine, upgrade
    from memory_chain.tiers.sql.migrate import current_revision

    settings = _settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_sql_engine(settings.sql_url)
    upgrade(engine)
    typer.echo(f"schema at revision {current_revision(engine)}: {engine.url.render_as_string()}")


@app.command()
def reindex(
    user: Annotated[str | None, typer.Option(help="Only this user's conversations.")] = None,
    conversation: Annotated[str | None, typer.Option(help="Only this conversation.")] = None,
) -> None:
    """Rebuild tier 3 (vectors) from tier 2 (SQL): everything, one user or one conversation."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from memory_chain.services import open_services

    settings = _settings()
    services = open_services(settings)
    try:
        if services.vectors is None:
            raise typer.BadParameter("tier 3 is disabled (MEMORY_CHAIN_MEMORY_TIER3_ENABLED)")
        scope = conversation or (f"user {user}" if user else "every conversation")
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        ) as bar:
            task = bar.add_task(f"embedding {scope}", total=None)
            done = services.vectors.reindex(
                user_id=user,
                conversation_id=conversation,
                progress=lambda finished, total: bar.update(task, completed=finished, total=total),
            )
        typer.echo(f"reindexed {done} turns into {services.vectors.backend}")
    finally:
        services.close()


@app.command()
def stats() -> None:
    """Print counts of conversations, turns and summaries as JSON."""
    from memory_chain.tiers.sql import SQLStore, check_schema, create_sql_engine

    settings = _settings()
    engine = create_sql_engine(settings.sql_url)
    check_schema(engine)
    counts = SQLStore(engine).counts()
    typer.echo(json.dumps({"database": engine.url.render_as_string(), **counts}, indent=2))


def _stderr_bar() -> Progress:
    """A progress bar on standard error (standard output may be carrying data)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )


def _fail(error: Exception) -> NoReturn:
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(1)


@app.command("export")
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

    engine = create_sql_engine(_settings().sql_url)
    try:
        check_schema(engine)
        output = (
            click.open_file("-", "w", encoding="utf-8")
            if out == "-"
            else atomic_text_file(Path(out))
        )
        with output as stream, _stderr_bar() as bar:
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
        _fail(exc)
    finally:
        engine.dispose()
    where = "standard output" if out == "-" else out
    typer.echo(
        f"exported {report.conversations} conversations ({report.turns} turns, "
        f"{report.summaries} summaries) and {report.facts} facts, "
        f"{report.store_items} store items to {where}",
        err=True,
    )


@app.command("import")
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
    from memory_chain.imports.command import Bar, ImportOptions, run_import
    from memory_chain.services import open_services

    if format_ is not None and format_ not in FORMATS:
        raise typer.BadParameter(f"use one of {', '.join(FORMATS)}", param_hint="--format")
    options = ImportOptions(source, format_, user, open_webui_namespace, dry_run)
    settings = _settings()
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
        return (
            f"imported {report.conversations} conversations ({report.turns} turns, "
            f"{report.summaries} summaries), skipped {report.skipped} already stored; "
            f"imported {report.facts} facts, skipped {report.skipped_facts} already stored; "
            f"imported {report.store_items} store items, skipped {report.skipped_store_items} "
            "already stored"
        )

    try:
        if not run_import(services, options, typer.echo, _bar, restore=restore):
            raise typer.Exit(1)
    except MemoryChainError as exc:
        _fail(exc)
    finally:
        services.close()


@contextlib.contextmanager
def _bar(description: str) -> Iterator[Callable[[int, int], None]]:
    with _stderr_bar() as bar:
        task = bar.add_task(description, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@app.command()
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
    settings = _settings()
    services = open_services(settings, llm=True)
    try:
        store, consolidation = services.store, services.consolidation
        if services.models is None or consolidation is None:
            raise typer.BadParameter("the LLM was not opened")
        if services.models.provider == "unavailable":
            _fail(RuntimeError(services.models.detail))
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
        _fail(exc)
    finally:
        services.close()


eval_app = typer.Typer(help="Measure memory quality.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


@eval_app.command("locomo")
def eval_locomo(
    path: Annotated[Path, typer.Argument(help="A LoCoMo-format JSON file (e.g. locomo10.json).")],
    *,
    k: Annotated[str, typer.Option(help="Cut-offs, comma-separated.")] = "1,5,10,20",
    mode: Annotated[
        list[str] | None,
        typer.Option(help="Retrieval mode: hybrid (default), dense or keyword; repeatable."),
    ] = None,
    conversations: Annotated[
        int | None, typer.Option(min=1, help="Only the first N conversations.")
    ] = None,
    scope: Annotated[
        str,
        typer.Option(
            help="What each question searches: its own 'conversation', or 'user': every "
            "conversation of the file, stored as one user's (what a chat searches by default).",
        ),
    ] = "conversation",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    cross_validate: Annotated[
        bool,
        typer.Option(
            "--cross-validate",
            help="Tune the fusion weights leaving one conversation out at a time and report "
            "the held-out folds (every mode unless --mode is given).",
        ),
    ] = False,
    budget: Annotated[
        str | None,
        typer.Option(
            help="Instead of recall@k: evidence recall within these context windows "
            "(comma-separated tokens, e.g. 1024,2048,4096,8192): the share of evidence turns "
            "in the memory context the chat would send a model with that window, beside the "
            "last turns that fit and the top 10 retrieved until full (with --cross-validate, "
            "ranked with each fold's held-out weights).",
        ),
    ] = None,
    answers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Instead of recall: ask this many sampled questions through the chat chain "
            "with the configured LLM, with memory, with the last turns only and with none, "
            "and score the replies with LoCoMo's answer F1 (a benchmark: minutes per question "
            "on the embedded model).",
        ),
    ] = None,
    postgres_url: Annotated[
        str | None,
        typer.Option(
            help="Run on PostgreSQL + pgvector: a scratch database made on the server of this "
            "SQLAlchemy URL (e.g. your MEMORY_CHAIN_DATABASE_URL) and dropped afterwards; the "
            "role needs CREATEDB. Default: a temporary SQLite file and embedded vector index.",
        ),
    ] = None,
) -> None:
    """Recall@k of memory retrieval on LoCoMo questions (in a temporary store)."""
    from memory_chain.errors import InvalidInputError, StorageError
    from memory_chain.eval.crossval import cross_validate_locomo, format_crossval
    from memory_chain.eval.locomo import EVAL_SCOPES, evaluate_locomo
    from memory_chain.eval.report import format_report

    try:
        ks = tuple(int(value) for value in k.split(",") if value.strip())
    except ValueError:
        _fail(ValueError(f"--k takes comma-separated integers, got {k!r}"))
    names = mode or (["hybrid", "keyword", "dense"] if cross_validate else ["hybrid"])
    unknown = sorted(set(names) - {"hybrid", "dense", "keyword"})
    if unknown or not ks or min(ks) < 1:
        _fail(
            ValueError(
                f"--mode takes hybrid, dense or keyword and --k positive integers: {unknown or k}"
            )
        )
    modes = cast("list[RetrievalMode]", names)
    if scope not in EVAL_SCOPES:
        _fail(ValueError(f"--scope takes {' or '.join(EVAL_SCOPES)}, got {scope!r}"))
    settings = _settings()
    if answers is not None:
        _eval_answers(path, answers, settings, as_json=as_json, postgres_url=postgres_url)
        return
    if budget is not None:
        _eval_budget(
            path, budget, settings, scope=scope, cross_validate=cross_validate,
            conversations=conversations, as_json=as_json, postgres_url=postgres_url,
        )  # fmt: skip
        return
    with _stderr_bar() as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            if cross_validate:
                crossval = cross_validate_locomo(
                    path, ks=ks, modes=modes, scope=scope, settings=settings,
                    progress=progress, postgres_url=postgres_url,
                )  # fmt: skip
            else:
                report = evaluate_locomo(
                    path, ks=ks, modes=modes, scope=scope, settings=settings,
                    max_conversations=conversations, progress=progress,
                    postgres_url=postgres_url,
                )  # fmt: skip
        except (InvalidInputError, ValueError, StorageError) as exc:
            _fail(exc)
    if cross_validate:
        typer.echo(json.dumps(crossval.as_dict()) if as_json else format_crossval(crossval))
    else:
        typer.echo(json.dumps(report.as_dict()) if as_json else format_report(report))


def _eval_budget(
    path: Path,
    budgets: str,
    settings: MemorySettings,
    *,
    scope: str,
    cross_validate: bool,
    conversations: int | None,
    as_json: bool,
    postgres_url: str | None,
) -> None:
    """``memory-chain eval locomo --budget ...``: evidence recall within token windows."""
    from memory_chain.errors import InvalidInputError, StorageError
    from memory_chain.eval.budget import evaluate_budget, format_budget

    try:
        windows = tuple(int(value) for value in budgets.split(",") if value.strip())
    except ValueError:
        _fail(ValueError(f"--budget takes comma-separated token counts, got {budgets!r}"))
    with _stderr_bar() as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            report = evaluate_budget(
                path, budgets=windows, scope=cast("EvalScope", scope),
                cross_validate=cross_validate, settings=settings,
                max_conversations=conversations, progress=progress, postgres_url=postgres_url,
            )  # fmt: skip
        except (InvalidInputError, ValueError, StorageError) as exc:
            _fail(exc)
    typer.echo(json.dumps(report.as_dict()) if as_json else format_budget(report))


def _eval_answers(
    path: Path, questions: int, settings: MemorySettings, *, as_json: bool, postgres_url: str | None
) -> None:
    """``memory-chain eval locomo --answers N``: answer F1 with the configured LLM."""
    from memory_chain.errors import InvalidInputError, StorageError
    from memory_chain.eval.answers import answering_settings, evaluate_answers, format_answers
    from memory_chain.llm import open_chat_models

    models = open_chat_models(answering_settings(settings))
    typer.echo(f"LLM: {models.detail}", err=True)
    try:
        with _stderr_bar() as bar:
            task = bar.add_task("answering", total=questions)

            def progress(stage: str, done: int, total: int) -> None:
                if stage == "answering":
                    bar.update(task, completed=done, total=total)

            report = evaluate_answers(
                path, models, questions=questions, settings=settings, progress=progress,
                postgres_url=postgres_url,
            )  # fmt: skip
    except (InvalidInputError, ValueError, StorageError) as exc:
        _fail(exc)
    finally:
        models.close()
    typer.echo(json.dumps(report.as_dict()) if as_json else format_answers(report))


@app.command()
def bench(
    only: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated: tiers, vectors, chat, load, embeddings, replicas, locomo."
        ),
    ] = None,
    quick: Annotated[bool, typer.Option(help="Smoke-sized runs (minutes, not tens).")] = False,
    locomo: Annotated[
        Path | None, typer.Option(help="A LoCoMo-format file for the recall evaluation.")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write every figure to this file.")
    ] = None,
    strict: Annotated[
        bool, typer.Option(help="Exit with 1 when a goal is MISSED, not only when a run fails.")
    ] = False,
) -> None:
    """Run the performance suite (benchmarks/ of a source checkout) and print every goal."""
    from memory_chain.bench import NAMES, missed_goals, run_suite, summary
    from memory_chain.errors import InvalidInputError

    names = [name.strip() for name in only.split(",") if name.strip()] if only else list(NAMES)
    try:
        results = run_suite(names, quick=quick, locomo=locomo, echo=typer.echo)
    except InvalidInputError as exc:
        _fail(exc)
    for line in summary(results):
        typer.echo(line)
    if json_out is not None:
        json_out.write_text(json.dumps(results, indent=2, default=str) + "\n")
        typer.echo(f"figures written to {json_out}")
    if any("error" in result for result in results.values()):
        raise typer.Exit(1)
    if strict and missed_goals(results):
        raise typer.Exit(1)
