"""LoCoMo retrieval recall: how many of the turns that answer a question memory finds.

Each conversation of a LoCoMo-format file is written into fresh scratch stores (SQLite and
the embedded vector index in a temporary folder, or a scratch PostgreSQL + pgvector
database: :mod:`.stores`) through the normal write path (:meth:`MemoryManager.add_turns`,
one call per session, the first speaker as ``user`` and the second as ``assistant``,
``"<speaker>: <text>"`` as content and the session's date as timestamp), tier 3 is filled
by the usual indexer, and every non-adversarial question is asked through
:meth:`MemoryManager.find`: the retrieval the chat uses, in the chosen mode. Recall@k of a
question is the fraction of its evidence turns among the first k results; the figures are
means over questions, in percent, overall and per category.

A question searches its own conversation (``scope="conversation"``, the default and the
figures the fusion was tuned on), or, like a chat with its default settings, every
conversation of the file, all stored as one user's (``scope="user"``): turns of other
conversations then compete for the same ranks and count as misses.

Example:
    >>> report = evaluate_locomo("locomo10.json", ks=(1, 5, 10))  # doctest: +SKIP
    >>> report.results["hybrid"].recall[10]
    71.3
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import groupby
from pathlib import Path
from typing import Any, Literal

from memory_chain.config import MemorySettings
from memory_chain.eval.locomo_data import (
    CATEGORIES,
    EVALUATED_CATEGORIES,
    EvidenceRepairs,
    LocomoQuestion,
    LocomoSample,
    load_locomo,
)
from memory_chain.eval.stores import analyze, backend_name, scratch_settings
from memory_chain.manager import MemoryManager
from memory_chain.retrieval import RetrievalMode
from memory_chain.schemas import MemoryItem, NewTurn
from memory_chain.services import open_services

#: Called with (stage, done, total) while ingesting, embedding and asking.
EvalProgress = Callable[[str, int, int], None]

DEFAULT_KS = (1, 5, 10, 20)
EVAL_USER = "locomo"

#: What a question searches: its own conversation, or all of them (one user's, as a chat does).
EvalScope = Literal["conversation", "user"]
EVAL_SCOPES: tuple[EvalScope, ...] = ("conversation", "user")


@dataclass
class RecallTable:
    """Recall of one retrieval mode.

    Attributes:
        recall: k → mean recall over every evaluated question, in percent.
        per_category: category name → k → mean recall, in percent.
        questions: category name → questions asked (``"overall"`` too).
        latency_ms: Per-question retrieval time: ``p50``, ``p95`` and ``max``.
        embedding_ms: The same for embedding the question alone, timed right before each
            retrieval (empty without tier 3): retrieval costs this much more than one
            embedding.
    """

    recall: dict[int, float]
    per_category: dict[str, dict[int, float]]
    questions: dict[str, int]
    latency_ms: dict[str, float]
    embedding_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class LocomoReport:
    """What :func:`evaluate_locomo` measured."""

    path: str
    ks: tuple[int, ...]
    conversations: int
    turns: int
    repairs: EvidenceRepairs
    scope: EvalScope = "conversation"
    backend: str = backend_name(None)
    results: dict[str, RecallTable] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary; ``recall`` maps k to the default mode's overall figure."""
        first = next(iter(self.results.values()), None)
        return {
            "path": self.path,
            "scope": self.scope,
            "backend": self.backend,
            "recall": {str(k): v for k, v in first.recall.items()} if first else {},
            "modes": {
                mode: {
                    "recall": {str(k): v for k, v in table.recall.items()},
                    "per_category": {
                        name: {str(k): v for k, v in row.items()}
                        for name, row in table.per_category.items()
                    },
                    "questions": table.questions,
                    "latency_ms": table.latency_ms,
                    "embedding_ms": table.embedding_ms,
                }
                for mode, table in self.results.items()
            },
            "conversations": self.conversations,
            "turns": self.turns,
            "evidence_repaired": self.repairs.repaired,
            "evidence_skipped": self.repairs.skipped,
            "questions_without_evidence": self.repairs.questions_without_evidence,
            "seconds": self.seconds,
        }


def _recall(found: Sequence[int | None], evidence: set[int], k: int) -> float:
    return len(evidence.intersection(found[:k])) / len(evidence)


