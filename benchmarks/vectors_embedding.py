"""Parts 2 and 3 of the vector benchmark: what the embedding model costs around the index.

2. Ingestion: chat sentences (:mod:`corpus`) embedded as ``"role: content"`` (what
   ``TurnIndexer`` embeds) in batches of 64, at 1 and 2 runtime threads: per batch, in
   alternating order, ``embed_documents`` alone ("raw") and ``embed_documents`` +
   ``EdgeIndex.upsert`` ("pipeline", new point ids under a separate user), then the
   ``EdgeIndex.flush`` that ``TurnIndexer`` does after each batch, timed apart.
3. Retrieval: ``embed_query`` alone against ``embed_query`` + ``EdgeIndex.search`` filtered
   by user over the populated index, alternating on the same question at 1 thread.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from corpus import chat_sentences, questions, turn_point
from harness import alternate, alternated, progress, summarize, timed
from vectors_engines import INGEST_BATCH, INGEST_USER, USERS, Engine, K, Settings, user_name

from memory_chain.tiers.vectors.embeddings import LocalEmbeddings
from memory_chain.tiers.vectors.index import VectorFilter, VectorPoint

#: A batch of (role, content) turns and the texts embedded for them.
Chunk = tuple[list[tuple[str, str]], list[str]]

# -- part 2: ingestion --------------------------------------------------------------------


def ingest_points(
    texts: Sequence[tuple[str, str]], vectors: Sequence[Sequence[float]], tag: str, first: int
) -> list[VectorPoint]:
    """Points of freshly embedded turns, in a conversation of their own."""
    now = datetime.now(UTC)
    return [
        turn_point(
            f"ingest-{tag}", INGEST_USER, first + offset, list(vector), content, now, role=role
        )
        for offset, ((role, content), vector) in enumerate(zip(texts, vectors, strict=True))
    ]


def embedding_model(threads: int) -> LocalEmbeddings:
    """The configured runtime (MEMORY_CHAIN_EMBEDDING_RUNTIME, default onnx) at ``threads``."""
    from memory_chain.config import MemorySettings
    from memory_chain.services import build_embeddings

    return build_embeddings(MemorySettings(embedding_threads=threads))


def paired_round(
    edge: Engine, model: LocalEmbeddings, chunks: Sequence[Chunk], tag: str
) -> dict[str, float]:
    """Per batch, embedding alone and embedding + upsert back to back (order alternating),
    so that both see the same machine load; the sums give the two throughputs. The
    pipeline's batch is then flushed, as ``TurnIndexer.embed_batch`` does, timed apart."""
    raw_seconds = pipeline_seconds = upsert_seconds = flush_seconds = 0.0
    clock = time.perf_counter
    for number, (chunk_turns, chunk_texts) in enumerate(chunks):
        for step in alternated((0, 1), number):
            if step == 0:
                t0 = clock()
                model.embed_documents(chunk_texts)
                raw_seconds += clock() - t0
                continue
            t0 = clock()
            vectors = model.embed_documents(chunk_texts)
            points = ingest_points(chunk_turns, vectors, tag, number * INGEST_BATCH)
            u0 = clock()
            edge.index.upsert(points)
            t1 = clock()
            pipeline_seconds += t1 - t0
            upsert_seconds += t1 - u0
            edge.index.flush()
            flush_seconds += clock() - t1
    return {
        "raw_seconds": raw_seconds,
        "pipeline_seconds": pipeline_seconds,
        "upsert_seconds": upsert_seconds,
        "flush_seconds": flush_seconds,
        "pipeline_flush_seconds": pipeline_seconds + flush_seconds,
    }


def bench_ingestion(edge: Engine, settings: Settings, started: float) -> dict[str, Any]:
    """Raw against pipeline throughput, at 1 and 2 threads, in alternating rounds."""
    turns = chat_sentences(settings.sentences, random.Random(settings.seed + 2))
    # What TurnIndexer embeds: "role: content".
    texts = [f"{role}: {content}" for role, content in turns]
    chunks = [
        (turns[i : i + INGEST_BATCH], texts[i : i + INGEST_BATCH])
        for i in range(0, len(texts), INGEST_BATCH)
    ]
    models = {t: embedding_model(threads=t) for t in (1, 2)}
    for model in models.values():  # warm-up: both thread settings, one batch each
        model.embed_documents(texts[:INGEST_BATCH])
    runs: dict[int, dict[str, list[dict[str, float]]]] = {
        t: {"paired": [], "whole_list": []} for t in models
    }
    gc.collect()
    for round_ in range(settings.ingest_rounds):
        for threads in alternated((1, 2), round_):
            tag = f"r{round_}-t{threads}"
            runs[threads]["paired"].append(paired_round(edge, models[threads], chunks, tag))
            if round_ == 0:  # information only: once per thread setting keeps the run short
                t0 = time.perf_counter()
                models[threads].embed_documents(texts)
                runs[threads]["whole_list"].append({"seconds": time.perf_counter() - t0})
        progress(f"ingestion round {round_ + 1}/{settings.ingest_rounds}", started)

    result: dict[str, Any] = {
        "sentences": len(texts),
        "batch": INGEST_BATCH,
        "mean_words": float(np.mean([len(t.split()) for t in texts])),
        "rounds": settings.ingest_rounds,
        "threads": {
            threads: thread_figures(by_kind, len(texts), len(chunks))
            for threads, by_kind in runs.items()
        },
    }
    result["raw_2_over_1_threads"] = (
        result["threads"][2]["raw"]["sentences_per_second"]
        / result["threads"][1]["raw"]["sentences_per_second"]
    )
    return result


