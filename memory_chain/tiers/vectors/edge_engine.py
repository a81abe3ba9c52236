"""The qdrant-edge engine as :class:`~.edge.EdgeIndex` uses it: shard settings, filters, errors.

qdrant-edge-py is beta and its API drifts between releases, so its types stay in two modules:
this one, which imports it (saying what to do where no wheel exists) and holds what is
written in its terms once (the shard's configuration and payload indexes, our filters as its
filters, its errors as ours), and :mod:`.edge`, the index over it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from memory_chain.errors import VectorStoreError, VectorStoreUnavailableError
from memory_chain.tiers.vectors.index import HasIds, Match, VectorFilter, filter_conditions

try:
    import qdrant_edge as qe
except ImportError as exc:  # pragma: no cover - a declared dependency, but wheels are per-platform
    raise ImportError(
        "EdgeIndex needs qdrant-edge-py: pip install 'qdrant-edge-py==0.9.*'. Where no wheel "
        "exists for this platform, use QdrantIndex with QdrantClient(path=...) or a server"
    ) from exc

__all__ = [
    "engine_errors",
    "ensure_payload_indexes",
    "held_elsewhere",
    "qe",
    "shard_config",
    "to_filter",
]


def shard_config(dimension: int, search_threads: int | None) -> qe.EdgeConfig:
    """A shard of cosine vectors of ``dimension`` that never builds HNSW (exact search)."""
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine),
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=0),
        max_search_threads=search_threads,
    )


def _payload_indexes() -> dict[str, qe.PayloadSchemaType | qe.KeywordIndexParams]:
    return {
        # Tenant layout keeps each conversation's points together on disk.
        "conversation_id": qe.KeywordIndexParams(is_tenant=True),
        "user_id": qe.PayloadSchemaType.Keyword,
        "role": qe.PayloadSchemaType.Keyword,
        "tags": qe.PayloadSchemaType.Keyword,
        "timestamp": qe.PayloadSchemaType.Datetime,
    }


def ensure_payload_indexes(shard: qe.EdgeShard) -> None:
    """Create the payload indexes the filters use, where the shard lacks them."""
    existing = shard.info().payload_schema
    for field, schema in _payload_indexes().items():
        if field not in existing:
            shard.update(qe.UpdateOperation.create_field_index(field, schema))


def to_filter(where: VectorFilter | None) -> qe.Filter | None:
    """``where`` as the engine's filter (``None`` when it selects every point)."""
    must: list[qe.ConditionType] = []
    for condition in filter_conditions(where):
        if isinstance(condition, Match):
            values = list(condition.values)
            match = qe.MatchValue(values[0]) if len(values) == 1 else qe.MatchAny(values)
            must.append(qe.FieldCondition(condition.key, match=match))
        elif isinstance(condition, HasIds):
            must.append(qe.HasIdCondition(set(condition.ids)))
        else:
            window = qe.RangeDateTime(
                gte=condition.gte.isoformat() if condition.gte else None,
                lte=condition.lte.isoformat() if condition.lte else None,
            )
            must.append(qe.FieldCondition(condition.key, range=window))
    return qe.Filter(must=must) if must else None


def held_elsewhere(exc: Exception) -> bool:
    """Whether the engine refused a folder because another process holds it."""
    return "WouldBlock" in str(exc)


@contextlib.contextmanager
def engine_errors(folder: Path, action: str) -> Iterator[None]:
    """Map the engine's bare ``Exception``s (and file errors) raised in the block to ours.

    Args:
        folder: The shard's folder, as messages name it.
        action: What the block does, as in "cannot ``action`` the vector index ...".

    Raises:
        VectorStoreUnavailableError: Another process holds the folder.
        VectorStoreError: The engine or the file system failed.
    """
    try:
        yield
    except OSError as exc:
        raise VectorStoreError(f"cannot {action} the vector index {folder}: {exc}") from exc
    except Exception as exc:
        # The engine raises plain Exception; other types (TypeError, ...) are bugs here.
        if type(exc) is not Exception:
            raise
        if held_elsewhere(exc):
            raise VectorStoreUnavailableError(
                f"the vector index folder {folder} is held by another process "
                "(qdrant-edge allows one process per folder): stop that process, give this "
                "one its own data folder, or share vectors between processes with "
                "vector_backend=pgvector (or a Qdrant server)"
            ) from exc
        raise VectorStoreError(
            f"qdrant-edge could not {action} the vector index {folder}: {exc}"
        ) from exc
