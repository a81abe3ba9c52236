"""Fact extraction against LoCoMo's gold observations: precision, recall, seconds per range.

Run from the repository root (the data stays where it is)::

    python benchmarks/bench_extraction.py --quick
    python benchmarks/bench_extraction.py --sessions 3 --json /tmp/extraction.json

Each conversation of a LoCoMo-format file is replayed as speaker A (the user) talking with
speaker B (the assistant), its first ``--sessions`` sessions cut into ranges of
``--range-turns`` turns, as consolidation sends them; the :class:`FactExtractor` reads each
range (facts filed as the server files them, so later ranges see earlier facts as known
ones) with the embedded model behind Ollama's API, or the Ollama at ``--llm-url``.
Before each range's extraction, the range is summarized as consolidation summarizes it (the
same model, the running summary carried over), so a range's consolidation time without
extraction (the summary: before) and with it (summary + extraction: after) come from one run.
Gold: the file's ``observation`` facts about speaker A in those sessions.

Match rule: a gold observation is recalled when some fact extracted from its session has a
cosine of at least *t* with it (all-MiniLM-L6-v2); an extracted fact is correct when it has
*t* with some gold observation of its session. Extracted facts are in the first person: "I",
"my", "me" are rendered as the speaker's name first. *t* is chosen on the first
conversation (best F1 over 0.40-0.80) and precision and recall are reported on the others.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from harness import Run, configure, fmt, parser, summarize
from langchain_core.runnables import Runnable

from memory_chain.catalog import OllamaCatalog
from memory_chain.extraction import ExtractedFact, FactExtractor
from memory_chain.llm import ChatModels, embedded_counters
from memory_chain.schemas import Turn
from memory_chain.summarize import build_summarization_chain, summary_inputs
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings

DATA = Path("../shared/data/locomo/locomo-dev.json")
THRESHOLDS = [round(0.40 + 0.05 * i, 2) for i in range(9)]


@dataclass(frozen=True)
class Settings:
    data: Path = DATA
    conversations: int = 5
    sessions: int = 3
    range_turns: int = 10
    llm_url: str | None = None
    model: str | None = None
    quick: bool = False


QUICK = {"conversations": 2, "sessions": 1}


def first_person_as(name: str, text: str) -> str:
    """A first-person fact about ``name`` in the third person, roughly ("I'm" → "Ana is")."""
    text = re.sub(r"\bI(?:'m| am)\b", f"{name} is", text)
    text = re.sub(r"\bI've\b", f"{name} has", text)
    text = re.sub(r"\bmy\b|\bMy\b", f"{name}'s", text)
    return re.sub(r"\bI\b|\bme\b|\bmyself\b", name, text)


def sessions_of(sample: dict[str, Any], count: int) -> list[tuple[int, list[Turn], list[str]]]:
    """The first ``count`` sessions: their number, turns (speaker A as the user), gold facts."""
    conversation = sample["conversation"]
    speaker = conversation["speaker_a"]
    found = []
    for number in range(1, count + 1):
        raw = conversation.get(f"session_{number}") or []
        turns = []
        for index, item in enumerate(raw, 1):
            text = item["text"]
            if item.get("blip_caption"):
                text += f" [shares a photo: {item['blip_caption']}]"
            role = "user" if item["speaker"] == speaker else "assistant"
            when = datetime(2026, 1, 1, tzinfo=UTC)
            turns.append(Turn(f"session-{number}", index, role, text, when))
        observed = sample["observation"].get(f"session_{number}_observation", {})
        gold = [fact for fact, *_ in observed.get(speaker, [])]
        if turns:
            found.append((number, turns, gold))
    return found


@contextmanager
def served_models(
    llm_url: str | None,
    model: str | None,
    *,
    model_path: Path | None = None,
    window: int | None = None,
) -> Iterator[ChatModels]:
    """The model behind the Ollama API at ``llm_url``, or a model served for the run.

    Both ``chat`` and ``summary`` are one greedy ``ChatOllama``; the catalog gives the model's
    window and token counter (an embedded model's own tokenizer; the 0.5B's for another GGUF,
    whose vocabulary the Qwen2.5 models share). Without ``llm_url``, ``model`` is an embedded
    model's name or a GGUF path (default: the 0.5B), or ``model_path`` a GGUF file served under
    the name ``model``; it is served in this process with a context of ``window`` tokens
    (default: the engine's) and stopped on exit. ``window``, when given, is also the window
    the prompts are built for.
    """
    from memory_chain.local_llm.model import DEFAULT_MODEL, embedded_model
    from memory_chain.local_llm.tokenizer import embedded_model_counter

    server = None
    url = llm_url
    name = model or DEFAULT_MODEL.name
    if url is None:
        from memory_chain.local_llm import OllamaAPIServer, default_models_dir, ensure_local_model
        from memory_chain.local_llm.engine import DEFAULT_N_CTX

        if model_path is None:
            chosen = embedded_model(name)
            model_path = ensure_local_model(default_models_dir(), model=chosen)
            name = chosen.name
        server = OllamaAPIServer(
            model_path, model_name=name, n_threads=2, n_ctx=window or DEFAULT_N_CTX
        )
        url = server.start()
    from langchain_ollama import ChatOllama

    llm = ChatOllama(base_url=url, model=name, temperature=0)
    try:
        yield ChatModels(
            chat=llm,
            summary=llm,
            provider="ollama" if server is None else "embedded",
            base_url=url,
            detail=f"{name} at {url}",
            catalog=OllamaCatalog(
                url,
                default_model=name,
                local_counters={name: embedded_model_counter} | embedded_counters(),
                windows={name: window} if window else None,
            ),
            temperature=0.0,
        )
    finally:
        if server is not None:
            server.stop()


def learn_ranges(
    extractor: FactExtractor,
    user_id: str,
    conversation_id: str,
    turns: Sequence[Turn],
    range_turns: int,
    failed: Callable[[str], None],
    summarizer: Runnable[dict[str, str], str] | None = None,
) -> tuple[list[ExtractedFact], list[float], list[float]]:
    """Extract and file the facts of ``turns``, ``range_turns`` at a time, as consolidation does.

    With a ``summarizer``, each range is first summarized as consolidation summarizes it (the
    running summary carried from range to range), so that a range's consolidation time with
    extraction and without it come from the same run. A range that fails counts as no facts
    (``failed`` is told why). Returns the facts extracted, in order, and the seconds each
    range's extraction and (with a ``summarizer``) summary took.
    """
    found: list[ExtractedFact] = []
    seconds: list[float] = []
    summarizing: list[float] = []
    summary: str | None = None
    for start in range(0, len(turns), range_turns):
        part = turns[start : start + range_turns]
        if summarizer is not None:
            began = time.perf_counter()
            summary = summarizer.invoke(summary_inputs(summary, part))
            summarizing.append(time.perf_counter() - began)
        began = time.perf_counter()
        try:
            facts = extractor.extract(user_id, part)
        except Exception as exc:  # a failed range counts as no facts
            failed(f"turns {part[0].turn_number}-{part[-1].turn_number}: {exc}")
            facts = []
        seconds.append(time.perf_counter() - began)
        # The sessions are replayed, not stored as conversations.
        extractor.file(user_id, conversation_id, facts, stored_only=False)
        found += facts
    return found, seconds, summarizing


def scores(gold: np.ndarray, found: np.ndarray, t: float) -> tuple[int, int, int, int]:
    """(gold recalled, gold, found correct, found) at threshold ``t``."""
    if not len(gold) or not len(found):
        return 0, len(gold), 0, len(found)
    cosine = gold @ found.T
    return (
        int((cosine.max(axis=1) >= t).sum()),
        len(gold),
        int((cosine.max(axis=0) >= t).sum()),
        len(found),
    )


def prf(counts: list[tuple[int, int, int, int]]) -> tuple[float, float, float]:
    recalled, gold, correct, found = (sum(c[i] for c in counts) for i in range(4))
    precision = correct / found if found else 0.0
    recall = recalled / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def locomo_options(found: argparse.ArgumentParser, conversations: str, sessions: str) -> None:
    """The options of a benchmark that replays LoCoMo sessions to a model (this one and
    ``bench_answers_facts.py``): the file, how much of it, the range size and the model."""
    found.add_argument("--data", type=Path, help=f"a LoCoMo-format file (default {DATA})")
    found.add_argument("--conversations", type=int, help=conversations)
    found.add_argument("--sessions", type=int, help=sessions)
    found.add_argument("--range-turns", type=int, help="turns per extraction range (10)")
    found.add_argument("--llm-url", help="an Ollama API (default: the embedded model)")
    found.add_argument(
        "--model",
        help="the model there; without --llm-url an embedded model's name "
        "(qwen2.5-coder:0.5b, qwen2.5-coder:1.5b) or a .gguf path (default: the 0.5B)",
    )


def main() -> None:
    found = parser(__doc__, quick="two conversations, one session each")
    locomo_options(found, "conversations replayed (5)", "sessions of each (3)")
    args = found.parse_args()
    settings = configure(Settings(), args, QUICK)
    run = Run("extraction", packages=("llama-cpp-python", "langchain-ollama"))
    print(run.header())
    samples = json.loads(settings.data.read_text(encoding="utf-8"))[: settings.conversations]
    embeddings = SentenceEmbeddings()
    seconds: list[float] = []
    summarizing: list[float] = []
    per_sample: list[tuple[str, list[tuple[np.ndarray, np.ndarray]]]] = []
    with (
        served_models(settings.llm_url, settings.model) as models,
        tempfile.TemporaryDirectory() as folder,
    ):
        engine = create_sql_engine(f"sqlite:///{folder}/bench.db")
        upgrade(engine)
        facts = FactStore(SQLStore(engine).database, embed=embeddings.embed_documents)
        catalog = models.catalog
        extractor = FactExtractor(models.summary, facts, model=lambda: catalog.resolve(None))
        summarizer = build_summarization_chain(models.summary)
        for sample in samples:
            sample_id, speaker = sample["sample_id"], sample["conversation"]["speaker_a"]
            pairs = []
            for number, turns, gold in sessions_of(sample, settings.sessions):
                label = f"{sample_id} session {number}"
                extracted, took, summary_took = learn_ranges(
                    extractor,
                    sample_id,
                    f"s{number}",
                    turns,
                    settings.range_turns,
                    lambda error, label=label: run.progress(f"{label}: {error}"),
                    summarizer,
                )
                seconds += took
                summarizing += summary_took
                texts = [first_person_as(speaker, f.text) for f in extracted]
                run.progress(f"{label}: {len(texts)} facts, {len(gold)} gold")
                # A session with no facts (or no gold) is an empty matrix: nothing to embed.
                gold_vectors, found_vectors = (
                    np.asarray(embeddings.embed_documents(t)).reshape(len(t), -1)
                    if t
                    else np.zeros((0, 1))
                    for t in (gold, texts)
                )
                pairs.append((gold_vectors, found_vectors))
            per_sample.append((sample_id, pairs))
        engine.dispose()
    tune_id, tune = per_sample[0]
    best = max(THRESHOLDS, key=lambda t: prf([scores(g, f, t) for g, f in tune])[2])
    tuned = prf([scores(g, f, best) for g, f in tune])[2]
    lines = [f"\nthreshold chosen on {tune_id}: {best:.2f} (F1 there {tuned:.2f})"]
    held: list[tuple[int, int, int, int]] = []
    for sample_id, pairs in per_sample[1:]:
        counts = [scores(g, f, best) for g, f in pairs]
        held += counts
        p, r, f1 = prf(counts)
        found = sum(c[3] for c in counts)
        lines.append(f"{sample_id}: precision {p:.2f}, recall {r:.2f}, F1 {f1:.2f} ({found} facts)")
    p, r, f1 = prf(held)
    timing = summarize([s * 1e9 for s in seconds], unit="ms")
    before = summarize([s * 1e9 for s in summarizing], unit="ms")
    after = summarize([(s + e) * 1e9 for s, e in zip(summarizing, seconds, strict=True)])
    lines.append(
        f"held out ({len(per_sample) - 1} conversations): precision {p:.2f}, recall {r:.2f}, "
        f"F1 {f1:.2f}"
    )
    lines.append(
        f"seconds per range ({timing['n']} ranges of up to {settings.range_turns} turns): "
        f"p50 {fmt(timing.get('p50', 0) / 1000)}, mean {fmt(timing.get('mean', 0) / 1000)}, "
        f"max {fmt(timing.get('max', 0) / 1000)}"
    )
    lines.append(
        "consolidation per range, the LLM's part (same ranges, same run): summary alone "
        f"(before) p50 {fmt(before.get('p50', 0) / 1000)} s, summary + extraction (after) "
        f"p50 {fmt(after.get('p50', 0) / 1000)} s, ratio of p50s "
        f"{fmt(after.get('p50', 0) / before['p50'] if before.get('p50') else None)}"
    )
    results = {
        "threshold": best,
        "precision": p,
        "recall": r,
        "f1": f1,
        "range_ms": timing,
        "consolidation_before_ms": before,
        "consolidation_after_ms": after,
    }
    run.finish(lines, args.json, settings=settings, results=results)


if __name__ == "__main__":
    sys.exit(main())
