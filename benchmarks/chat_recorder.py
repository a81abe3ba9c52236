"""What the chat benchmark's background threads do, counted without changing the library.

``TurnIndexer.embed_batch`` and ``TurnIndexer.drain``, ``EdgeIndex.flush`` and
``SQLStore.add_summary`` are wrapped on the instances of one ``Services``: per phase of the
run ("part1", "A", "B"...) and per kind of thread (main, backfill, consolidation) they record
the turns embedded, the drains, the index flushes and the summaries stored, with their times,
so that chat requests can be told apart by whether a flush or a consolidation overlapped them.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import numpy as np

from memory_chain.schemas import Summary
from memory_chain.services import Services


class Recorder:
    """What the background threads do, per phase and per thread kind.

    ``TurnIndexer.embed_batch`` and ``TurnIndexer.drain``, ``EdgeIndex.flush`` and
    ``SQLStore.add_summary`` are wrapped on the instances (nothing in the library changes):
    embedded turns, drain calls (a long drain that embeds little waited for the indexer's
    lock), flush windows and stored summaries.
    """

    def __init__(self, services: Services) -> None:
        tier3 = services.vectors
        assert tier3 is not None
        self.phase = "setup"
        self.embedded: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.embed_ms: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        # (start, end, turns embedded) per phase and thread kind
        self.drains: dict[str, dict[str, list[tuple[float, float, int]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.flushes: list[tuple[float, float, str, str]] = []  # (start, end, phase, kind)
        self.summaries: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        indexer = tier3.indexer
        embed_batch, drain = indexer.embed_batch, indexer.drain
        flush = indexer.index.flush
        add_summary = services.store.add_summary

        def counted_embed(batch: Any, **kwargs: Any) -> None:
            t0 = time.perf_counter()
            embed_batch(batch, **kwargs)
            kind = thread_kind()
            self.embedded[self.phase][kind] += len(batch)
            self.embed_ms[self.phase][kind].append((time.perf_counter() - t0) * 1e3)

        def timed_drain(*args: Any, **kwargs: Any) -> int:
            t0 = time.perf_counter()
            done: int = drain(*args, **kwargs)
            self.drains[self.phase][thread_kind()].append((t0, time.perf_counter(), done))
            return done

        def timed_flush() -> None:
            t0 = time.perf_counter()
            flush()
            self.flushes.append((t0, time.perf_counter(), self.phase, thread_kind()))

        def counted_summary(*args: Any, **kwargs: Any) -> Summary | None:
            t0 = time.perf_counter()
            stored: Summary | None = add_summary(*args, **kwargs)
            if stored is not None:
                self.summaries[self.phase][thread_kind()].append((t0, time.perf_counter()))
            return stored

        indexer.embed_batch = counted_embed  # type: ignore[method-assign]
        indexer.drain = timed_drain  # type: ignore[method-assign]
        indexer.index.flush = timed_flush  # type: ignore[method-assign]
        services.store.add_summary = counted_summary  # type: ignore[method-assign]

    def flush_windows(self, phase: str) -> list[tuple[float, float]]:
        return [(start, end) for start, end, p, _ in self.flushes if p == phase]

    def side_effect_windows(self, phase: str) -> list[tuple[float, float]]:
        """What the consolidation thread did besides waiting: stored summaries, drains."""
        windows = list(self.summaries[phase]["consolidation"])
        windows += [(start, end) for start, end, _ in self.drains[phase]["consolidation"]]
        return sorted(windows)

    def phase_figures(self, phase: str) -> dict[str, Any]:
        flushes: dict[str, list[float]] = defaultdict(list)
        for start, end, p, kind in self.flushes:
            if p == phase:
                flushes[kind].append((end - start) * 1e3)
        kinds = {
            kind
            for kinds in (self.embedded[phase], flushes, self.drains[phase], self.summaries[phase])
            for kind, values in kinds.items()
            if values
        }
        figures = {}
        for kind in sorted(kinds):
            drains = self.drains[phase][kind]
            flush_ms = flushes[kind]
            figures[kind] = {
                "embedded_turns": self.embedded[phase][kind],
                "embed_batches": len(self.embed_ms[phase][kind]),
                "embed_ms_total": float(sum(self.embed_ms[phase][kind])),
                "drain_calls": len(drains),
                "drain_ms_max": max(
                    ((end - start) * 1e3 for start, end, _ in drains), default=None
                ),
                "drain_ms_total": float(sum((end - start) * 1e3 for start, end, _ in drains)),
                "flushes": len(flush_ms),
                "flush_ms_p50": float(np.median(flush_ms)) if flush_ms else None,
                "flush_ms_max": max(flush_ms) if flush_ms else None,
                "summaries_stored": len(self.summaries[phase][kind]),
            }
        return figures


def thread_kind() -> str:
    name = threading.current_thread().name
    if name.startswith("memory-chain-backfill"):
        return "backfill"
    if name.startswith("consolidation"):
        return "consolidation"
    if name == "MainThread":
        return "main"
    return name
