"""The benchmarks' harness: start a server, time a loop, print a table, write JSON.

The benchmarks are scripts run from the repository root (``python benchmarks/bench_x.py``);
Python puts the script's folder first on the import path, so they import this package as
``harness`` (``from harness import Run, alternate, scratch_server``). Every name below is
importable from ``harness`` itself; the modules hold one concern each.

Start a server (:mod:`harness.servers`, :mod:`harness.postgres`):
    - ``scratch_server(prefix, *, llm_url=None, **settings)``: context manager; a real
      ``memory-chain serve`` (uvicorn on 127.0.0.1, a free port) on a fresh scratch data
      folder, removed afterwards; its chat model the stub LLM of ``loadgen.py`` (a fixed reply
      at once, in its own process) unless ``llm_url`` names an Ollama API; ``settings`` are
      ``MemorySettings`` fields (``database_url=...``, ``log_level="WARNING"``). Yields a
      ``Server`` (``url``, ``pid``, ``log``, ``data_dir``; ``log_problems()``, ``data_mb()``,
      ``health()``).
    - ``memory_chain_server(data_dir, llm_url, **settings)``: the same on a folder you give
      (replicas on one database); ``server_env(...)`` is its environment.
    - ``queued_turns(url)``, ``wait_for_backfill(url, timeout)``: the tier-3 backlog.
    - ``postgres_database(server_url_or_None)``: a fresh database (dropped afterwards) on
      your server or on a throwaway local one; ``local_postgres()`` the local server alone.
    - Load through the server: ``loadgen.run_clients`` (concurrent chat clients),
      ``loadgen.check_conversations`` (read every conversation back), ``loadgen.StubOllama``.

Time a loop (:mod:`harness.timing`, :mod:`harness.stats`), samples in nanoseconds:
    - ``alternate(variants, inputs, *, warmup=0, order="rotate", before=None, after=None,
      into=None)``: every input through every variant (name -> call of one input), the
      variants' order rotated (or reversed every other input, ``order="reverse"``; kept,
      ``"fixed"``) from input to input so that before/after see the same machine load; the
      first ``warmup`` inputs untimed; ``before(name, input)`` and ``after(name, input,
      result)`` run untimed (settle, switch a variant on, check a result); ``into`` adds to
      earlier ``Timings`` (several blocks, one result). Returns ``Timings``.
    - ``Timings``: ``samples`` (name -> ns list, sample i from input i), ``summary(name)``
      (n, p50, p95, p99, mean, max in ms), ``summaries()``, ``ratio(name, baseline)`` (median
      over median), ``paired_ratio(name, baseline)`` (median of per-input ratios: the steadier
      figure on a shared machine), ``differences(name, baseline)``.
    - ``comparison_lines(timings, baseline)``: the table of every variant with its ratios.
    - ``timed(call, *args)`` -> (ns, result); ``repeat(call, times, warmup)`` -> ns list;
      ``time_calls(calls, max_seconds, check)`` -> (ns list, wall seconds): a loop with a
      deadline; ``timer_overhead_ns()``: what one clock pair costs (inside every sample);
      ``rotated(items, step)``, ``alternated(items, step)``: the orders ``alternate`` uses.
    - ``summarize(samples_ns, unit="ms")``, ``median_ratio(a, b)``, ``paired_ratio(a, b)``,
      ``verdict(value, goal, higher_is_better)`` -> "ok" / "MISSED" / "n/a",
      ``second_half(samples, key)`` (growth judged over a run's second half).

Print a table and write JSON (:mod:`harness.report`, :mod:`harness.run`):
    - ``table(headers, rows)``: aligned lines (``stats_cells(stats)``: a row's percentiles);
      ``stats_header``/``stats_row``: rows of percentiles;
      ``goal_line(label, value, goal, verdict)``; ``fmt(number)``.
    - ``parser(__doc__, quick="...")``: argparse with ``--json`` (and ``--quick``);
      ``configure(Settings(), args, QUICK)``: a settings dataclass from defaults, ``--quick``
      values and the options given.
    - ``Run(title, packages=...)``: ``header()`` (machine, load, versions), ``progress(msg)``
      on stderr, ``finish(lines, json_path, settings=..., results=..., verdicts=...)`` prints
      the lines and a footer and writes the JSON (``memory-chain bench`` reads ``verdicts``).
    - ``run_and_report(title, json_path, settings, measure, report, *, packages, intro,
      verdicts, **sections)``: all of that in one call: header, ``measure(settings, run)``,
      ``report(result, settings)`` printed, JSON written with ``settings``, ``results`` and
      ``verdicts(result)``; returns the result.
    - Memory (:mod:`harness.memory`): ``rss_mb(pid)``, ``memory_mb(pid)``, ``heap_mb(pid)``.

Example, a before/after benchmark against a real server::

    from harness import Run, alternate, comparison_lines, parser, scratch_server, verdict

    args = parser(__doc__, quick="10 rounds").parse_args()
    run = Run("import", packages=("httpx",))
    print(run.header())
    with scratch_server("mc-bench-import-", log_level="WARNING") as server:
        timings = alternate({"before": old_way, "after": new_way}, batches, warmup=2)
    ratio = timings.paired_ratio("after", "before")
    run.finish(
        comparison_lines(timings, baseline="before"),
        args.json,
        results={"ms": timings.summaries(), "after_over_before": ratio},
        verdicts={"after <= before": verdict(ratio, 1.0, higher_is_better=False)},
    )
"""

from __future__ import annotations

from .memory import MB, heap_mb, memory_mb, rss_mb
from .postgres import (
    database_url,
    drop_postgres_database,
    fresh_postgres_database,
    local_postgres,
    postgres_database,
)
from .report import cell, fmt, goal_line, stats_cells, stats_header, stats_row, table
from .run import Run, configure, parser, progress, run_and_report, versions
from .servers import (
    Server,
    memory_chain_server,
    queued_turns,
    scratch_server,
    server_env,
    wait_for_backfill,
)
from .stats import median_ratio, paired_ratio, second_half, summarize, verdict
from .timing import (
    Timings,
    alternate,
    alternated,
    comparison_lines,
    ordered,
    repeat,
    rotated,
    time_calls,
    timed,
    timer_overhead_ns,
)

__all__ = [
    "MB",
    "Run",
    "Server",
    "Timings",
    "alternate",
    "alternated",
    "cell",
    "comparison_lines",
    "configure",
    "database_url",
    "drop_postgres_database",
    "fmt",
    "fresh_postgres_database",
    "goal_line",
    "heap_mb",
    "local_postgres",
    "median_ratio",
    "memory_chain_server",
    "memory_mb",
    "ordered",
    "paired_ratio",
    "parser",
    "postgres_database",
    "progress",
    "queued_turns",
    "repeat",
    "rotated",
    "rss_mb",
    "run_and_report",
    "scratch_server",
    "second_half",
    "server_env",
    "stats_cells",
    "stats_header",
    "stats_row",
    "summarize",
    "table",
    "time_calls",
    "timed",
    "timer_overhead_ns",
    "verdict",
    "versions",
    "wait_for_backfill",
]
