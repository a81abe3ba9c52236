"""A cross-validation run on a LoCoMo file: ingest it, gather every question once, tune.

The file is ingested once (:func:`~memory_chain.eval.locomo.ingested`); per retrieval mode,
each question's candidates are gathered with the chat's search (:func:`gather_questions`),
timed, then ranked under the mode's grid and cross-validated
(:mod:`~memory_chain.eval.crossval.folds`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from memory_chain.config import MemorySettings
from memory_chain.eval.crossval.folds import (
    Asked,
    cross_validate,
    grid_values,
    paired_counts,
    pooled,
    recalls,
)
from memory_chain.eval.crossval.report import CrossValReport
from memory_chain.eval.locomo import (
    DEFAULT_KS,
    EVAL_USER,
    EvalProgress,
    EvalScope,
    evidence_turns,
    ingested,
    latency_summary,
    searched,
)
from memory_chain.eval.locomo_data import CATEGORIES, LocomoSample, load_locomo
from memory_chain.eval.stores import backend_name
from memory_chain.manager import MemoryManager
from memory_chain.retrieval import FusionWeights, RetrievalMode


@dataclass
class Timings:
    """Per-question times, in ms: retrieval to ``depth`` items, and the query's embedding."""

    depth: int
    retrieval: list[float] = field(default_factory=list)
    embedding: list[float] = field(default_factory=list)


def gather_questions(
    manager: MemoryManager,
    samples: Sequence[LocomoSample],
    numbers: dict[str, dict[str, int]],
    *,
    scope: EvalScope,
    notify: EvalProgress,
    stage: str,
    timings: Timings | None = None,
) -> list[Asked]:
    """Every question of ``samples`` with its candidates, gathered once (the chat's search).

    With ``timings``, each question is also embedded alone and timed, then its retrieval
    (gathering and ranking with the shipped weights, as :meth:`MemorySearch.find` does).
    """
    asked: list[Asked] = []
    total = sum(len(s.questions) for s in samples)
    tier3 = manager.tier3
    for sample in samples:
        for question in sample.questions:
            if timings is not None and tier3 is not None:
                t0 = time.perf_counter()
                tier3.embed_query(question.question)
                timings.embedding.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            candidates = manager.memory_search.gather(
                question.question, user_id=EVAL_USER, conversation_id=searched(sample, scope)
            )
            if timings is not None:
                candidates.rank(manager.memory_search.settings.weights, timings.depth)
                timings.retrieval.append((time.perf_counter() - t0) * 1000)
            asked.append(
                Asked(
                    sample.sample_id,
                    CATEGORIES[question.category],
                    evidence_turns(sample, question, numbers),
                    candidates,
                )
            )
            notify(stage, len(asked), total)
    return asked


def cross_validate_locomo(
    path: str | Path,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    modes: Sequence[RetrievalMode] = ("hybrid", "keyword", "dense"),
    scope: EvalScope = "conversation",
    settings: MemorySettings | None = None,
    progress: EvalProgress | None = None,
    postgres_url: str | None = None,
) -> CrossValReport:
    """Leave-one-conversation-out cross-validation of the fusion weights.

    Args:
        path: A LoCoMo-format file with at least two conversations.
        ks: Cut-offs.
        modes: Retrieval modes to measure.
        scope: What each question searches: its ``"conversation"``, or every conversation
            of the file (``"user"``); folds are held out by conversation either way.
        settings: Embedding and tier-3 settings (the stores go to a temporary folder).
        progress: Told of each stage's progress.
        postgres_url: Run on PostgreSQL + pgvector instead: a scratch database on this
            server, dropped afterwards (:func:`~memory_chain.eval.stores.scratch_database`).

    Returns:
        Held-out and whole-file recall per mode, the weights each fold chose, and the
        retrieval and embedding times of the held-out questions.

    Raises:
        InvalidInputError: If the file is not LoCoMo-format JSON.
        ValueError: If it has fewer than two conversations, or a k is not positive.
    """
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1:
        raise ValueError("k values must be positive integers")
    started = time.perf_counter()
    samples, _ = load_locomo(path)
    if len(samples) < 2:
        raise ValueError("cross-validation needs at least two conversations")
    notify = progress or (lambda _stage, _done, _total: None)
    report = CrossValReport(path=str(path), ks=ks, scope=scope, backend=backend_name(postgres_url))
    defaults = FusionWeights()
    report.defaults = {m: grid_values(defaults, m) for m in modes}
    held: dict[str, list[dict[int, float]]] = {}
    with ingested(samples, settings, notify, report.seconds, postgres_url=postgres_url) as (
        manager,
        numbers,
    ):
        saved = manager.retrieval
        for mode in modes:
            manager.retrieval = replace(saved, mode=mode)
            timings = Timings(max(ks))
            asked = gather_questions(
                manager, samples, numbers, scope=scope, notify=notify,
                stage=f"gathering ({mode})", timings=timings,
            )  # fmt: skip
            tune_start = time.perf_counter()
            held[mode], report.folds[mode] = cross_validate(asked, mode, ks)
            report.held_out[mode] = pooled(asked, held[mode], ks)
            report.held_out[mode].latency_ms = latency_summary(timings.retrieval)
            report.held_out[mode].embedding_ms = (
                latency_summary(timings.embedding) if timings.embedding else {}
            )
            report.whole_file[mode] = pooled(asked, recalls(asked, defaults, ks), ks)
            report.seconds[f"tune_{mode}"] = round(time.perf_counter() - tune_start, 2)
        manager.retrieval = saved
    if "hybrid" in held:
        report.hybrid_against = {
            mode: paired_counts(asked, held["hybrid"], rows, ks)
            for mode, rows in held.items()
            if mode != "hybrid"
        }
    report.seconds["total"] = round(time.perf_counter() - started, 2)
    return report