def _ingest(manager: MemoryManager, sample: LocomoSample, user_id: str) -> dict[str, int]:
    """Store a sample's turns session by session; returns dia_id → turn number."""
    roles = {sample.speakers[0]: "user", sample.speakers[1]: "assistant"}
    numbers: dict[str, int] = {}
    for _, session in groupby(sample.turns, key=lambda turn: turn.dia_id.split(":")[0]):
        turns = list(session)
        stored = manager.add_turns(
            sample.sample_id,
            user_id,
            [
                NewTurn(roles.get(turn.speaker, "user"), turn.content, timestamp=turn.timestamp)  # type: ignore[arg-type]
                for turn in turns
            ],
            as_history=True,  # old sessions: no "remember ..." in them is acted on
        )
        numbers.update(
            {turn.dia_id: row.turn_number for turn, row in zip(turns, stored, strict=True)}
        )
    return numbers


def recall_table(
    scores: dict[str, list[dict[int, float]]], latencies: list[float], ks: Sequence[int]
) -> RecallTable:
    """Mean recall overall and per category (``scores``: category → per-question rows)."""
    every = [row for rows in scores.values() for row in rows]

    def mean(rows: list[dict[int, float]]) -> dict[int, float]:
        return {k: round(100 * statistics.fmean(row[k] for row in rows), 1) for k in ks}

    return RecallTable(
        recall=mean(every) if every else dict.fromkeys(ks, 0.0),
        per_category={
            CATEGORIES[c]: mean(scores[CATEGORIES[c]])
            for c in EVALUATED_CATEGORIES
            if scores.get(CATEGORIES[c])
        },
        questions={"overall": len(every)}
        | {name: len(rows) for name, rows in scores.items() if rows},
        latency_ms=latency_summary(latencies),
    )


def latency_summary(milliseconds: Sequence[float]) -> dict[str, float]:
    """p50, p95 and max of some timings (zeros when there are none)."""
    ordered = sorted(milliseconds)
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "max": 0.0}
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "max": round(ordered[-1], 2),
    }


@contextmanager
def ingested(
    samples: Sequence[LocomoSample],
    settings: MemorySettings | None,
    notify: EvalProgress,
    seconds: dict[str, float],
    *,
    user_of: Callable[[LocomoSample], str] = lambda _sample: EVAL_USER,
    postgres_url: str | None = None,
) -> Iterator[tuple[MemoryManager, dict[str, dict[str, int]]]]:
    """A manager over fresh scratch stores holding ``samples``, tier 3 filled.

    The stores are a temporary SQLite file and embedded vector index, or, with
    ``postgres_url``, a scratch database on that PostgreSQL server with tier 3 in pgvector
    (:func:`.stores.scratch_settings`). Yields the manager and, per sample, dia_id → turn
    number; ``seconds`` gets the time the stores took (``store``, ``embed``). Every sample
    belongs to ``user_of(sample)``. PostgreSQL's tables are analyzed once filled, as
    autovacuum would on a running server (:func:`.stores.analyze`).
    """
    with scratch_settings(settings or MemorySettings(), postgres_url) as scratch:
        services = open_services(scratch)
        try:
            started = time.perf_counter()
            manager = services.manager
            numbers: dict[str, dict[str, int]] = {}
            for done, sample in enumerate(samples, start=1):
                numbers[sample.sample_id] = _ingest(manager, sample, user_of(sample))
                notify("storing turns", done, len(samples))
            seconds["store"] = round(time.perf_counter() - started, 2)
            tier3 = services.vectors
            assert tier3 is not None
            embed_start = time.perf_counter()
            tier3.drain(progress=lambda done, total: notify("embedding", done, total))
            analyze(services.engine)
            seconds["embed"] = round(time.perf_counter() - embed_start, 2)
            yield manager, numbers
        finally:
            services.close()