def thread_figures(
    by_kind: dict[str, list[dict[str, float]]], count: int, batches: int
) -> dict[str, Any]:
    """Throughputs and ratios of one thread setting, medians over the rounds."""
    pairs, wholes = by_kind["paired"], by_kind["whole_list"]

    def rates(samples: list[dict[str, float]], key: str) -> dict[str, Any]:
        per_round = [count / sample[key] for sample in samples]
        return {"sentences_per_second": float(np.median(per_round)), "per_round": per_round}

    entry: dict[str, Any] = {
        "raw": rates(pairs, "raw_seconds"),
        "pipeline": rates(pairs, "pipeline_seconds"),
        "pipeline_flush": rates(pairs, "pipeline_flush_seconds"),
        "whole_list": rates(wholes, "seconds"),
    }
    entry["flush_ms_per_batch"] = float(
        np.median([p["flush_seconds"] for p in pairs]) / batches * 1e3
    )
    entry["pipeline"]["upsert_share"] = float(
        np.median([p["upsert_seconds"] / p["pipeline_seconds"] for p in pairs])
    )
    entry["pipeline"]["upsert_points_per_second"] = float(
        np.median([count / p["upsert_seconds"] for p in pairs])
    )
    # Raw and pipeline alternate batch by batch: their ratio per round is paired.
    entry["pipeline_over_raw"] = float(
        np.median([p["raw_seconds"] / p["pipeline_seconds"] for p in pairs])
    )
    entry["pipeline_flush_over_raw"] = float(
        np.median([p["raw_seconds"] / p["pipeline_flush_seconds"] for p in pairs])
    )
    # The one-call pass runs in round 0 only: compare it with round 0's pipeline.
    entry["pipeline_over_whole_list"] = wholes[0]["seconds"] / pairs[0]["pipeline_seconds"]
    return entry


# -- part 3: retrieval --------------------------------------------------------------------


def bench_retrieval(edge: Engine, settings: Settings) -> dict[str, Any]:
    """``embed_query`` alone against ``embed_query`` + search, alternating at 1 thread."""
    rng = random.Random(settings.seed + 3)
    texts = questions(settings.retrieval_samples + 20, rng)
    users = [user_name(rng.randrange(USERS)) for _ in texts]
    models = {t: embedding_model(threads=t) for t in (1, 2)}
    for model in models.values():
        for text in texts[:10]:
            model.embed_query(text)
    search_part_ns: list[int] = []
    hits_seen: list[int] = []

    def retrieve(item: tuple[str, str]) -> None:
        text, user = item
        vector = models[1].embed_query(text)
        searched, hits = timed(edge.index.search, vector, VectorFilter(user_id=user), K)
        search_part_ns.append(searched)
        hits_seen.append(len(hits))

    # Embedding alone and retrieval alternate, on the same text, at 1 thread (the default).
    asked = list(zip(texts[20:], users[20:], strict=True))
    variants = {"embed": lambda item: models[1].embed_query(item[0]), "retrieval": retrieve}
    timings = alternate(variants, asked, order="reverse")
    # Then, for information, embedding alone at 2 threads (a separate phase: under load it
    # can be much slower, and it would disturb the samples above).
    later = [text for text, _ in asked[: max(10, len(asked) // 3)]]
    two_threads = alternate({"2": models[2].embed_query}, later).samples["2"]
    models[1].embed_query("reset torch threads to the default")

    embed = timings.summary("embed")
    retrieval = timings.summary("retrieval")
    return {
        "embed_query_ms": embed,
        "embed_query_2_threads_ms": summarize(two_threads),
        "retrieval_ms": retrieval,
        "search_part_ms": summarize(search_part_ns),
        "retrieval_p95_over_embed_p95": retrieval["p95"] / embed["p95"],
        "mean_hits": float(np.mean(hits_seen)),
        "example_query": asked[0][0],
    }
