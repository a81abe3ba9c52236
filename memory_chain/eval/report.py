"""Plain-text tables of a LoCoMo evaluation (the ``memory-chain eval locomo`` output)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_chain.eval.locomo import LocomoReport, RecallTable

#: How the tables name what each question searched.
SCOPE_WORDS = {
    "conversation": "its own conversation",
    "user": "every conversation of the file (one user's, as a chat searches)",
}


def recall_lines(tables: Mapping[str, RecallTable], ks: Sequence[int]) -> list[str]:
    """A header and one row per mode (overall, then each category) of Recall@k tables."""
    lines = [f"  {'mode / category':<24}{'questions':>10}" + "".join(f"{f'R@{k}':>8}" for k in ks)]
    for mode, table in tables.items():
        lines.append(
            f"  {mode:<24}{table.questions['overall']:>10}"
            + "".join(f"{table.recall[k]:>8.1f}" for k in ks)
        )
        for category, row in table.per_category.items():
            lines.append(
                f"    {category:<22}{table.questions[category]:>10}"
                + "".join(f"{row[k]:>8.1f}" for k in ks)
            )
    return lines


def latency_lines(tables: Mapping[str, RecallTable]) -> list[str]:
    """Each mode's per-question retrieval time beside embedding the question alone."""
    lines = ["  per-question retrieval, ms (and embedding the question alone, timed before it):"]
    for mode, table in tables.items():
        latency, embedding = table.latency_ms, table.embedding_ms
        line = (
            f"    {mode:<22} p50 {latency['p50']:.2f}  p95 {latency['p95']:.2f}  "
            f"max {latency['max']:.2f}"
        )
        if embedding.get("p95"):
            line += (
                f"   embedding p50 {embedding['p50']:.2f}  p95 {embedding['p95']:.2f}  "
                f"(retrieval p95 / embedding p95 {latency['p95'] / embedding['p95']:.2f})"
            )
        lines.append(line)
    return lines


def format_report(report: LocomoReport) -> str:
    """Recall@k per mode, overall and per category, then latency, repairs and timings."""
    ks = report.ks
    lines = [
        f"LoCoMo retrieval recall: {report.path}",
        f"  {report.conversations} conversations, {report.turns} turns; evidence ids repaired "
        f"{report.repairs.repaired}, skipped {report.repairs.skipped}; questions left without "
        f"evidence {report.repairs.questions_without_evidence}",
        f"  each question searched {SCOPE_WORDS[report.scope]}; stores: {report.backend}",
        *recall_lines(report.results, ks),
        *latency_lines(report.results),
    ]
    timings = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report.seconds.items())
    lines.append(f"  time: {timings}")
    return "\n".join(lines)
