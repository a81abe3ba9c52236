"""Fact updates across conversations: is the user's profile right, and do retired facts stay out?

Run from the repository root::

    python benchmarks/bench_updates.py --quick
    python benchmarks/bench_updates.py --scenarios move_city,forget_smoking --json /tmp/u.json

Each scenario of ``update_scenarios.py`` runs alone on a fresh data folder:
``open_services(MemorySettings(data_dir=<temp>, ...), llm=True)`` (SQLite, the embedded vector
index, the embedded model when no Ollama answers at ``--llm-url``). Each of its conversations
goes through what a chat does: the turns stored with ``MemoryManager.add_turns`` (which files
"remember"/"forget" requests and, for a save, schedules a consolidation), the conversation
consolidated (``ConsolidationService.consolidate``: the summary, then fact extraction), the
background consolidations waited for; then a probe: the prompt the scenario's question would
get in a new conversation, built by ``ChatCore.preview`` (the chat's and ``/v1/context``'s path).

A scenario passes when (a) every ``current`` expectation matches a current fact at the end and
no ``stale`` one does, and (b) no fact superseded or dismissed by a probe's time is a line of
that probe's facts section, nor does a stale expectation match one from its conversation on
(goal 0). A retired fact's text elsewhere in a prompt (recalled turns and range summaries keep
the user's words) is counted apart, for information, and apart again when it is only in
recalled turns noted as outdated (``outdated, now: ...``: :mod:`memory_chain.facts.outdated`).
Each range's extraction (facts found, what filing them did, failures) and each conversation's
requests are logged, so a failure shows
whether the model found nothing or reconciliation chose wrong.

What the user would see (not part of the pass rule; ``--no-answers`` skips it): after the last
conversation the chat model answers the probe, greedy, twice: with the prompt as built (each
fact dated by when the user told it, the heading saying the later of two holds) and with the
same prompt undated (the facts as they read before). A reply is right when it names every
current value given as an expression and no stale one.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from harness import Run, alternated, configure, parser
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from update_answers import FACT_LABEL, USER, answers
from update_report import report, score
from update_scenarios import QUICK, SCENARIOS, Expect, Scenario

from memory_chain.chat.request import ChatRequest
from memory_chain.config import MemorySettings
from memory_chain.facts.model import STATUSES, Fact
from memory_chain.facts.outdated import OUTDATED
from memory_chain.facts.reconcile import normalized
from memory_chain.services import Services, open_services

#: Where no Ollama answers, so that the embedded model starts.
NO_OLLAMA = "http://127.0.0.1:9"
#: Longest wait for a conversation's background consolidations.
WAIT_SECONDS = 900.0
#: Prompt sections that are memory (the instructions and the message are not).
MEMORY_SECTIONS = ("summary", "recent", "memories")
#: What a recalled turn's line says when the fact it stated was superseded.
NOTED = f"; {OUTDATED}"
#: What the JSON says of each fact.
FACT_FIELDS = ("text", "status", "origin", "kind", "subject", "conversation_id")


@dataclass(frozen=True)
class Settings:
    scenarios: str | None = None
    llm_url: str | None = None
    model: str | None = None
    consolidation_models: str | None = None
    consolidation_model: str | None = None
    answers: bool = True
    quick: bool = False


QUICK_SETTINGS = {"scenarios": ",".join(QUICK)}


class ExtractionLog:
    """Stands in for the consolidation service's extractor and records each range's result."""

    def __init__(self, extractor: Any) -> None:
        self.extractor = extractor
        self.ranges: list[dict[str, Any]] = []
        self.step = 0

    def extract(self, user_id: str, turns: Any) -> Any:
        span = [turns[0].turn_number, turns[-1].turn_number] if turns else []
        entry = {"step": self.step, "turns": span, "facts": [], "filed": [], "error": None}
        self.ranges.append(entry)
        began = time.perf_counter()
        try:
            found = self.extractor.extract(user_id, turns)
        except Exception as exc:  # the service counts it in extraction_failures
            entry["error"] = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            entry["seconds"] = time.perf_counter() - began
        entry["facts"] = [
            {"text": f.text, "kind": f.kind, "subject": f.subject, "label": f.label}
            | {"replaces": f.replaces.text if f.replaces else None}
            for f in found
        ]
        return found

    def file(self, user_id: str, conversation_id: str, found: Any) -> Any:
        changes = self.extractor.file(user_id, conversation_id, found)
        self.ranges[-1]["filed"] = [
            {"action": c.action, "text": c.fact.text}
            | {"replaced": c.replaced.text if c.replaced else None}
            for c in changes
        ]
        return changes


class Matcher:
    """Whether a text matches an :class:`Expect` (cosines from the facts' embedding model)."""

    def __init__(self, embed: Any) -> None:
        self.embed = embed
        self.vectors: dict[str, np.ndarray] = {}

    def vector(self, text: str) -> np.ndarray:
        if text not in self.vectors:
            vector = np.asarray(self.embed([text])[0], dtype=np.float32)
            self.vectors[text] = vector / (np.linalg.norm(vector) or 1.0)
        return self.vectors[text]

    def __call__(self, expect: Expect, text: str) -> bool:
        if expect.cosine is None:
            return expect.pattern().search(text) is not None
        if self.embed is None:
            return False
        return float(self.vector(expect.phrase) @ self.vector(text)) >= expect.cosine


def memory_settings(folder: str, settings: Settings) -> MemorySettings:
    values: dict[str, Any] = {"data_dir": Path(folder), "llm_fallback": "embedded"}
    values["ollama_base_url"] = settings.llm_url or NO_OLLAMA
    if settings.model:
        values |= {"ollama_chat_model": settings.model, "ollama_summary_model": settings.model}
    if settings.consolidation_model:
        values["local_llm_consolidation_model"] = settings.consolidation_model
    return MemorySettings(**values)


def messages(turns: tuple[str, ...]) -> list[BaseMessage]:
    return [HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(turns)]


def all_facts(services: Services) -> list[Fact]:
    return services.manager.fact_store.of_user(USER, statuses=STATUSES)


def fact_row(fact: Fact) -> dict[str, Any]:
    return {name: getattr(fact, name) for name in FACT_FIELDS}


def requests_did(before: dict[str, Fact], after: list[Fact]) -> dict[str, list[str]]:
    """What filing the conversation's remember/forget requests changed."""

    def was(fact: Fact, status: str) -> bool:
        old = before.get(fact.id)
        return old is not None and old.status == "current" and fact.status == status

    return {
        "saved": [f.text for f in after if f.id not in before and f.origin == "explicit"],
        "dismissed": [f.text for f in after if was(f, "dismissed")],
        "superseded": [f.text for f in after if was(f, "superseded")],
    }


def settle(services: Services) -> None:
    """Wait for the consolidations the writes scheduled (an explicit save schedules one)."""
    consolidation = services.consolidation
    deadline = time.monotonic() + WAIT_SECONDS
    while consolidation is not None and consolidation.waiting and time.monotonic() < deadline:
        time.sleep(0.2)


def probe(services: Services, scenario: Scenario, step: int, match: Matcher) -> dict[str, Any]:
    """The prompt a new message gets now, and what of the retired facts reached it."""
    if services.core is None:
        raise SystemExit("the chat core is not open (open_services(..., llm=True))")
    request = ChatRequest.checked(conversation_id="probe", user_id=USER, message=scenario.probe)
    prompt = services.core.preview(request).prompt
    lines = {s.name: [e.text for e in s.entries] for s in prompt.sections}
    facts = [FACT_LABEL.sub("", line, count=1) for line in lines.get("facts", [])]
    keys = [normalized(line) for line in facts]
    # A recalled turn noted as outdated (its fact superseded) says so: counted apart.
    memory = {
        name: normalized("\n".join(t for t in lines.get(name, []) if NOTED not in t))
        for name in MEMORY_SECTIONS
    }
    noted = normalized("\n".join(t for t in lines.get("memories", []) if NOTED in t))
    retired = [f for f in all_facts(services) if f.status != "current"]
    in_facts, elsewhere, marked = [], [], []
    for fact in retired:
        key = normalized(fact.text)
        if any(key in line for line in keys):
            in_facts.append(fact_row(fact))
        where = [name for name, text in memory.items() if key and key in text]
        if where:
            elsewhere.append(fact_row(fact) | {"sections": where})
        elif key and key in noted:
            marked.append(fact_row(fact))
    stale = [e for e in scenario.stale if e.step <= step]
    stale_in_facts = [
        {"expect": e.label(), "line": line} for e in stale for line in facts if match(e, line)
    ]
    stale_elsewhere = [
        {"expect": e.label(), "section": name}
        for e in stale
        if e.cosine is None
        for name in MEMORY_SECTIONS
        if any(e.pattern().search(text) for text in lines.get(name, []))
    ]
    return {
        "facts": facts,
        "retired_in_facts": in_facts,
        "stale_in_facts": stale_in_facts,
        "retired_elsewhere": elsewhere,
        "retired_noted": marked,
        "stale_elsewhere": stale_elsewhere,
        "tokens": prompt.tokens,
    }


def judge(scenario: Scenario, facts: list[Fact], match: Matcher) -> dict[str, Any]:
    """(a): the expected values current at the end, the stale ones not."""
    current = [f for f in facts if f.status == "current"]

    def diagnosis(expect: Expect) -> str:
        past = sorted({f.status for f in facts if f.status != "current" and match(expect, f.text)})
        return f"stored, then {' and '.join(past)}" if past else "never stored"

    expected = []
    for expect in scenario.current:
        found = [f.text for f in current if match(expect, f.text)]
        expected.append(
            {"expect": expect.label(), "found": found, "why": None if found else diagnosis(expect)}
        )
    stale = [
        {"expect": e.label(), "facts": [fact_row(f) for f in current if match(e, f.text)]}
        for e in scenario.stale
    ]
    return {
        "expected": expected,
        "missing": sum(not item["found"] for item in expected),
        "stale_current": [item for item in stale if item["facts"]],
        "facts": [fact_row(f) for f in facts],
    }


def run_step(
    services: Services, scenario: Scenario, step: int, log: ExtractionLog, run: Run
) -> dict[str, Any]:
    """Store a conversation as a chat would, consolidate it, and probe."""
    consolidation = services.consolidation
    if consolidation is None:
        raise SystemExit("no consolidation service (open_services(..., llm=True))")
    began, cid = time.perf_counter(), f"c{step + 1}"
    log.step, failures = step, consolidation.extraction_failures
    before = {f.id: f for f in all_facts(services)}
    services.manager.add_turns(cid, USER, messages(scenario.conversations[step]))
    requests = requests_did(before, all_facts(services))
    error = None
    try:
        consolidation.consolidate(cid, USER)
    except Exception as exc:  # the summary failed: no extraction either
        error = f"{type(exc).__name__}: {exc}"
    settle(services)
    ranges = [r for r in log.ranges if r["step"] == step]
    failed = consolidation.extraction_failures - failures
    seconds = time.perf_counter() - began
    run.progress(
        f"{scenario.name} {cid} ({seconds:.0f} s): requests {len(requests['saved'])} saved, "
        f"{len(requests['dismissed'])} dismissed; {len(ranges)} ranges, "
        f"{sum(len(r['facts']) for r in ranges)} facts extracted, {failed} failed"
        + (f"; consolidation failed: {error}" if error else "")
    )
    return {
        "requests": requests,
        "consolidation_error": error,
        "ranges": ranges,
        "extraction_failures": failed,
        "seconds": seconds,
    }


def run_scenario(
    scenario: Scenario, settings: Settings, run: Run, order: int = 0
) -> dict[str, Any]:
    """The scenario on a fresh data folder: its steps, the verdict on the facts, the answers.

    ``order`` is the scenario's place in the run (which answer condition goes first).
    """
    began = time.perf_counter()
    result: dict[str, Any] = {"name": scenario.name, "kind": scenario.kind, "steps": []}
    result |= {"topic": scenario.topic, "error": None}
    with tempfile.TemporaryDirectory(prefix="bench-updates-") as folder:
        services = open_services(memory_settings(folder, settings), llm=True)
        try:
            consolidation = services.consolidation
            if services.models is None or services.models.provider == "unavailable":
                raise SystemExit(f"no LLM: {services.health()['llm']['detail']}")
            if consolidation is None or consolidation.extractor is None:
                raise SystemExit("fact extraction is off (consolidation_learn_facts)")
            log = ExtractionLog(consolidation.extractor)
            consolidation.extractor = log  # type: ignore[assignment]
            match = Matcher(services.manager.fact_store.embed)
            for step in range(len(scenario.conversations)):
                done = run_step(services, scenario, step, log, run)
                done["probe"] = probe(services, scenario, step, match)
                result["steps"].append(done)
            result |= judge(scenario, all_facts(services), match)
            if settings.answers:
                result["answers"] = answers(services, scenario, run, order)
        except SystemExit:
            raise
        except Exception as exc:  # one scenario's crash is its failure, not the run's
            result["error"] = f"{type(exc).__name__}: {exc}"
            run.progress(f"{scenario.name} failed: {result['error']}")
        finally:
            services.close()
    result["seconds"] = time.perf_counter() - began
    score(result)
    return result


def main() -> None:
    found = parser(__doc__, quick=f"four scenarios ({', '.join(QUICK)})")
    found.add_argument("--scenarios", help=f"names, comma-separated (default all {len(SCENARIOS)})")
    found.add_argument("--llm-url", help="an Ollama API (default: the embedded model)")
    found.add_argument("--model", help="the model there, for chat and summaries")
    found.add_argument(
        "--consolidation-models",
        help="embedded consolidation models compared in one run, comma-separated (each "
        "scenario with each, taking turns; e.g. qwen2.5-coder:0.5b,qwen2.5-coder:1.5b); "
        "default: the settings' (local_llm_consolidation_model)",
    )
    found.add_argument(
        "--no-answers",
        dest="answers",
        action="store_false",
        default=None,
        help="skip the chat model's answers to the last probe (dated and undated facts)",
    )
    args = found.parse_args()
    settings = configure(Settings(), args, QUICK_SETTINGS)
    names = settings.scenarios.split(",") if settings.scenarios else list(SCENARIOS)
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenarios {unknown}: choose from {', '.join(SCENARIOS)}")
    run = Run("fact updates", packages=("llama-cpp-python", "langchain-ollama"))
    print(run.header())
    models = (settings.consolidation_models or "").split(",")
    by_model: dict[str, list[dict[str, Any]]] = {model: [] for model in models}
    for order, name in enumerate(names):
        for model in alternated(models, order):
            run.progress(f"{name} {model}: {len(SCENARIOS[name].conversations)} conversations")
            chosen = replace(settings, consolidation_model=model or None)
            by_model[model].append(run_scenario(SCENARIOS[name], chosen, run, order))
    if len(models) == 1:
        lines, summary, verdicts = report(by_model[models[0]])
        run.finish(
            lines,
            args.json,
            settings=settings,
            results=by_model[models[0]],
            summary=summary,
            verdicts=verdicts,
        )
        return
    lines, summaries, all_verdicts = [], {}, {}
    for model, results in by_model.items():
        model_lines, summaries[model], verdicts = report(results)
        lines += [f"\n== consolidation model {model} ==", *model_lines]
        all_verdicts |= {f"{model}: {goal}": value for goal, value in verdicts.items()}
    run.finish(
        lines,
        args.json,
        settings=settings,
        results=by_model,
        summary=summaries,
        verdicts=all_verdicts,
    )


if __name__ == "__main__":
    sys.exit(main())
