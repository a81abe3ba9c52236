"""How much heap the embedded vector index keeps per stored point.

Run from the repository root::

    python benchmarks/bench_index_memory.py                  # 100,000 points
    python benchmarks/bench_index_memory.py --points 100000 --json /tmp/index_memory.json

An :class:`EdgeIndex` in a temporary folder receives ``--points`` points shaped like turns
(384-d unit vectors, the tier-3 payload, ten turns per conversation, 100 users), upserted in
batches of 64 and flushed every ``--step`` points, as the tier-3 backfill does. After each
step this process's heap (``RssAnon`` in ``/proc/self/status``) is read. The slope over the
second half of the points (MB per 1,000 points) is the memory the engine keeps in RAM for its
data (ids, payload indexes, the appendable segment): it grows with what is stored, not with
the requests. ``bench_soak.py`` runs this script to tell that growth apart from a leak in the
server.
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from harness import Run, heap_mb, parser, second_half, table

from memory_chain.tiers.vectors.edge import EdgeIndex
from memory_chain.tiers.vectors.index import TurnPayload, VectorPoint, point_id

DIMENSION = 384
BATCH = 64
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_points(start: int, count: int, rng: np.random.Generator) -> list[VectorPoint]:
    """``count`` turn-shaped points, numbered from ``start``."""
    vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    points = []
    for offset, vector in enumerate(vectors):
        number = start + offset
        conversation = f"conv-{number // 10:06d}"
        turn = number % 10 + 1
        points.append(
            VectorPoint(
                id=point_id(f"user-{number % 100}", conversation, turn),
                vector=vector.tolist(),
                payload=TurnPayload(
                    conversation_id=conversation,
                    user_id=f"user-{number % 100}",
                    turn_number=turn,
                    role="user" if turn % 2 else "assistant",
                    content=f"turn {number}: a sentence of about the length of a chat turn.",
                    timestamp=T0 + timedelta(seconds=number),
                    tokens=20,
                ),
            )
        )
    return points


def measure(points: int, step: int, seed: int = 7) -> dict[str, Any]:
    """Fill an index and sample the heap after every ``step`` points."""
    rng = np.random.default_rng(seed)
    folder = Path(tempfile.mkdtemp(prefix="memory-chain-index-memory-"))
    index = EdgeIndex(folder, dimension=DIMENSION)
    samples: list[dict[str, float]] = []
    try:
        index.open()
        samples.append({"points": 0, "heap_mb": heap_mb()})
        stored = 0
        while stored < points:
            chunk = make_points(stored, min(step, points - stored), rng)
            for begin in range(0, len(chunk), BATCH):
                index.upsert(chunk[begin : begin + BATCH])
            index.flush()
            stored += len(chunk)
            del chunk
            gc.collect()
            samples.append({"points": stored, "heap_mb": heap_mb()})
    finally:
        index.close()
        shutil.rmtree(folder, ignore_errors=True)
    # Over the second half, as bench_soak.py judges the server: the first segments are a
    # fixed cost.
    middle, last = second_half(samples, "points")
    span = last["points"] - middle["points"]
    slope = (last["heap_mb"] - middle["heap_mb"]) / span * 1000 if span else 0.0
    return {"points": points, "samples": samples, "heap_mb_per_1k_points": slope}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__)
    args.add_argument("--points", type=int, default=100_000)
    args.add_argument("--step", type=int, default=5_000, help="points between samples")
    options = args.parse_args(argv)
    result = measure(options.points, options.step)
    if str(options.json) == "-":  # for bench_soak.py: the figures alone, on stdout
        json.dump(result, sys.stdout)
        return 0
    bench = Run("embedded index heap")
    print(bench.header())
    lines = ["embedded index (qdrant-edge) heap by stored points"]
    lines += table(("points", "heap MB"), [(s["points"], s["heap_mb"]) for s in result["samples"]])
    lines.append(f"  slope: {result['heap_mb_per_1k_points']:.2f} MB per 1,000 points")
    bench.finish(lines, options.json, results=result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
