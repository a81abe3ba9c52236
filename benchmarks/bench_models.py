"""The embedded models side by side: consolidation per range, chat latency, resident memory.

Run from the repository root (the data stays where it is)::

    python benchmarks/bench_models.py --quick
    python benchmarks/bench_models.py --json /tmp/models.json

Each model (``--models``: embedded names or GGUF paths; default the 0.5B and the 1.5B) runs
in its own server process (``python -m memory_chain.local_llm.ollama_api``, 2 threads), both
loaded for the whole run; the models take turns on every input (the order rotated), so both
see the same machine load. Measured, for each model:

- **consolidation seconds per range**: what consolidation asks the model for one range of
  ``--range-turns`` turns of a LoCoMo session (speaker A as the user): the summary (the
  summarization chain) and the facts (:class:`FactExtractor`, its grammar-constrained JSON),
  one after the other as the server runs them; the facts found per range beside it.
- **chat first-token and reply latency**: a streamed reply (``ChatOllama.stream``, up to
  ``--reply-tokens`` tokens, temperature 0.2) to the next user turn of a LoCoMo session with
  the ``--history-turns`` turns before it and a system prompt of memory (the session's
  earlier turns as notes), as the chat prompt sends them: seconds to the first piece of text
  and to the last.
- **resident memory** (VmRSS) of the model's server process: after loading, and the most
  seen after a call (llama.cpp maps the file; the pages it touched count).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx
from bench_extraction import DATA, sessions_of
from harness import (
    Run,
    configure,
    fmt,
    median_ratio,
    memory_mb,
    ordered,
    parser,
    summarize,
    table,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_ollama import ChatOllama
from loadgen import free_port

from memory_chain.catalog import OllamaCatalog
from memory_chain.extraction import FactExtractor
from memory_chain.llm import embedded_counters
from memory_chain.local_llm.model import (
    QWEN_CODER_05B,
    QWEN_CODER_15B,
    default_models_dir,
    embedded_model,
    ensure_local_model,
)
from memory_chain.schemas import Turn
from memory_chain.summarize import build_summarization_chain, summary_inputs
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    data: Path = DATA
    models: tuple[str, ...] = (QWEN_CODER_05B.name, QWEN_CODER_15B.name)
    ranges: int = 6
    chats: int = 8
    range_turns: int = 10
    history_turns: int = 8
    reply_tokens: int = 128
    threads: int = 2
    quick: bool = False


QUICK = {"ranges": 2, "chats": 2}


@dataclass
class Served:
    """One model's server process and its figures."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    loaded_mb: float = 0.0
    peak_mb: float = 0.0
    consolidation_ns: list[int] = field(default_factory=list)
    summary_ns: list[int] = field(default_factory=list)
    facts_found: list[int] = field(default_factory=list)
    first_token_ns: list[int] = field(default_factory=list)
    reply_ns: list[int] = field(default_factory=list)
    reply_tokens: list[int] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)

    def sample_memory(self) -> None:
        self.peak_mb = max(self.peak_mb, memory_mb(self.process.pid)["rss"])


