"""Where a server's GIL time goes: py-spy's ``--gil`` samples summed by what the code does.

``bench_load.py --py-spy FILE`` records the server with ``py-spy record --gil --threads
--format raw`` (collapsed stacks of the thread holding the GIL, 100 samples a second) and
prints this summary. Each sample is put in the first category whose pattern matches a frame,
looking from the innermost frame outwards, so a SQL query made by retrieval counts as SQL and
the Python of retrieval itself as "retrieval". Under CPU contention every figure grows (a
thread the OS has descheduled while it holds the GIL still holds it): compare runs made one
after the other, and shares rather than milliseconds across machines or loads.

Run on a saved profile::

    python benchmarks/gil_profile.py /tmp/gil-sqlite.txt --requests 2000
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness import table

#: (category, pattern of a frame "function (file:line)"), the first match from the leaf out.
CATEGORIES = [
    (
        "embedding",
        r"tiers/vectors/(onnx_)?embeddings|sentence_transformers|torch/|transformers/|tokenizers",
    ),
    ("index flush", r"EdgeIndex\.flush"),
    ("vector search", r"memory_chain/tiers/vectors/(edge|timed|facts|tier|index)\.py"),
    ("SQL", r"sqlalchemy/|sqlite3|psycopg|memory_chain/tiers/sql/"),
    ("thread hops", r"concurrent/futures/|threading\.py|queue\.py|anyio/to_thread|run_in_executor"),
    ("LLM client", r"langchain_ollama/|ollama/|httpx/|httpcore/|anyio/"),
    ("consolidation", r"memory_chain/(consolidation|summarize)\.py"),
    ("retrieval", r"memory_chain/retrieval/"),
    ("LangChain runnables", r"langchain_core/"),
    ("memory_chain other", r"memory_chain/"),
    ("FastAPI, Starlette, pydantic", r"fastapi/|starlette/|pydantic|langserve/"),
    ("uvicorn, event loop", r"uvicorn/|asyncio/|uvloop|httptools|h11/"),
]
_THREAD = re.compile(r"^thread \(\d+\): (.*?)[_\d]*$")


def categorize(frames: Sequence[str]) -> str:
    """The category of one sample's stack (outermost frame first)."""
    for frame in reversed(frames):
        for name, pattern in CATEGORIES:
            if re.search(pattern, frame):
                return name
    return "other"


def summarize(path: Path) -> tuple[Counter[str], Counter[str], int]:
    """Samples by category and by thread name (numbers dropped), and the total."""
    categories: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        samples = int(count)
        total += samples
        categories[categorize(frames[1:])] += samples
        thread = _THREAD.match(frames[0])
        threads[thread.group(1) if thread else frames[0]] += samples
    return categories, threads, total


def report(path: Path, requests: int, rate: int = 100) -> list[str]:
    """The summary as lines: GIL ms per request by category and by thread."""
    categories, threads, total = summarize(path)
    per_request = 1000.0 / rate / max(requests, 1)
    lines = [
        f"GIL held {total / rate:.1f} s in {requests} requests: "
        f"{total * per_request:.1f} ms per request ({path.name})",
    ]
    by_code = [
        (name, round(samples * per_request, 2), f"{100 * samples / max(total, 1):.1f}%")
        for name, samples in categories.most_common()
    ]
    lines += table(("by what the code does", "ms/req", "share"), by_code)
    by_thread = [(name, round(n * per_request, 2)) for name, n in threads.most_common(8)]
    return lines + table(("by thread", "ms/req"), by_thread)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path, help="py-spy raw output (collapsed stacks)")
    parser.add_argument("--requests", type=int, required=True, help="requests in the profile")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    args = parser.parse_args(argv)
    print("\n".join(report(args.profile, args.requests, args.rate)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
