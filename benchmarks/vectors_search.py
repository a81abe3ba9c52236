"""Part 1 of the vector benchmark: filtered top-5 search, its latency and recall.

Queries are random unit vectors filtered by one conversation (with its user, as tier 3
always filters by user) or by one user; every hit is checked against the filter and against
exact numpy search over the same filtered points (recall@5). The embedded index (and
pgvector's) take every query, in turn; qdrant-client local mode takes ~1 s per filtered
query at 100k points, so only ``--local-queries`` are timed for it, one per local engine
between blocks of the others' queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from harness import Timings, alternate, alternated, summarize, timed
from vectors_engines import (
    CONVERSATIONS,
    USERS,
    Dataset,
    Engine,
    K,
    Settings,
    conversation_name,
    unit_vectors,
    user_name,
)

from memory_chain.tiers.vectors.index import VectorFilter, VectorHit


@dataclass(frozen=True)
class Query:
    vector: list[float]
    where: VectorFilter


def make_queries(scope: str, count: int, rng: np.random.Generator) -> list[Query]:
    vectors = unit_vectors(count, rng)
    queries = []
    for row in vectors:
        if scope == "conversation":
            conversation = int(rng.integers(CONVERSATIONS))
            where = VectorFilter(
                user_id=user_name(conversation % USERS),
                conversation_id=conversation_name(conversation),
            )
            queries.append(Query(row.tolist(), where))
        else:
            user = int(rng.integers(USERS))
            where = VectorFilter(user_id=user_name(user))
            queries.append(Query(row.tolist(), where))
    return queries


def members_of(data: Dataset, query: Query) -> np.ndarray:
    if query.where.conversation_id is not None:
        return data.conversation_members[int(query.where.conversation_id.split("-")[1])]
    assert query.where.user_id is not None
    return data.user_members[int(query.where.user_id.split("-")[1])]


def exact_top(data: Dataset, members: np.ndarray, vector: np.ndarray) -> np.ndarray:
    scores = data.vectors[members] @ vector
    if len(members) <= K:
        return members
    top = np.argpartition(-scores, K)[:K]
    return members[top]


@dataclass
class SearchTally:
    samples_ns: list[int] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    wrong_scope: int = 0
    short: int = 0

    def summary(self) -> dict[str, Any]:
        result = summarize(self.samples_ns)
        result["recall_at_5"] = float(np.mean(self.recall)) if self.recall else None
        result["queries_below_full_recall"] = sum(1 for r in self.recall if r < 1.0)
        result["hits_outside_filter"] = self.wrong_scope
        result["queries_with_fewer_than_k_hits"] = self.short
        return result


def check_hits(data: Dataset, query: Query, hits: list[VectorHit], tally: SearchTally) -> None:
    members = members_of(data, query)
    expected = {int(i) for i in exact_top(data, members, np.asarray(query.vector, np.float32))}
    found = set()
    for hit in hits:
        payload = hit.payload
        if query.where.conversation_id is not None:
            inside = payload.conversation_id == query.where.conversation_id
        else:
            inside = payload.user_id == query.where.user_id
        if not inside:
            tally.wrong_scope += 1
        index = data.index_of.get(str(hit.id))
        if index is not None:
            found.add(index)
    if len(hits) < min(K, len(members)):
        tally.short += 1
    tally.recall.append(len(found & expected) / len(expected))


def bench_search(
    engines: Sequence[Engine], data: Dataset, scope: str, settings: Settings, seed: int
) -> dict[str, Any]:
    """Edge (and pgvector) queries in blocks, one local query per local engine between blocks.

    The engines that take every query (edge first, then pgvector's) run each query in turn,
    the order alternating from one query to the next.
    """
    rng = np.random.default_rng(seed)
    edge = engines[0]
    full = [edge, *(e for e in engines[1:] if e.name.startswith("pgvector"))]
    locals_ = [e for e in engines[1:] if e not in full]
    warmup = 20
    queries = make_queries(scope, settings.edge_queries + warmup, rng)
    local_queries = queries[warmup : warmup + settings.local_queries] if locals_ else []
    for query in queries[:warmup]:
        for engine in full:
            engine.index.search(query.vector, query.where, K)
    for engine in locals_:  # one untimed query each: first-call costs
        engine.index.search(queries[0].vector, queries[0].where, K)

    tallies = {engine.name: SearchTally() for engine in engines}
    timings = Timings()
    timed_queries = queries[warmup:]
    rounds = max(1, len(local_queries))
    per_round = math.ceil(len(timed_queries) / rounds)

    def searcher(engine: Engine) -> Callable[[Query], list[VectorHit]]:
        return lambda query: engine.index.search(query.vector, query.where, K)

    def check(name: str, query: Query, hits: list[VectorHit]) -> None:
        check_hits(data, query, hits, tallies[name])

    every = {engine.name: searcher(engine) for engine in full}
    for round_ in range(rounds):
        block = timed_queries[round_ * per_round : (round_ + 1) * per_round]
        alternate(every, block, order="reverse", after=check, into=timings)
        if round_ < len(local_queries):
            local = {engine.name: searcher(engine) for engine in alternated(locals_, round_)}
            alternate(local, [local_queries[round_]], order="fixed", after=check, into=timings)
    for name, tally in tallies.items():
        tally.samples_ns = timings.samples.get(name, [])

    # The physical reference: exact numpy search over prebuilt member lists.
    numpy_ns = []
    for query in timed_queries[:500]:
        members = members_of(data, query)
        vector = np.asarray(query.vector, np.float32)
        numpy_ns.append(timed(exact_top, data, members, vector)[0])

    result: dict[str, Any] = {name: tally.summary() for name, tally in tallies.items()}
    result["numpy_exact"] = summarize(numpy_ns)
    edge_p50 = result[edge.name].get("p50")
    for engine in [*full[1:], *locals_]:
        local_p50 = result[engine.name].get("p50")
        result[engine.name]["over_edge_p50"] = (
            local_p50 / edge_p50 if local_p50 is not None and edge_p50 else None
        )
    result["matching_points_per_query"] = float(
        np.mean([len(members_of(data, q)) for q in timed_queries[:100]])
    )
    return result
