"""The report of a cross-validation: its JSON form and its plain-text tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_chain.eval.crossval.folds import FoldResult, Paired
from memory_chain.eval.locomo import EvalScope, RecallTable
from memory_chain.eval.report import SCOPE_WORDS, latency_lines, recall_lines
from memory_chain.eval.stores import backend_name


@dataclass
class CrossValReport:
    """What :func:`~memory_chain.eval.crossval.cross_validate_locomo` measured.

    Attributes:
        held_out: Mode → recall pooled over every held-out fold (question-weighted).
        folds: Mode → each fold's chosen weights and held-out recall.
        whole_file: Mode → recall of the whole file with the shipped default weights.
        hybrid_against: Mode → the hybrid compared with it, per fold then pooled
            (:class:`~memory_chain.eval.crossval.folds.Paired`; when the hybrid and that
            mode are both measured).
        defaults: The shipped default weights.
        backend: The stores the run used (:func:`~memory_chain.eval.stores.backend_name`).

    Each held-out table's ``latency_ms`` is the time of one retrieval (gathering the
    candidates and ranking them, what :meth:`MemorySearch.find` does) and ``embedding_ms``
    that of embedding the question alone, timed right before it.
    """

    path: str
    ks: tuple[int, ...]
    scope: EvalScope = "conversation"
    backend: str = backend_name(None)
    held_out: dict[str, RecallTable] = field(default_factory=dict)
    folds: dict[str, list[FoldResult]] = field(default_factory=dict)
    whole_file: dict[str, RecallTable] = field(default_factory=dict)
    hybrid_against: dict[str, list[Paired]] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""

        def table(t: RecallTable) -> dict[str, Any]:
            return {
                "recall": {str(k): v for k, v in t.recall.items()},
                "per_category": {
                    c: {str(k): v for k, v in row.items()} for c, row in t.per_category.items()
                },
                "questions": t.questions,
                "latency_ms": t.latency_ms,
                "embedding_ms": t.embedding_ms,
            }

        return {
            "path": self.path,
            "scope": self.scope,
            "backend": self.backend,
            "held_out": {mode: table(t) for mode, t in self.held_out.items()},
            "whole_file": {mode: table(t) for mode, t in self.whole_file.items()},
            "folds": {
                mode: [
                    {
                        "conversation": f.conversation,
                        "weights": f.weights,
                        "recall": {str(k): v for k, v in f.recall.items()},
                        "questions": f.questions,
                    }
                    for f in folds
                ]
                for mode, folds in self.folds.items()
            },
            "hybrid_against": {
                mode: [
                    {
                        "conversation": c.conversation,
                        "better": {str(k): v for k, v in c.better.items()},
                        "worse": {str(k): v for k, v in c.worse.items()},
                        "p": {str(k): v for k, v in c.p.items()},
                    }
                    for c in compared
                ]
                for mode, compared in self.hybrid_against.items()
            },
            "defaults": self.defaults,
            "seconds": self.seconds,
        }


def _p(p: float) -> str:
    return "<0.01" if p < 0.01 else f"={p:.2f}"


def format_crossval(report: CrossValReport) -> str:
    """The held-out and whole-file tables, each fold's choice, the hybrid against the rest."""
    ks = report.ks
    lines = [
        f"LoCoMo leave-one-conversation-out cross-validation: {report.path}",
        f"  each question searched {SCOPE_WORDS[report.scope]}; stores: {report.backend}",
    ]
    for title, tables in (
        ("held-out folds (weights chosen on the other conversations)", report.held_out),
        ("whole file, shipped default weights", report.whole_file),
    ):
        lines += [f"  {title}", *recall_lines(tables, ks)]
    lines.append("  per fold: held-out recall, weights chosen on the other conversations")
    for mode, folds in report.folds.items():
        lines.append(f"    {mode}  (defaults: {report.defaults.get(mode)})")
        for fold in folds:
            recall = " ".join(f"{fold.recall[k]:5.1f}" for k in ks)
            lines.append(
                f"      {fold.conversation:<10}{fold.questions:>5}  {recall}  {fold.weights}"
            )
        spread = " ".join(
            f"{min(f.recall[k] for f in folds):5.1f}-{max(f.recall[k] for f in folds):<5.1f}"
            for k in ks
        )
        lines.append(f"      {'spread':<10}{'':>5}  {spread}  (lowest-highest fold)")
    lines += latency_lines(report.held_out)
    for mode, compared in report.hybrid_against.items():
        lines.append(
            f"  hybrid against {mode}, held out: questions where the hybrid finds more / fewer"
            " of the evidence, and the sign test's p"
        )
        for c in compared:
            cells = "  ".join(f"@{k} {c.better[k]}/{c.worse[k]} p{_p(c.p[k])}" for k in ks)
            lines.append(f"      {c.conversation or 'all':<10}{cells}")
    timings = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report.seconds.items())
    lines.append(f"  time: {timings}")
    return "\n".join(lines)
