"""What every ``memory-chain`` command shares: settings, progress bars and the error exit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from memory_chain.config import MemorySettings

if TYPE_CHECKING:
    from rich.progress import Progress


def load_settings() -> MemorySettings:
    """The settings (MEMORY_CHAIN_* variables or .env), with logging set to their level.

    Returns:
        The settings, read once here at the command's edge and passed inward.
    """
    settings = MemorySettings()
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return settings


def progress_bar(*, stderr: bool = True) -> Progress:
    """A progress bar: a description, the bar, done of total and the time left.

    Args:
        stderr: Draw it on standard error (standard output may be carrying data); false
            draws it on standard output.

    Returns:
        The bar, to be entered as a context manager.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True) if stderr else None,
    )


def stage_progress(bar: Progress) -> Callable[[str, int, int], None]:
    """A ``progress(stage, done, total)`` callback that gives each new stage its own task.

    Args:
        bar: The entered progress bar the tasks are drawn on.

    Returns:
        The callback.
    """
    tasks: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total)
        bar.update(tasks[stage], completed=done, total=total)

    return progress


def fail(error: Exception) -> NoReturn:
    """Print ``error`` on standard error and exit with 1.

    Args:
        error: What went wrong; its message says what to fix.

    Raises:
        typer.Exit: Always, with code 1.
    """
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(1)
