"""LoCoMo recall evaluation: file parsing, evidence repair, the CLI, and a recall floor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from memory_chain.errors import InvalidInputError
from memory_chain.eval.crossval import CrossValReport, Paired, format_crossval, sign_test
from memory_chain.eval.locomo import _ingest as ingest
from memory_chain.eval.locomo import found_turns, recall_row
from memory_chain.eval.locomo_data import (
    EvidenceRepairs,
    load_locomo,
    parse_session_date,
    repair_evidence,
)
from memory_chain.manager import MemoryManager
from memory_chain.schemas import MemoryItem
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from tests.needs import missing

LOCOMO_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
CLI = [str(Path(sys.executable).parent / "memory-chain")]

#: Measured on conv-26 (the first conversation of locomo-dev.json, 150 questions) with the
#: default retrieval: R@1 44.9, R@5 70.2, R@10 79.4, R@20 86.0 (keyword only: 36.8, 66.8,
#: 74.7, 79.2). The floors sit about two questions lower.
SLICE_FLOORS = {"1": 43.0, "5": 68.5, "10": 78.0, "20": 84.5}


def locomo_dev() -> Path:
    """The dev file; missing, the test skips, but fails under CI (which has the data)."""
    if not LOCOMO_DEV.exists():
        missing(f"LoCoMo data not found at {LOCOMO_DEV}: CI runs next to ../shared/data")
    return LOCOMO_DEV


def test_session_dates() -> None:
    assert parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_date("10:04 am on  19 June, 2023").hour == 10
    with pytest.raises(InvalidInputError, match="unrecognized session date"):
        parse_session_date("yesterday")


def test_malformed_evidence_ids_are_repaired_or_skipped() -> None:
    known = {"D8:6", "D9:17", "D11:26", "D30:5"}
    repairs = EvidenceRepairs()
    found = repair_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D99:1", "D8:6"], known, repairs)
    assert found == ("D8:6", "D9:17", "D11:26", "D30:5")
    assert (repairs.repaired, repairs.skipped) == (4, 1)


def _sample(qa: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "9:00 am on 1 March, 2024",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! What colour is Miso?"},
            ],
            "session_2_date_time": "6:30 pm on 20 March, 2024",
            "session_2": [
                {
                    "speaker": "Ana",
                    "dia_id": "D2:1",
                    "text": "Look at this.",
                    "blip_caption": "a photo of a grey cat on a sofa",
                },
                {"speaker": "Ben", "dia_id": "D2:2", "text": "I'm training for a marathon."},
            ],
        },
        "qa": qa,
    }


TINY_QA = [
    {"question": "What is the name of Ana's cat?", "answer": "Miso", "evidence": ["D1:1"],
     "category": 4},
    {"question": "What is Ben training for?", "answer": "marathon", "evidence": ["D2:02"],
     "category": 4},
    {"question": "Where does the cat sleep?", "answer": "sofa", "evidence": ["D2:1"],
     "category": 3},
    {"question": "What is Ana's dog called?", "adversarial_answer": "Rex", "evidence": ["D1:1"],
     "category": 5},
]  # fmt: skip


def test_loaded_sessions_are_history_and_file_no_facts(
    tmp_path: Path, sqlite_store: SQLStore
) -> None:
    sample = _sample(TINY_QA)
    sample["conversation"]["session_1"][0]["text"] = "Remember that my cat Miso is grey."
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]))
    (loaded,), _ = load_locomo(path)
    manager = MemoryManager(sqlite_store, TurnBuffer())
    numbers = ingest(manager, loaded, "ana")
    assert sorted(numbers) == ["D1:1", "D1:2", "D2:1", "D2:2"]
    # Before: the old session's "Remember that ..." was filed as a fact of the user.
    assert manager.facts("ana") == []


def test_loading_a_locomo_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([_sample(TINY_QA)]))
    (sample,), repairs = load_locomo(path)
    assert [turn.content for turn in sample.turns][2] == (
        "Ana: Look at this. [shares a photo: a photo of a grey cat on a sofa]"
    )
    assert sample.turns[1].timestamp > sample.turns[0].timestamp
    assert sample.turns[2].timestamp.day == 20
    assert len(sample.questions) == 3  # the adversarial question is left out
    assert repairs.repaired == 1  # "D2:02"
    path.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(InvalidInputError, match="list of LoCoMo samples"):
        load_locomo(path)


def _eval(path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "eval", "locomo", str(path), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    # The evaluation must not touch the configured data dir: point it somewhere we can check.
    return {**os.environ, "MEMORY_CHAIN_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}


def test_cli_on_a_small_file_in_every_mode(tmp_path: Path, cli_env: dict[str, str]) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([_sample(TINY_QA)]))
    modes = ["--mode", "hybrid", "--mode", "dense", "--mode", "keyword"]
    done = _eval(path, "--k", "1,3", "--json", *modes, env=cli_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["recall"]) == {"1", "3"}
    assert set(report["modes"]) == {"hybrid", "dense", "keyword"}
    # Three questions, four turns: every evidence turn is within the first three.
    assert report["modes"]["hybrid"]["recall"]["3"] == 100.0
    assert report["modes"]["keyword"]["questions"] == {"overall": 3, "single-hop": 2,
                                                       "open-domain": 1}  # fmt: skip
    assert report["evidence_repaired"] == 1
    assert not (tmp_path / "data").exists()
    text = _eval(path, "--k", "1", env=cli_env)
    assert text.returncode == 0
    assert "R@1" in text.stdout
    assert "hybrid" in text.stdout


def test_found_turns_of_other_conversations_count_as_misses() -> None:
    def turn(conversation: str, number: int) -> MemoryItem:
        return MemoryItem(
            tier="tier3", kind="turn", conversation_id=conversation, content="x",
            timestamp=datetime(2024, 3, 1, tzinfo=UTC), score=1.0, turn_number=number,
        )  # fmt: skip

    summary = replace(turn("tiny", 0), kind="summary", turn_number=None, turn_range=(1, 2))
    found = found_turns([turn("other", 2), summary, turn("tiny", 2), turn("tiny", 1)], "tiny")
    assert found == [None, 2, 1]
    assert recall_row(found, {1}, (1, 2, 3)) == {1: 0.0, 2: 0.0, 3: 1.0}


def test_user_scope_searches_every_conversation(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """Like a chat, ``--scope user`` searches all of the user's conversations at once."""
    tiny = _sample([TINY_QA[1]])  # "What is Ben training for?": a marathon, in D2:2
    other = _sample([])
    other["sample_id"] = "other"
    other["conversation"]["session_2"][1]["text"] = "Ben is training for a triathlon now."
    path = tmp_path / "two.json"
    path.write_text(json.dumps([tiny, other]))
    recall = {}
    for scope in ("conversation", "user"):
        done = _eval(path, "--scope", scope, "--k", "1,4", "--json", env=cli_env)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["scope"] == scope
        recall[scope] = report["recall"]
    assert recall["conversation"] == {"1": 100.0, "4": 100.0}
    # The other conversation's training turn takes the first place: a miss, not a hit.
    assert recall["user"] == {"1": 0.0, "4": 100.0}
    text = _eval(path, "--scope", "user", "--k", "1", env=cli_env)
    assert "every conversation of the file" in text.stdout
    refused = _eval(path, "--scope", "everyone", env=cli_env)
    assert refused.returncode == 1
    assert "--scope takes conversation or user" in refused.stderr


