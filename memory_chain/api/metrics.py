"""``GET /metrics``: the process's metrics in Prometheus' text format, and request timing.

What the tiers, the models and consolidation record lives in :mod:`memory_chain.metrics`;
this module adds the HTTP side (:class:`RequestMetrics`, latency by route template, method
and status) and the gauges of what is stored, read at each scrape (:class:`StoredData`:
conversations, turns and summaries in SQL, points per tier-3 collection, turns waiting for
tier 3, consolidations waiting, conversations in tier 1).

``/metrics`` is protected like the data endpoints: with keys configured it takes any API key
or ``metrics_api_key`` (a key for the Prometheus server alone); with none, it is open.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_chain import __version__, metrics
from memory_chain.api.deps import ServicesDep, metrics_access
from memory_chain.errors import MemoryChainError
from memory_chain.services import Services

logger = logging.getLogger(__name__)

router = APIRouter(tags=["service"])


class StoredData:
    """Gauges of the stored data, read when collected (a few ``COUNT`` queries).

    A store that cannot answer leaves its gauges out of that scrape (and says so in the
    log); the scrape itself still succeeds.

    Args:
        services: The running services.
    """

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        """The gauges."""
        services = self.services
        info = InfoMetricFamily("memory_chain", "What this server runs on.")
        info.add_metric(
            [],
            {
                "version": __version__,
                "tier2": services.engine.dialect.name,
                "tier3": services.vectors.backend if services.vectors else "disabled",
                "llm": services.models.provider if services.models else "none",
            },
        )
        yield info
        yield _gauge(
            "memory_chain_tier1_conversations",
            "Conversations cached in tier 1.",
            len(services.buffer),
        )
        consolidation = services.consolidation
        yield _gauge(
            "memory_chain_consolidations_waiting",
            "Consolidations scheduled and not finished (queued or running).",
            consolidation.waiting if consolidation is not None else 0,
        )
        try:
            counts = services.store.counts()
            queued = services.queued_turns()
        except MemoryChainError as exc:
            logger.warning("metrics: tier 2 did not answer: %s", exc)
        else:
            stored = GaugeMetricFamily(
                "memory_chain_stored_rows", "Rows stored in tier 2, by table.", labels=["table"]
            )
            for table, count in counts.items():
                stored.add_metric([table], count)
            yield stored
            yield _gauge(
                "memory_chain_tier3_queue_turns",
                "Stored turns waiting to be embedded into tier 3.",
                queued,
            )
        yield from self._points()

    def _points(self) -> Iterator[Metric]:
        vectors = self.services.vectors
        if vectors is None or not vectors.is_open:
            return
        points = GaugeMetricFamily(
            "memory_chain_vector_points", "Points in tier 3, by collection.", labels=["collection"]
        )
        settings = self.services.settings
        names = {"turns": settings.qdrant_collection_conversations}
        try:
            counts = vectors.point_counts()
        except MemoryChainError as exc:
            logger.warning("metrics: tier 3 did not answer: %s", exc)
            return
        for collection, count in counts.items():
            points.add_metric([names[collection]], count)
        yield points


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text format 0.0.4."},
        401: {"description": "A key is configured and none (or a wrong one) was sent."},
    },
)
def get_metrics(
    services: ServicesDep, _access: Annotated[None, Depends(metrics_access)]
) -> Response:
    """Metrics of this process in Prometheus' text format (see docs in the README)."""
    body = metrics.exposition(metrics.Combined(metrics.REGISTRY, StoredData(services)))
    return Response(body, media_type=metrics.CONTENT_TYPE)


class RequestMetrics:
    """ASGI middleware: time every HTTP request, by route template, method and status.

    The route is the matched route's path template (``/v1/conversations/{conversation_id}``),
    so the label set stays small; a request no route matched is ``"unmatched"``. A streamed
    reply is timed to its last byte.

    Args:
        app: The wrapped app.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on and record it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before the response started

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            metrics.observe_request(scope["method"], route, status, time.perf_counter() - started)
