"""The ``memory-chain`` command: one module per group of subcommands.

* :mod:`.serving`: ``serve`` (the API server), ``mcp`` (one user's memory over stdio) and
  ``models`` (the embedded LLMs assembled and verified).
* :mod:`.maintenance`: ``migrate``, ``reindex``, ``stats``, ``status`` and ``consolidate``.
* :mod:`.transfer`: ``export`` and ``import`` (JSON Lines).
* :mod:`.measure`: ``bench`` and the ``eval`` group.
* :mod:`.console`: what they share (settings, progress bars, the error exit).

Each command imports what it runs inside its body, so that the command starts fast.
"""

from __future__ import annotations

import typer

from memory_chain.cli.maintenance import consolidate, migrate, reindex, stats, status
from memory_chain.cli.measure import bench, eval_app
from memory_chain.cli.serving import mcp, models, serve
from memory_chain.cli.transfer import export_, import_

# The commands stay importable from here (``server.py`` runs ``serve``).
__all__ = [
    "app",
    "bench",
    "consolidate",
    "eval_app",
    "export_",
    "import_",
    "mcp",
    "migrate",
    "models",
    "reindex",
    "serve",
    "stats",
    "status",
]

app = typer.Typer(help="Persistent three-tier conversation memory.", no_args_is_help=True)
# In the order ``memory-chain --help`` lists them.
app.command()(serve)
app.command()(mcp)
app.command()(models)
app.command()(migrate)
app.command()(reindex)
app.command()(stats)
app.command()(status)
app.command("export")(export_)
app.command("import")(import_)
app.command()(consolidate)
app.add_typer(eval_app, name="eval")
app.command()(bench)
