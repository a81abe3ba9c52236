"""`memory-chain bench`: runs the benchmark scripts and gathers every goal's verdict.

A verdict must be able to say MISSED: the LoCoMo goal is judged on a file made here, once
with evidence the retrieval finds and once with evidence it cannot (turns that share nothing
with their questions), and ``--strict`` turns a missed goal into a failing exit code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memory_chain
from memory_chain.bench import benchmarks_dir

CLI = str(Path(sys.executable).parent / "memory-chain")


def _bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``memory-chain bench ARGS`` from this checkout."""
    return subprocess.run(
        [CLI, "bench", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_bench_runs_a_benchmark_and_reports_its_goals(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = _bench("--only", "tiers,locomo", "--quick", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    tiers = figures["tiers"]
    assert [scale["conversations"] for scale in tiers["scales"]] == [100]
    verdicts = tiers["verdicts"]
    assert "100x1000 append NORMAL p95" in verdicts
    assert set(verdicts.values()) <= {"ok", "MISSED", "n/a"}
    # The script's own report streams through, then the summary lists every goal.
    assert "tier-2 append_turns" in done.stdout
    summary = done.stdout.split("== summary: every goal ==")[1]
    assert all(goal in summary for goal in verdicts)
    assert "locomo: skipped (give --locomo FILE" in done.stdout


def test_the_chat_and_load_benchmarks_run_every_part(tmp_path: Path) -> None:
    # The chat benchmark's consolidation phase once broke on a changed signature unnoticed.
    out = tmp_path / "bench.json"
    done = _bench("--only", "chat,load", "--quick", "--json", str(out), timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    chat = figures["chat"]
    assert {"overhead", "consolidation", "gil"} <= set(chat["results"])
    assert chat["results"]["consolidation"]["failures"] == 0
    assert set(chat["verdicts"].values()) <= {"ok", "MISSED"}
    assert len(chat["verdicts"]) == 5  # chat overhead x2, middleware x2, consolidation
    # The load benchmark checks what a real server stored on both databases.
    load = figures["load"]
    assert set(load["results"]) == {"sqlite", "postgres"}
    assert set(load["verdicts"].values()) == {"ok"}
    assert all(result["errors"] == 0 for result in load["results"].values())


def test_the_vector_embedding_and_replica_benchmarks_run_every_part(tmp_path: Path) -> None:
    # Each of these scripts once had no test, so a changed signature could break it unseen.
    out = tmp_path / "bench.json"
    done = _bench("--only", "vectors,embeddings,replicas", "--quick", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    for name in ("vectors", "embeddings", "replicas"):
        assert "error" not in figures[name], (name, figures[name])
        assert set(figures[name]["verdicts"].values()) <= {"ok", "MISSED"}, name
    vectors = figures["vectors"]["results"]["retrieval"]
    # A ratio of two timings is the benchmark's to judge (its verdict above), not this test's:
    # asserted here it failed when the other test worker took the core (0.75 once in CI).
    assert vectors["retrieval_p95_over_embed_p95"] > 0
    assert "retrieval_p95_over_embed_p95" in figures["vectors"]["verdicts"]
    equality = figures["embeddings"]["results"]["equality"]["onnx"]
    assert equality["min"] > 0.9999  # the ONNX graph gives torch's vectors
    assert set(figures["embeddings"]["results"]["runtimes"]) >= {"torch", "onnx"}
    replicas = figures["replicas"]
    assert replicas["verdicts"] == {"0 errors, turns contiguous, one point per turn": "ok"}
    assert set(replicas["results"]["throughput"]) == {"1", "3", "3-sticky"}


def test_the_soak_runs_and_judges_the_servers_memory(tmp_path: Path) -> None:
    # Not in `memory-chain bench` (a full soak takes most of an hour): its script, quick.
    out = tmp_path / "soak.json"
    script = benchmarks_dir() / "bench_soak.py"
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=script.parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())["results"]
    assert result["errors"] == 0
    assert result["turns_stored"] == 4_000
    assert result["contiguity_sample"]["ok"]
    assert isinstance(result["bounded"]["bounded"], bool)  # a verdict either way
    assert "heap (RssAnon) allowed" in done.stdout


def test_bench_refuses_unknown_benchmarks() -> None:
    done = _bench("--only", "tiers,warp-speed", timeout=120)
    assert done.returncode == 1
    assert "unknown benchmarks ['warp-speed']" in done.stderr


FILLER = [
    "The weather was grey all morning.",
    "I had soup for lunch again.",
    "The bus was late by ten minutes.",
    "We watched a film about the sea.",
    "My neighbour painted his fence green.",
    "The shop on the corner closed early.",
    "I read two chapters before bed.",
    "The train station is being rebuilt.",
]
FACTS = [
    ("Where does Ana's sister live?", "My sister Marta lives in Lisbon near the river."),
    ("What is the name of Ana's dog?", "Our dog is called Biscuit and he loves the park."),
    ("Which instrument does Ana play?", "I have played the cello every Sunday since 2010."),
    ("What car does Ana drive?", "I drive an old blue Volvo estate from 1998."),
]


def _locomo_file(path: Path, *, findable: bool) -> Path:
    """A LoCoMo-format file of one conversation: 4 facts among 120 filler turns.

    With ``findable``, each question's evidence is the turn that answers it; without, a
    filler turn that shares nothing with it (recall at 10 turns is then near zero).
    """
    turns: list[dict[str, Any]] = []
    fact_ids: list[str] = []
    for n in range(120):
        speaker = "Ana" if n % 2 == 0 else "Ben"
        if n % 30 == 5:
            text = FACTS[len(fact_ids)][1]
            fact_ids.append(f"D1:{n + 1}")
        else:
            text = f"{FILLER[n % len(FILLER)]} ({n})"
        turns.append({"speaker": speaker, "dia_id": f"D1:{n + 1}", "text": text})
    qa = [
        {
            "question": question,
            "answer": answer,
            "evidence": [fact_ids[i] if findable else f"D1:{40 + 2 * i}"],
            "category": 4,
        }
        for i, (question, answer) in enumerate(FACTS)
    ]
    sample = {
        "sample_id": "made-here",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
        "qa": qa,
    }
    path.write_text(json.dumps([sample]))
    return path


@pytest.mark.parametrize("findable", [True, False], ids=["found", "not-found"])
def test_a_missed_goal_is_reported_and_fails_a_strict_run(tmp_path: Path, findable: bool) -> None:
    data = _locomo_file(tmp_path / "locomo.json", findable=findable)
    out = tmp_path / "bench.json"
    done = _bench(
        "--only", "locomo", "--locomo", str(data), "--quick", "--strict", "--json", str(out)
    )
    figures = json.loads(out.read_text())["locomo"]
    goal = "locomo hybrid R@10 >= 76 %"
    recall = figures["modes"]["hybrid"]["recall"]["10"]
    summary = done.stdout.split("== summary: every goal ==")[1]
    if findable:
        assert recall == 100.0
        assert figures["verdicts"][goal] == "ok"
        assert f"{goal:<60} ok" in summary
    else:
        assert recall < 76.0
        assert figures["verdicts"][goal] == "MISSED"
        assert f"{goal:<60} MISSED" in summary
        assert done.returncode == 1, done.stderr[-2000:]
    missed = [verdict for verdict in figures["verdicts"].values() if verdict == "MISSED"]
    assert done.returncode == (1 if missed else 0), done.stderr[-2000:]


def _installed_copy(tmp_path: Path) -> dict[str, str]:
    """The package as a wheel installs it: ``memory_chain/`` alone, no ``benchmarks/`` by it."""
    site = tmp_path / "site-packages"
    shutil.copytree(Path(memory_chain.__file__).parent, site / "memory_chain")
    return {**os.environ, "PYTHONPATH": str(site)}


def _bench_installed(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = "from memory_chain.cli import app; app()"
    return subprocess.run(
        [sys.executable, "-c", command, "bench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=_installed_copy(tmp_path),
    )


def test_bench_says_it_needs_a_checkout_when_installed(tmp_path: Path) -> None:
    done = _bench_installed(tmp_path, "--only", "locomo,tiers", "--quick")
    assert done.returncode == 1
    assert "`memory-chain bench` needs a source checkout" in done.stderr
    # It says where it looked (the installed copy, not this checkout) and runs nothing first.
    assert str(tmp_path / "site-packages" / "benchmarks") in done.stderr
    assert "== locomo" not in done.stdout


def test_bench_runs_the_recall_evaluation_without_a_checkout(tmp_path: Path) -> None:
    done = _bench_installed(tmp_path, "--only", "locomo")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "locomo: skipped (give --locomo FILE" in done.stdout