def evaluate_locomo(
    path: str | Path,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    modes: Sequence[RetrievalMode] = ("hybrid",),
    scope: EvalScope = "conversation",
    settings: MemorySettings | None = None,
    max_conversations: int | None = None,
    max_questions: int | None = None,
    progress: EvalProgress | None = None,
    postgres_url: str | None = None,
) -> LocomoReport:
    """Measure Recall@k of memory retrieval on a LoCoMo-format file.

    Args:
        path: The file.
        ks: Cut-offs.
        modes: Retrieval modes to measure (the first is the report's headline).
        scope: What each question searches: its ``"conversation"``, or every conversation
            of the file (``"user"``, a chat's default).
        settings: Embedding and tier-3 settings to use; the stores always go to a fresh
            temporary folder (and an embedded vector index), never to ``settings.data_dir``.
        max_conversations: Evaluate only the first conversations (a CI slice).
        max_questions: Ask at most this many questions per conversation.
        progress: Told of each stage's progress.
        postgres_url: Run on PostgreSQL + pgvector instead: a scratch database on this
            server, dropped afterwards (:func:`.stores.scratch_database`).

    Returns:
        The report.
    """
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1:
        raise ValueError("k values must be positive integers")
    started = time.perf_counter()
    samples, repairs = load_locomo(path)
    samples = samples[:max_conversations] if max_conversations else samples
    report = LocomoReport(
        path=str(path),
        ks=ks,
        conversations=len(samples),
        turns=sum(len(sample.turns) for sample in samples),
        repairs=repairs,
        scope=scope,
        backend=backend_name(postgres_url),
    )
    notify = progress or (lambda _stage, _done, _total: None)
    with ingested(samples, settings, notify, report.seconds, postgres_url=postgres_url) as (
        manager,
        numbers,
    ):
        for mode in modes:
            ask_start = time.perf_counter()
            report.results[mode] = _ask(
                manager,
                samples,
                numbers,
                ks,
                mode=mode,
                scope=scope,
                max_questions=max_questions,
                notify=notify,
            )
            report.seconds[f"ask_{mode}"] = round(time.perf_counter() - ask_start, 2)
    report.seconds["total"] = round(time.perf_counter() - started, 2)
    return report


def evidence_turns(
    sample: LocomoSample, question: LocomoQuestion, numbers: dict[str, dict[str, int]]
) -> set[int]:
    """Turn numbers of a question's evidence, as stored."""
    return {numbers[sample.sample_id][dia] for dia in question.evidence}


def found_turns(items: Sequence[MemoryItem], conversation_id: str) -> list[int | None]:
    """Turn numbers of the turns among ``items``, in order.

    A turn of another conversation than ``conversation_id`` (the question's) keeps its rank
    as ``None``: it took a place the evidence could have had.
    """
    return [
        item.turn_number if item.conversation_id == conversation_id else None
        for item in items
        if item.kind == "turn" and item.turn_number
    ]


def searched(sample: LocomoSample, scope: EvalScope) -> str | None:
    """The conversation a question of ``sample`` searches in ``scope`` (``None``: all)."""
    return sample.sample_id if scope == "conversation" else None


def recall_row(
    found: Sequence[int | None], evidence: set[int], ks: Sequence[int]
) -> dict[int, float]:
    """Recall@k of one question for every k."""
    return {k: _recall(found, evidence, k) for k in ks}


def _ask(
    manager: MemoryManager,
    samples: Sequence[LocomoSample],
    numbers: dict[str, dict[str, int]],
    ks: Sequence[int],
    *,
    mode: RetrievalMode,
    scope: EvalScope,
    max_questions: int | None,
    notify: EvalProgress,
) -> RecallTable:
    saved = manager.retrieval
    manager.retrieval = replace(saved, mode=mode)
    scores: dict[str, list[dict[int, float]]] = defaultdict(list)
    latencies: list[float] = []
    embedding: list[float] = []
    tier3 = manager.tier3
    total = sum(len(s.questions[:max_questions] if max_questions else s.questions) for s in samples)
    asked = 0
    try:
        for sample in samples:
            questions = sample.questions[:max_questions] if max_questions else sample.questions
            for question in questions:
                if tier3 is not None:
                    t0 = time.perf_counter()
                    tier3.embed_query(question.question)
                    embedding.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                found = manager.find(
                    question.question,
                    user_id=EVAL_USER,
                    conversation_id=searched(sample, scope),
                    limit=max(ks),
                )
                latencies.append((time.perf_counter() - t0) * 1000)
                evidence = evidence_turns(sample, question, numbers)
                scores[CATEGORIES[question.category]].append(
                    recall_row(found_turns(found.items, sample.sample_id), evidence, ks)
                )
                asked += 1
                notify(f"asking ({mode})", asked, total)
    finally:
        manager.retrieval = saved
    table = recall_table(scores, latencies, ks)
    table.embedding_ms = latency_summary(embedding) if embedding else {}
    return table