def test_cli_refuses_bad_input(tmp_path: Path, cli_env: dict[str, str]) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    done = _eval(broken, env=cli_env)
    assert done.returncode == 1
    assert "cannot read" in done.stderr
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([_sample(TINY_QA)]))
    assert "--k takes" in _eval(path, "--k", "ten", env=cli_env).stderr
    assert "--mode takes" in _eval(path, "--mode", "psychic", env=cli_env).stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_recall_floor_on_a_locomo_slice(
    backend: str, cli_env: dict[str, str], request: pytest.FixtureRequest
) -> None:
    """A regression in retrieval quality fails here (the full figures are in the issue notes).

    The default (fused) retrieval must also stay at least as good as keyword search alone at
    every k: a tier that does not improve the result does not belong in the default. Both on
    SQLite with the embedded vector index and on PostgreSQL + pgvector (the scale-out
    stores), with the same floors.
    """
    stores = []
    if backend == "postgresql":
        stores = ["--postgres-url", request.getfixturevalue("postgres_url")]
    done = _eval(
        locomo_dev(), "--conversations", "1", "--mode", "hybrid", "--mode", "keyword", "--json",
        *stores, env=cli_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["backend"].startswith(backend)
    hybrid, keyword = report["modes"]["hybrid"], report["modes"]["keyword"]
    assert hybrid["questions"]["overall"] == 150
    for k, floor in SLICE_FLOORS.items():
        assert report["recall"][k] >= floor, (k, report["recall"])
        assert hybrid["recall"][k] >= keyword["recall"][k], (k, hybrid, keyword)


def _databases(server_url: str) -> set[str]:
    engine = create_engine(server_url)
    try:
        with engine.connect() as conn:
            return set(conn.execute(text("SELECT datname FROM pg_database")).scalars())
    finally:
        engine.dispose()


def test_the_eval_runs_on_postgresql_in_a_scratch_database(
    tmp_path: Path, cli_env: dict[str, str], postgres_url: str
) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([_sample(TINY_QA)]))
    before = _databases(postgres_url)
    done = _eval(path, "--k", "1,3", "--json", "--postgres-url", postgres_url, env=cli_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["backend"] == "postgresql + pgvector"
    assert report["modes"]["hybrid"]["recall"]["3"] == 100.0
    assert _databases(postgres_url) == before  # the scratch database is dropped
    assert not (tmp_path / "data").exists()
    refused = _eval(path, "--postgres-url", f"sqlite:///{tmp_path}/x.db", env=cli_env)
    assert refused.returncode == 1
    assert "--postgres-url takes a PostgreSQL URL" in refused.stderr


def test_sign_test() -> None:
    assert sign_test(0, 5) == 0.0625  # 2 * (1/2)^5
    assert sign_test(5, 0) == 0.0625
    assert sign_test(5, 6) == 1.0
    assert sign_test(3, 6) == pytest.approx(0.5078, abs=1e-4)
    assert sign_test(0, 0) == 1.0
    assert 0.0 <= sign_test(100, 2000) < 1e-300  # no overflow with many pairs


def test_the_report_prints_the_hybrid_against_each_mode() -> None:
    report = CrossValReport(path="f.json", ks=(1,))
    report.hybrid_against = {
        "keyword": [
            Paired("conv-30", {1: 3}, {1: 6}, {1: 0.508}),
            Paired(None, {1: 90}, {1: 30}, {1: 0.0}),
        ]
    }
    lines = format_crossval(report).splitlines()
    assert any(line.startswith("  hybrid against keyword") for line in lines)
    assert "      conv-30   @1 3/6 p=0.51" in lines
    assert "      all       @1 90/30 p<0.01" in lines


def test_cross_validation_holds_each_conversation_out(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    second = _sample(TINY_QA[:2])
    second["sample_id"] = "tiny-2"
    path = tmp_path / "two.json"
    path.write_text(json.dumps([_sample(TINY_QA), second]))
    done = _eval(path, "--cross-validate", "--k", "1,3", "--json", env=cli_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["held_out"]) == set(report["whole_file"]) == {"hybrid", "keyword", "dense"}
    folds = report["folds"]["hybrid"]
    assert [f["conversation"] for f in folds] == ["tiny", "tiny-2"]
    assert [f["questions"] for f in folds] == [3, 2]
    assert set(folds[0]["weights"]) >= {"keyword", "answer_of_question", "time"}
    assert set(report["folds"]["keyword"][0]["weights"]) == {"time", "when"}
    assert report["held_out"]["hybrid"]["questions"]["overall"] == 5
    assert report["scope"] == "conversation"
    # The hybrid against each other mode, question by question: per fold, then pooled.
    against = report["hybrid_against"]
    assert set(against) == {"keyword", "dense"}
    for mode, compared in against.items():
        assert [c["conversation"] for c in compared] == ["tiny", "tiny-2", None]  # None: all
        for k in ("1", "3"):
            *folds_k, pooled = compared
            assert pooled["better"][k] == sum(c["better"][k] for c in folds_k), mode
            assert pooled["worse"][k] == sum(c["worse"][k] for c in folds_k), mode
            for c, questions in zip(compared, (3, 2, 5), strict=True):
                assert c["better"][k] + c["worse"][k] <= questions
                assert 0.0 < c["p"][k] <= 1.0
    # Across both conversations, each question's evidence has a twin in the other one.
    across = _eval(path, "--cross-validate", "--scope", "user", "--mode", "keyword", "--k", "1,3",
                   "--json", env=cli_env)  # fmt: skip
    assert across.returncode == 0, across.stderr
    user = json.loads(across.stdout)
    assert user["scope"] == "user"
    assert user["held_out"]["keyword"]["questions"]["overall"] == 5
    assert user["whole_file"]["keyword"]["recall"]["1"] < 100.0
    assert user["hybrid_against"] == {}  # no hybrid measured, nothing to compare
    text = _eval(path, "--cross-validate", "--mode", "keyword", env=cli_env)
    assert text.returncode == 0, text.stderr
    assert "held-out folds" in text.stdout
    assert "hybrid against" not in text.stdout
    one = tmp_path / "one.json"
    one.write_text(json.dumps([_sample(TINY_QA)]))
    refused = _eval(one, "--cross-validate", env=cli_env)
    assert refused.returncode == 1
    assert "at least two conversations" in refused.stderr


def test_budget_recall_on_a_locomo_slice(cli_env: dict[str, str]) -> None:
    """Memory's budgeted context holds more evidence than either baseline at every window.

    Measured on conv-26 (150 questions), counted with the embedded model's tokenizer:
    memory 78.1 / 86.3 / 91.0 at 1,024 / 2,048 / 4,096 tokens, the top ten until full 77.8 /
    79.4 / 79.4, the last turns that fit 0.3 / 6.7 / 20.2.
    """
    done = _eval(
        locomo_dev(), "--conversations", "1", "--budget", "1024,2048,4096", "--json", env=cli_env
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["questions"] == 150
    assert report["counted_with"] == "embedded model"
    methods = report["methods"]
    for window in ("1024", "2048", "4096"):
        memory = methods["memory"]["recall"][window]
        assert memory >= methods["top_k"]["recall"][window], (window, methods)
        assert memory > methods["last_turns"]["recall"][window], (window, methods)
        # The prompt fits: memory, the question and the framing within the window's room.
        assert methods["memory"]["tokens"][window] <= int(window) - min(512, int(window) // 4)
    assert methods["memory"]["recall"]["2048"] > methods["top_k"]["recall"]["2048"] + 3
    assert methods["memory"]["recall"]["2048"] >= 84.0
