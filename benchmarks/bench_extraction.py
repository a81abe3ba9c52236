"""Fact extraction against LoCoMo's gold observations: precision, recall, seconds per range.

Run from the repository root (the data stays where it is)::

    python benchmarks/bench_extraction.py --quick
    python benchmarks/bench_extraction.py --sessions 3 --json /tmp/extraction.json
    python benchmarks/bench_extraction.py --sessions 1 \\
        --models qwen2.5-coder:0.5b,qwen2.5-coder:1.5b --json /tmp/extraction.json
    python benchmarks/bench_extraction.py --rescore /tmp/extraction.json   # no model

Each conversation of a LoCoMo-format file is replayed as speaker A (the user) talking with
speaker B (the assistant), its first ``--sessions`` sessions cut into ranges of
``--range-turns`` turns, as consolidation sends them; the :class:`FactExtractor` reads each
range (facts filed as the server files them, so later ranges see earlier facts as known
ones) with the embedded model behind Ollama's API, or the Ollama at ``--llm-url``.
Before each range's extraction, the range is summarized as consolidation summarizes it (the
same model, the running summary carried over), so a range's consolidation time without
extraction (the summary: before) and with it (summary + extraction: after) come from one run.
Gold: the file's ``observation`` facts about speaker A in those sessions.

Match rule (:mod:`memory_chain.eval.fact_match`): a fact and an observation match when their
all-MiniLM-L6-v2 cosine is at least *t*, one-to-one (a maximum matching per session: ten
copies of one right fact count once, one broad fact recalls one observation). Extracted
facts are in the first person: "I", "my", "me" are rendered as the speaker's name first.
*t* is chosen leave-one-conversation-out, as the lowest at which at most 5 % of the other
conversations' facts match a third conversation's observations (someone else's life: a
match there is chance), and each conversation is scored at the *t* its others chose. The
earlier many-to-one rule at the same *t* is printed beside it. With ``--models``, each model
reads the same sessions in turn, in one run; the facts found are in the JSON, and
``--rescore FILE`` scores a run's JSON again without a model.

With ``--calls combined`` (or ``both``, in the same run), each model reads the sessions with
the combined call (:mod:`combined_call`: one call per range for its summary and its facts,
instead of the summary, then the facts), as ``"<model> combined"``: the same scores, the
seconds of that one call per range (beside the two calls' with ``both``), and how many calls
gave no summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from combined_call import CombinedExtractor
from harness import Run, configure, fmt, parser, summarize, table
from langchain_core.runnables import Runnable

from memory_chain.catalog import OllamaCatalog
from memory_chain.eval.fact_match import Conversation, Counts, Embed, Scores, Session, held_out
from memory_chain.extraction import ExtractedFact, FactExtractor
from memory_chain.llm import ChatModels, embedded_counters
from memory_chain.schemas import Turn
from memory_chain.summarize import build_summarization_chain, summary_inputs
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings

DATA = Path("../shared/data/locomo/locomo-dev.json")


@dataclass(frozen=True)
class Settings:
    data: Path = DATA
    conversations: int = 5
    sessions: int = 3
    range_turns: int = 10
    llm_url: str | None = None
    model: str | None = None
    models: str | None = None
    calls: str = "separate"
    rescore: Path | None = None
    quick: bool = False


QUICK = {"conversations": 3, "sessions": 1}


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
    outcomes: Counter[str] | None = None,
) -> tuple[list[ExtractedFact], list[float], list[float]]:
    """Extract and file the facts of ``turns``, ``range_turns`` at a time, as consolidation does.

    With a ``summarizer``, each range is first summarized as consolidation summarizes it (the
    running summary carried from range to range), so that a range's consolidation time with
    extraction and without it come from the same run. A range that fails counts as no facts
    (``failed`` is told why). Returns the facts extracted, in order, and the seconds each
    range's extraction and (with a ``summarizer``) summary took; ``outcomes``, when given,
    counts what filing did with each fact (the rulebook's actions: ``added``, ``same``, ...).
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
        changes = extractor.file(user_id, conversation_id, facts, stored_only=False)
        if outcomes is not None:
            outcomes.update(change.action for change in changes)
        found += facts
    return found, seconds, summarizing


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


@dataclass
class Extracted:
    """What one model extracted from the sessions, and how long its ranges took."""

    model: str
    conversations: list[Conversation]
    seconds: list[float]
    summarizing: list[float]
    summaries: list[str | None] = field(default_factory=list)


def extract(settings: Settings, model: str | None, run: Run, combined: bool = False) -> Extracted:
    """Replay the sessions to ``model`` (served for the run, or at ``--llm-url``).

    With ``combined``, one call per range gives its summary and its facts
    (:class:`~combined_call.CombinedExtractor`), instead of the summary, then the facts.
    """
    samples = json.loads(settings.data.read_text(encoding="utf-8"))[: settings.conversations]
    embeddings = SentenceEmbeddings()
    done = Extracted(f"{model or 'default'}{' combined' if combined else ''}", [], [], [])
    with (
        served_models(settings.llm_url, model) as models,
        tempfile.TemporaryDirectory() as folder,
    ):
        engine = create_sql_engine(f"sqlite:///{folder}/bench.db")
        upgrade(engine)
        facts = FactStore(SQLStore(engine).database, embed=embeddings.embed_documents)
        catalog = models.catalog
        maker = CombinedExtractor if combined else FactExtractor
        extractor = maker(models.summary, facts, model=lambda: catalog.resolve(None))
        summarizer = None if combined else build_summarization_chain(models.summary)
        for sample in samples:
            sample_id, speaker = sample["sample_id"], sample["conversation"]["speaker_a"]
            sessions = []
            for number, turns, gold in sessions_of(sample, settings.sessions):
                label = f"{done.model} {sample_id} session {number}"
                if isinstance(extractor, CombinedExtractor):
                    # Each session is a conversation of its own (f"s{number}"): its running
                    # summary starts afresh, as learn_ranges starts the two calls' summary.
                    extractor.summary = None
                extracted, took, summary_took = learn_ranges(
                    extractor,
                    sample_id,
                    f"s{number}",
                    turns,
                    settings.range_turns,
                    lambda error, label=label: run.progress(f"{label}: {error}"),
                    summarizer,
                )
                done.seconds += took
                done.summarizing += summary_took
                run.progress(f"{label}: {len(extracted)} facts, {len(gold)} gold")
                sessions.append(Session(tuple(gold), tuple(fact.text for fact in extracted)))
            done.conversations.append(Conversation(sample_id, speaker, tuple(sessions)))
        if isinstance(extractor, CombinedExtractor):
            done.summaries = extractor.summaries
        engine.dispose()
    return done


def score(done: Extracted, embed: Embed) -> tuple[list[str], dict[str, Any]]:
    """The held-out folds of one model's facts: report lines and figures."""
    folds = held_out(done.conversations, embed)
    rows = []
    for fold in folds:
        one = Scores.of([fold.counts])
        rows.append(
            [fold.conversation, fold.threshold, fold.counts.gold, fold.counts.found, *one.f()]
        )
    pooled = Scores.of([fold.counts for fold in folds])
    gold = sum(fold.counts.gold for fold in folds)
    found = sum(fold.counts.found for fold in folds)
    recalled = sum(fold.lenient[0] for fold in folds)
    correct = sum(fold.lenient[1] for fold in folds)
    loose = Scores.of([Counts(recalled, gold, found)]).recall, correct / found if found else 0.0
    lines = [f"\n{done.model}: held out, each conversation at the t chosen on the others"]
    lines += table(["conversation", "t", "gold", "facts", "P", "R", "F1"], rows)
    lines.append(
        f"  pooled one-to-one: P {pooled.precision:.2f}, R {pooled.recall:.2f}, "
        f"F1 {pooled.f1:.2f} ({found} facts, {gold} observations); many-to-one at the same t: "
        f"P {loose[1]:.2f}, R {loose[0]:.2f}"
    )
    figures: dict[str, Any] = {
        "folds": [
            {"conversation": f.conversation, "threshold": f.threshold, "counts": asdict(f.counts)}
            for f in folds
        ],
        "precision": pooled.precision,
        "recall": pooled.recall,
        "f1": pooled.f1,
        "lenient": {"precision": loose[1], "recall": loose[0]},
        "conversations": [asdict(c) for c in done.conversations],
    }
    if done.seconds and not done.summarizing:  # the combined call: one call per range
        timing = summarize([s * 1e9 for s in done.seconds], unit="ms")
        words = [len(s.split()) for s in done.summaries if s]
        missing = sum(1 for s in done.summaries if not s)
        lines.append(
            f"  seconds per range ({timing['n']} ranges), summary and facts in one call: p50 "
            f"{fmt(timing.get('p50', 0) / 1000)}, max {fmt(timing.get('max', 0) / 1000)}; "
            f"{missing} of {len(done.summaries)} calls gave no summary; summary words p50 "
            f"{statistics.median(words) if words else 0}"
        )
        figures |= {
            "range_ms": timing,
            "consolidation_after_ms": timing,
            "summaries": done.summaries,
            "summaries_missing": missing,
        }
    elif done.seconds:
        timing = summarize([s * 1e9 for s in done.seconds], unit="ms")
        before = summarize([s * 1e9 for s in done.summarizing], unit="ms")
        after = summarize(
            [(s + e) * 1e9 for s, e in zip(done.summarizing, done.seconds, strict=True)]
        )
        lines.append(
            f"  seconds per range ({timing['n']} ranges of up to 10 turns): extraction p50 "
            f"{fmt(timing.get('p50', 0) / 1000)}, max {fmt(timing.get('max', 0) / 1000)}; "
            f"summary alone p50 {fmt(before.get('p50', 0) / 1000)}, summary + extraction p50 "
            f"{fmt(after.get('p50', 0) / 1000)}"
        )
        figures |= {
            "range_ms": timing,
            "consolidation_before_ms": before,
            "consolidation_after_ms": after,
        }
    return lines, figures


def rescored(path: Path) -> list[Extracted]:
    """The facts of an earlier run's JSON (``--json``), to score again without a model."""
    found = json.loads(path.read_text(encoding="utf-8"))["results"]["models"]
    return [
        Extracted(
            name,
            [
                Conversation(
                    c["name"],
                    c["speaker"],
                    tuple(Session(tuple(s["gold"]), tuple(s["found"])) for s in c["sessions"]),
                )
                for c in figures["conversations"]
            ],
            [],
            [],
        )
        for name, figures in found.items()
    ]


def main() -> None:
    found = parser(__doc__, quick="three conversations, one session each")
    locomo_options(found, "conversations replayed (5)", "sessions of each (3)")
    found.add_argument("--models", help="comma-separated models, each reading the same sessions")
    found.add_argument(
        "--calls",
        choices=["separate", "combined", "both"],
        help="a range's summary and facts in two calls (separate, the default), one "
        "(combined), or each in turn (both)",
    )
    found.add_argument("--rescore", type=Path, help="score an earlier run's --json, no model")
    args = found.parse_args()
    settings = configure(Settings(), args, QUICK)
    run = Run("extraction", packages=("llama-cpp-python", "langchain-ollama"))
    print(run.header())
    if settings.rescore is not None:
        runs = rescored(settings.rescore)
    else:
        names = settings.models.split(",") if settings.models else [settings.model]
        modes = {"separate": (False,), "combined": (True,), "both": (False, True)}[settings.calls]
        runs = [extract(settings, name, run, combined) for name in names for combined in modes]
    embed = SentenceEmbeddings().embed_documents
    lines: list[str] = []
    results: dict[str, Any] = {"models": {}}
    for done in runs:
        more, figures = score(done, embed)
        lines += more
        results["models"][done.model] = figures
    run.finish(lines, args.json, settings=settings, results=results)


if __name__ == "__main__":
    sys.exit(main())