@contextmanager
def model_server(spec: str, threads: int) -> Iterator[Served]:
    """The model behind its own Ollama-compatible server process, stopped on exit."""
    model = embedded_model(spec)
    path = ensure_local_model(default_models_dir(), model=model)
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "memory_chain.local_llm.ollama_api",
        "--model-path",
        str(path),
        "--model-name",
        model.name,
        "--port",
        str(port),
        "--threads",
        str(threads),
        "--log-level",
        "WARNING",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command} exited with {process.returncode}")
            try:
                if httpx.get(f"{url}/api/version", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer")
            time.sleep(0.3)
        served = Served(model.name, url, process)
        served.loaded_mb = served.peak_mb = memory_mb(process.pid)["rss"]
        yield served
    finally:
        process.terminate()
        process.wait(timeout=60)


def ranges_of(data: Path, count: int, range_turns: int) -> list[list[Turn]]:
    """The first ``count`` full ranges of ``range_turns`` turns, one per LoCoMo session."""
    import json

    samples = json.loads(data.read_text(encoding="utf-8"))
    found: list[list[Turn]] = []
    for sample in samples:
        for _, turns, _ in sessions_of(sample, 3):
            if len(turns) >= range_turns:
                found.append(turns[:range_turns])
            if len(found) == count:
                return found
    return found


def chat_prompts(
    data: Path, count: int, history: int, sessions: int = 3
) -> list[list[BaseMessage]]:
    """Chat prompts: notes of a session's start, ``history`` turns, then the next user turn."""
    import json

    samples = json.loads(data.read_text(encoding="utf-8"))
    prompts: list[list[BaseMessage]] = []
    for sample in reversed(samples):  # other conversations than the ranges'
        for _, turns, _ in sessions_of(sample, sessions):
            users = [i for i, t in enumerate(turns) if t.role == "user" and i >= history + 4]
            if not users:
                continue
            at = users[0]
            notes = "\n".join(f"- {t.content}" for t in turns[: at - history])
            messages: list[BaseMessage] = [
                SystemMessage(
                    "You are a helpful assistant with memory of this user. Use what you "
                    f"remember when it helps; answer briefly.\n\nWhat you remember:\n{notes}"
                )
            ]
            for turn in turns[at - history : at]:
                kind = HumanMessage if turn.role == "user" else AIMessage
                messages.append(kind(turn.content))
            messages.append(HumanMessage(turns[at].content))
            prompts.append(messages)
            if len(prompts) == count:
                return prompts
    return prompts


def consolidate(served: Served, extractor: FactExtractor, chain: Any, part: list[Turn]) -> None:
    """Summary, then facts, of one range, as the consolidation of a range runs them."""
    started = time.perf_counter_ns()
    chain.invoke(summary_inputs(None, part))
    summarized = time.perf_counter_ns()
    found = extractor.extract("bench", part)
    ended = time.perf_counter_ns()
    served.summary_ns.append(summarized - started)
    served.consolidation_ns.append(ended - started)
    served.facts_found.append(len(found))
    served.sample_memory()


def chat(served: Served, messages: list[BaseMessage], reply_tokens: int) -> None:
    """One streamed reply: time to its first text and to its end."""
    llm = ChatOllama(
        base_url=served.url,
        model=served.name,
        temperature=0.2,
        num_predict=reply_tokens,
        num_ctx=4096,
        seed=1,
    )
    started = time.perf_counter_ns()
    first = 0
    usage: dict[str, Any] = {}
    for chunk in llm.stream(messages):
        if chunk.content and not first:
            first = time.perf_counter_ns()
        if chunk.usage_metadata:
            usage = dict(chunk.usage_metadata)
    ended = time.perf_counter_ns()
    served.first_token_ns.append((first or ended) - started)
    served.reply_ns.append(ended - started)
    served.reply_tokens.append(int(usage.get("output_tokens", 0)))
    served.prompt_tokens.append(int(usage.get("input_tokens", 0)))
    served.sample_memory()


def p50_s(samples_ns: Sequence[int]) -> float | None:
    """The median of nanosecond samples in seconds (``summarize``'s p50), None without any."""
    stats = summarize(list(samples_ns), unit="ms")
    return stats["p50"] / 1000 if stats.get("p50") is not None else None


def p50(values: Sequence[int]) -> float | None:
    """The median of counts (facts, tokens), as ``summarize`` takes it; None without any."""
    return float(statistics.median(values)) if values else None


def main() -> None:
    found = parser(__doc__, quick="two ranges and two chats per model")
    found.add_argument("--data", type=Path, help=f"a LoCoMo-format file (default {DATA})")
    found.add_argument("--models", help="comma-separated embedded names or .gguf paths")
    found.add_argument("--ranges", type=int, help="ranges consolidated per model (6)")
    found.add_argument("--chats", type=int, help="chat replies per model (8)")
    found.add_argument("--reply-tokens", type=int, help="longest chat reply (128)")
    args = found.parse_args()
    if args.models is not None:
        args.models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    settings = configure(Settings(), args, QUICK)
    run = Run("embedded models", packages=("llama-cpp-python", "langchain-ollama"))
    print(run.header())
    ranges = ranges_of(settings.data, settings.ranges, settings.range_turns)
    prompts = chat_prompts(settings.data, settings.chats, settings.history_turns)
    embeddings = SentenceEmbeddings()
    with ExitStack() as stack:
        servers = [stack.enter_context(model_server(m, settings.threads)) for m in settings.models]
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        jobs: dict[str, tuple[FactExtractor, Any]] = {}
        for served in servers:
            engine = create_sql_engine(f"sqlite:///{folder}/{len(jobs)}.db")
            upgrade(engine)
            facts = FactStore(SQLStore(engine).database, embed=embeddings.embed_documents)
            catalog = OllamaCatalog(
                served.url, default_model=served.name, local_counters=embedded_counters()
            )
            llm = ChatOllama(base_url=served.url, model=served.name, temperature=0)
            extractor = FactExtractor(
                llm, facts, model=lambda catalog=catalog: catalog.resolve(None)
            )
            jobs[served.name] = (extractor, build_summarization_chain(llm))
        for step, part in enumerate(ranges):
            for served in ordered(servers, step):
                consolidate(served, *jobs[served.name], part)
            run.progress(f"range {step + 1}/{len(ranges)}")
        for step, messages in enumerate(prompts):
            for served in ordered(servers, step):
                chat(served, messages, settings.reply_tokens)
            run.progress(f"chat {step + 1}/{len(prompts)}")
    rows = [
        [
            s.name,
            p50_s(s.consolidation_ns),
            p50_s(s.summary_ns),
            p50(s.facts_found),
            p50_s(s.first_token_ns),
            p50_s(s.reply_ns),
            p50(s.reply_tokens),
            p50(s.prompt_tokens),
            round(s.loaded_mb),
            round(s.peak_mb),
        ]
        for s in servers
    ]
    headers = [
        "model",
        "consolidation s/range p50",
        "of which summary",
        "facts/range",
        "chat first token s p50",
        "reply s p50",
        "reply tokens",
        "prompt tokens",
        "RSS loaded MB",
        "RSS peak MB",
    ]
    lines = [
        f"\n{len(ranges)} ranges of {settings.range_turns} turns and {len(prompts)} chat replies "
        f"(up to {settings.reply_tokens} tokens) per model, models taking turns, "
        f"{settings.threads} threads each:",
        *table(headers, rows),
    ]
    if len(servers) == 2:
        a, b = servers
        lines.append(
            f"{b.name} over {a.name}: consolidation x"
            f"{fmt(median_ratio(b.consolidation_ns, a.consolidation_ns))}, first token x"
            f"{fmt(median_ratio(b.first_token_ns, a.first_token_ns))}, reply x"
            f"{fmt(median_ratio(b.reply_ns, a.reply_ns))}"
        )
    results = {
        s.name: {
            "consolidation_ms": summarize(s.consolidation_ns),
            "summary_ms": summarize(s.summary_ns),
            "facts_per_range": s.facts_found,
            "first_token_ms": summarize(s.first_token_ns),
            "reply_ms": summarize(s.reply_ns),
            "reply_tokens": s.reply_tokens,
            "prompt_tokens": s.prompt_tokens,
            "rss_loaded_mb": s.loaded_mb,
            "rss_peak_mb": s.peak_mb,
        }
        for s in servers
    }
    run.finish(lines, args.json, settings=settings, results=results)


if __name__ == "__main__":
    sys.exit(main())
