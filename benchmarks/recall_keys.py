"""Fact-augmented keys on LoCoMo: each question's candidates credited with its range keys.

Part of ``bench_recall_embedders.py``. The range keys of a conversation are the summary and
facts consolidation learnt from each of its ranges (``recall_consolidation.py``'s cache),
embedded as stored texts with the run's embedder; each question's candidates (gathered once
by the chat's search) are copied and credited with the best ranges
(:func:`memory_chain.retrieval.range_keys.credit_ranges`), the turns they add carrying their
exact cosine, and ranked with the fusion weights of the question's fold plus ``range_key``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from memory_chain.eval.crossval.folds import Asked, sign_test
from memory_chain.eval.locomo import EVAL_USER, found_turns, recall_row
from memory_chain.eval.locomo_data import LocomoSample
from memory_chain.manager import MemoryManager
from memory_chain.retrieval import FusionWeights
from memory_chain.retrieval.candidates import Candidates
from memory_chain.retrieval.range_keys import RangeKey, credit_ranges, key_text
from memory_chain.schemas import MemoryItem
from memory_chain.tiers.vectors.embeddings import LocalEmbeddings
from memory_chain.tiers.vectors.indexer import embedding_text

#: Weights of the range key's cosine tried (0 adds the ranges' turns without credit).
RANGE_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5)


@dataclass
class ConversationKeys:
    """A conversation's range keys and turns, embedded."""

    keys: list[RangeKey]
    key_vectors: np.ndarray
    items: dict[int, MemoryItem]
    turn_vectors: dict[int, np.ndarray]


def conversation_keys(
    manager: MemoryManager,
    sample: LocomoSample,
    numbers: dict[str, int],
    ranges: list[dict[str, Any]],
    embeddings: LocalEmbeddings,
) -> ConversationKeys:
    """Embed a conversation's range keys (from the cache's ``ranges``) and its turns."""
    keys = [
        RangeKey(
            sample.sample_id,
            numbers[part["dia_ids"][0]],
            numbers[part["dia_ids"][-1]],
            key_text(part["summary"], part["facts"]),
        )
        for part in ranges
    ]
    turns = manager.turns(sample.sample_id, EVAL_USER)
    vectors = np.asarray(embeddings.embed_documents([embedding_text(t) for t in turns]))
    items = {
        t.turn_number: MemoryItem(
            tier="tier2",
            kind="turn",
            conversation_id=t.conversation_id,
            content=t.content,
            timestamp=t.timestamp,
            score=0.0,
            turn_number=t.turn_number,
            role=t.role,
        )
        for t in turns
    }
    return ConversationKeys(
        keys,
        np.asarray(embeddings.embed_documents([key.text for key in keys])),
        items,
        {t.turn_number: vectors[i] for i, t in enumerate(turns)},
    )


def credited(asked: Asked, found: ConversationKeys) -> Candidates:
    """A copy of the question's candidates credited with its best range keys."""
    source = asked.candidates
    copy = replace(source, items=[replace(c, sources=list(c.sources)) for c in source.items])
    if source.vector is None:
        return copy
    query = np.asarray(source.vector)
    cosines = found.key_vectors @ query

    def turns_of(key: RangeKey) -> list[tuple[MemoryItem, float | None]]:
        return [
            (found.items[n], float(found.turn_vectors[n] @ query))
            for n in range(key.first, key.last + 1)
            if n in found.items
        ]

    credit_ranges(copy, [(k, float(c)) for k, c in zip(found.keys, cosines, strict=True)], turns_of)
    return copy


def key_recall(
    asked: Sequence[Asked],
    keyed: Sequence[Candidates],
    weights: dict[str, FusionWeights],
    ks: Sequence[int],
) -> dict[str, dict[str, Any]]:
    """Recall without keys and with them at each of :data:`RANGE_WEIGHTS`, pooled.

    ``weights`` are each conversation's fusion weights (its fold's choice). Each variant
    with keys also counts the questions it finds more / less of the evidence for at k = 10
    than without keys (``better``, ``worse``) and the sign test's p.
    """
    depth = max(ks)
    rows: dict[str, list[dict[int, float]]] = {"without keys": []}
    for one, candidates in zip(asked, keyed, strict=True):
        base = weights[one.conversation]
        rows["without keys"].append(
            recall_row(found_turns(one.candidates.rank(base, depth), one.conversation),
                       one.evidence, ks)
        )  # fmt: skip
        for weight in RANGE_WEIGHTS:
            ranked = candidates.rank(replace(base, range_key=weight), depth)
            rows.setdefault(f"keys, range_key {weight}", []).append(
                recall_row(found_turns(ranked, one.conversation), one.evidence, ks)
            )
    without = rows["without keys"]
    found: dict[str, dict[str, Any]] = {}
    for name, variant in rows.items():
        better = sum(a[10] > b[10] for a, b in zip(variant, without, strict=True))
        worse = sum(a[10] < b[10] for a, b in zip(variant, without, strict=True))
        found[name] = {
            "recall": {k: round(100 * float(np.mean([row[k] for row in variant])), 1) for k in ks},
            "better_at_10": better,
            "worse_at_10": worse,
            "p": round(sign_test(better, worse), 3),
        }
    return found
