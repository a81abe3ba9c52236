"""Prometheus metrics of this process: what the tiers, the models and consolidation measure.

A leaf module (it imports nothing else of memory_chain), so any layer may record into it:
the tiers time their own searches and embeddings, the chat models report through a LangChain
callback, consolidation counts its runs, the API times requests. The metrics live in
:data:`REGISTRY`, a registry of memory_chain's own (not prometheus_client's global one), and
count for the whole process. Gauges of stored data (turns, points, queues) are read when
``/metrics`` is scraped, by :mod:`memory_chain.api.metrics`.

Recording costs about a microsecond and does no I/O; nothing is sent anywhere: a Prometheus
server scrapes ``/metrics``.

Example:
    >>> from memory_chain import metrics
    >>> with metrics.retrieval_timer("tier2"):
    ...     pass  # the keyword search
    >>> b"memory_chain_retrieval_duration_seconds" in metrics.exposition(metrics.REGISTRY)
    True
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Literal
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.context_managers import Timer
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

#: memory_chain's metrics (process-wide).
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)

#: Latency buckets from 0.1 ms (tier 1) to 2 min (a slow LLM), in seconds.
_BUCKETS = (
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip

REQUEST_SECONDS = Histogram(
    "memory_chain_http_request_duration_seconds",
    "HTTP request latency, by route template, method and status (streamed replies: until the "
    "last byte).",
    ["method", "route", "status"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
RETRIEVAL_SECONDS = Histogram(
    "memory_chain_retrieval_duration_seconds",
    "Latency of one memory read per tier: tier1 (recent turns), tier2 (keyword search), "
    "tier3 (vector search, without the query embedding), facts (user-facts search).",
    ["tier"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
TIER1_LOOKUPS = Counter(
    "memory_chain_tier1_lookups",
    "Tier-1 cache lookups, by result (a miss is rebuilt from SQL).",
    ["result"],
    registry=REGISTRY,
)
FACT_MATRIX_LOOKUPS = Counter(
    "memory_chain_fact_matrix_lookups",
    "Reads of a user's current fact vectors, by result: hit (the process's copy is the "
    "database's version) or miss (read from SQL).",
    ["result"],
    registry=REGISTRY,
)
FACTS_REFUSED = Counter(
    "memory_chain_facts_refused",
    "Facts not added because their user had as many current facts as memory keeps "
    "(memory_max_facts_per_user), by origin: api (REST, MCP, the store), explicit (a chat's "
    '"remember ..."), extracted (learnt at consolidation), import.',
    ["origin"],
    registry=REGISTRY,
)
EMBEDDING_SECONDS = Histogram(
    "memory_chain_embedding_duration_seconds",
    "Embedding latency per call: query (one text, on the request path) or documents (a "
    "batch, in the tier-3 backfill).",
    ["kind"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
EMBEDDED_TEXTS = Counter(
    "memory_chain_embedded_texts",
    "Texts embedded, by kind.",
    ["kind"],
    registry=REGISTRY,
)
LLM_SECONDS = Histogram(
    "memory_chain_llm_duration_seconds",
    "Chat model latency per call, start to last token: chat (replies and background tasks) "
    "or summary (consolidation), by outcome.",
    ["model_role", "outcome"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
CONSOLIDATIONS = Counter(
    "memory_chain_consolidations",
    "Consolidation runs by outcome: stored (a summary), nothing (nothing new to summarize) "
    "or failed.",
    ["outcome"],
    registry=REGISTRY,
)
CONSOLIDATION_SECONDS = Histogram(
    "memory_chain_consolidation_duration_seconds",
    "Consolidation latency per run (summaries included).",
    buckets=_BUCKETS,
    registry=REGISTRY,
)

RetrievalTier = Literal["tier1", "tier2", "tier3", "facts"]
ModelRole = Literal["chat", "summary"]


def retrieval_timer(tier: RetrievalTier) -> Timer:
    """Time one read of ``tier`` (a context manager or decorator)."""
    return RETRIEVAL_SECONDS.labels(tier).time()


def tier1_lookup(*, hit: bool) -> None:
    """Count a tier-1 cache lookup."""
    TIER1_LOOKUPS.labels("hit" if hit else "miss").inc()


def embedding_timer(kind: Literal["query", "documents"], texts: int) -> Timer:
    """Time one embedding call of ``texts`` texts."""
    EMBEDDED_TEXTS.labels(kind).inc(texts)
    return EMBEDDING_SECONDS.labels(kind).time()


def observe_request(method: str, route: str, status: int, seconds: float) -> None:
    """Record one HTTP request."""
    REQUEST_SECONDS.labels(method, route, str(status)).observe(seconds)


def observe_consolidation(outcome: Literal["stored", "nothing", "failed"], seconds: float) -> None:
    """Record one consolidation run."""
    CONSOLIDATIONS.labels(outcome).inc()
    CONSOLIDATION_SECONDS.observe(seconds)


class LLMTimer(BaseCallbackHandler):
    """A LangChain callback that times a chat model's calls into :data:`LLM_SECONDS`.

    Pass it in the model's ``callbacks``; it sees every call, streamed or not, whichever
    chain makes it.

    Args:
        model_role: ``"chat"`` or ``"summary"``.

    Example:
        >>> from langchain_ollama import ChatOllama
        >>> chat = ChatOllama(model="llama3.2", callbacks=[LLMTimer("chat")])
    """

    #: Called in the model's own thread or event loop: recording is cheap and must not lag.
    run_inline = True

    def __init__(self, model_role: ModelRole) -> None:
        self.model_role = model_role
        self._started: dict[UUID, float] = {}

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        """A call started."""
        self._started[run_id] = time.perf_counter()

    def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """A (completion-style) call started."""
        self._started[run_id] = time.perf_counter()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """A call ended."""
        self._finish(run_id, "ok")

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A call failed."""
        self._finish(run_id, "error")

    def _finish(self, run_id: UUID, outcome: str) -> None:
        started = self._started.pop(run_id, None)
        if started is not None:
            LLM_SECONDS.labels(self.model_role, outcome).observe(time.perf_counter() - started)


class Combined:
    """Several collectors exposed as one (``REGISTRY`` and a server's gauges).

    Args:
        collectors: What to expose, in order.
    """

    def __init__(self, *collectors: Collector) -> None:
        self.collectors = collectors

    def collect(self) -> Iterable[Any]:
        """Every collector's metrics."""
        for collector in self.collectors:
            yield from collector.collect()


def exposition(collector: Collector) -> bytes:
    """``collector``'s metrics in Prometheus' text format (version 0.0.4)."""
    return generate_latest(collector)


#: The content type of :func:`exposition`'s output.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
