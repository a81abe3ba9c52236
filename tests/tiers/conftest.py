"""Fixtures the tier tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade


@pytest.fixture
def queued_store(tmp_path: Path) -> Iterator[SQLStore]:
    """A fresh SQLite tier 2 whose appended turns are queued for tier 3."""
    engine = create_sql_engine(f"sqlite:///{tmp_path / 'memory.db'}")
    upgrade(engine)
    yield SQLStore(engine, queue_embeddings=True)
    engine.dispose()
