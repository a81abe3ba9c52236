"""What consolidation learns from each range of LoCoMo's conversations: summaries and facts.

Fact-augmented keys (``bench_recall_embedders.py``) index a turn also under its range's
summary and facts; measuring them needs those for the conversations asked about, and a
small local model takes seconds per range. This module computes them once, as consolidation
does (ranges of ``--range-turns`` consecutive turns, the first speaker as the user, the range
summary from the summarization chain and the facts from the :class:`FactExtractor`, earlier
ranges' facts known to later ones), and keeps them in a JSON cache that later runs read.

The cache is written after every range, so a run that is stopped keeps what it did and a
second run resumes where it stopped::

    python benchmarks/recall_consolidation.py --cache /tmp/locomo-consolidated.json

The cache maps a conversation id to its ranges, each ``{"dia_ids", "summary", "facts",
"seconds"}``; conversations are done smallest first, so a partial cache holds whole ones.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_extraction import DATA, served_models

from memory_chain.eval.locomo_data import LocomoSample, load_locomo
from memory_chain.extraction import FactExtractor
from memory_chain.schemas import Turn
from memory_chain.summarize import build_summarization_chain, summary_inputs
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings

#: Turns per range: consolidation's default message threshold.
RANGE_TURNS = 10


def read_cache(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The cache's ranges per conversation (empty when there is no cache yet)."""
    if not path.exists():
        return {}
    found: dict[str, list[dict[str, Any]]] = json.loads(path.read_text(encoding="utf-8"))
    return found


def ranges_of(sample: LocomoSample, size: int) -> list[list[Turn]]:
    """The sample's turns as consolidation reads them, ``size`` at a time (dia_id as tag)."""
    user = sample.speakers[0]
    turns = [
        Turn(
            sample.sample_id,
            number,
            "user" if turn.speaker == user else "assistant",
            turn.content,
            turn.timestamp,
        )
        for number, turn in enumerate(sample.turns, start=1)
    ]
    return [turns[start : start + size] for start in range(0, len(turns), size)]


def main() -> None:
    found = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    found.add_argument("--data", type=Path, default=DATA)
    found.add_argument("--cache", type=Path, required=True)
    found.add_argument("--range-turns", type=int, default=RANGE_TURNS)
    found.add_argument("--llm-url", help="an Ollama API (default: the embedded model)")
    found.add_argument("--model", help="the model there")
    args = found.parse_args()
    samples, _ = load_locomo(args.data)
    samples.sort(key=lambda sample: len(sample.turns))
    cache = read_cache(args.cache)
    with (
        served_models(args.llm_url, args.model) as models,
        tempfile.TemporaryDirectory() as folder,
    ):
        engine = create_sql_engine(f"sqlite:///{folder}/facts.db")
        upgrade(engine)
        facts = FactStore(SQLStore(engine).database, embed=SentenceEmbeddings().embed_documents)
        catalog = models.catalog
        extractor = FactExtractor(models.summary, facts, model=lambda: catalog.resolve(None))
        summarizer = build_summarization_chain(models.summary)
        for sample in samples:
            done = cache.setdefault(sample.sample_id, [])
            ranges = ranges_of(sample, args.range_turns)
            dia = [turn.dia_id for turn in sample.turns]
            for index, turns in enumerate(ranges):
                if index < len(done):
                    continue
                began = time.perf_counter()
                summary = str(summarizer.invoke(summary_inputs(None, turns))).strip()
                try:
                    learnt = extractor.extract(sample.sample_id, turns)
                except Exception as exc:  # a failed range counts as no facts, as in the server
                    print(f"{sample.sample_id} range {index}: no facts: {exc}", file=sys.stderr)
                    learnt = []
                extractor.file(sample.sample_id, sample.sample_id, learnt, stored_only=False)
                first, last = turns[0].turn_number, turns[-1].turn_number
                done.append(
                    {
                        "dia_ids": dia[first - 1 : last],
                        "summary": summary,
                        "facts": [fact.text for fact in learnt],
                        "seconds": round(time.perf_counter() - began, 2),
                    }
                )
                args.cache.write_text(json.dumps(cache, indent=1), encoding="utf-8")
                print(
                    f"{sample.sample_id} range {index + 1}/{len(ranges)}: "
                    f"{len(learnt)} facts, {done[-1]['seconds']} s",
                    file=sys.stderr,
                    flush=True,
                )
        engine.dispose()


if __name__ == "__main__":
    sys.exit(main())
