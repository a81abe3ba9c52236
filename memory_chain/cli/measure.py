"""The measuring commands: ``memory-chain eval locomo`` (memory quality) and ``bench`` (speed).

``eval`` is a group of its own (:data:`eval_app`); the package adds it to the command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from memory_chain.cli.console import fail, load_settings, progress_bar, stage_progress

if TYPE_CHECKING:
    from memory_chain.config import MemorySettings
    from memory_chain.eval.locomo import EvalScope
    from memory_chain.retrieval import RetrievalMode

eval_app = typer.Typer(help="Measure memory quality.", no_args_is_help=True)


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
        fail(ValueError(f"--k takes comma-separated integers, got {k!r}"))
    names = mode or (["hybrid", "keyword", "dense"] if cross_validate else ["hybrid"])
    unknown = sorted(set(names) - {"hybrid", "dense", "keyword"})
    if unknown or not ks or min(ks) < 1:
        fail(
            ValueError(
                f"--mode takes hybrid, dense or keyword and --k positive integers: {unknown or k}"
            )
        )
    modes = cast("list[RetrievalMode]", names)
    if scope not in EVAL_SCOPES:
        fail(ValueError(f"--scope takes {' or '.join(EVAL_SCOPES)}, got {scope!r}"))
    settings = load_settings()
    if answers is not None:
        _eval_answers(path, answers, settings, as_json=as_json, postgres_url=postgres_url)
        return
    if budget is not None:
        _eval_budget(
            path, budget, settings, scope=scope, cross_validate=cross_validate,
            conversations=conversations, as_json=as_json, postgres_url=postgres_url,
        )  # fmt: skip
        return
    with progress_bar() as bar:
        progress = stage_progress(bar)
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
            fail(exc)
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
        fail(ValueError(f"--budget takes comma-separated token counts, got {budgets!r}"))
    with progress_bar() as bar:
        try:
            report = evaluate_budget(
                path, budgets=windows, scope=cast("EvalScope", scope),
                cross_validate=cross_validate, settings=settings,
                max_conversations=conversations, progress=stage_progress(bar),
                postgres_url=postgres_url,
            )  # fmt: skip
        except (InvalidInputError, ValueError, StorageError) as exc:
            fail(exc)
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
        with progress_bar() as bar:
            task = bar.add_task("answering", total=questions)

            def progress(stage: str, done: int, total: int) -> None:
                if stage == "answering":
                    bar.update(task, completed=done, total=total)

            report = evaluate_answers(
                path, models, questions=questions, settings=settings, progress=progress,
                postgres_url=postgres_url,
            )  # fmt: skip
    except (InvalidInputError, ValueError, StorageError) as exc:
        fail(exc)
    finally:
        models.close()
    typer.echo(json.dumps(report.as_dict()) if as_json else format_answers(report))


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
        fail(exc)
    for line in summary(results):
        typer.echo(line)
    if json_out is not None:
        json_out.write_text(json.dumps(results, indent=2, default=str) + "\n")
        typer.echo(f"figures written to {json_out}")
    if any("error" in result for result in results.values()):
        raise typer.Exit(1)
    if strict and missed_goals(results):
        raise typer.Exit(1)
