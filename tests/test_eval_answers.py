"""Answer F1 on LoCoMo questions: the scoring, and the three ways a question is asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from memory_chain.config import MemorySettings
from memory_chain.eval.answer_score import answer_f1, token_f1
from memory_chain.eval.answers import answering_settings, evaluate_answers, sample_questions
from memory_chain.eval.locomo_data import load_locomo
from tests.fake_chat import Scripted


def test_f1_normalizes_like_locomo() -> None:
    assert token_f1("The Lisbon trip!", "lisbon trip") == 1.0
    assert token_f1("a red bicycle", "red car") == pytest.approx(0.5)
    assert token_f1("", "anything") == 0.0
    # Multi-hop references are scored per comma-separated part, each against its best match.
    assert answer_f1("pottery, camping", "camping, pottery, painting", 1) == pytest.approx(2 / 3)
    assert answer_f1("pottery, camping", "camping, pottery, painting", 4) == pytest.approx(0.8)


def first_memory(messages: list[BaseMessage]) -> str:
    """The first remembered item of the prompt, or the user's last turn, or nothing."""
    system = str(messages[0].content)
    if "Relevant memories" in system:
        first = system.split("Relevant memories (most relevant first):\n", 1)[1]
        return first.splitlines()[0].split(") ", 1)[1]
    if len(messages) > 2:
        return str(messages[-2].content)  # the last turn before the question
    return "I do not know."


def _file(tmp_path: Path) -> Path:
    turns = [
        ("Ana", "I adopted a cat named Miso last week."),
        ("Ben", "Congratulations! I am training for the Lisbon marathon."),
        *[("Ana" if i % 2 else "Ben", f"Small talk number {i}.") for i in range(12)],
    ]
    sample = {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "9:00 am on 1 March, 2024",
            "session_1": [
                {"speaker": s, "dia_id": f"D1:{i}", "text": t}
                for i, (s, t) in enumerate(turns, start=1)
            ],
        },
        "qa": [
            {"question": "What is the name of Ana's cat?", "answer": "Miso",
             "evidence": ["D1:1"], "category": 4},
            {"question": "Which marathon is Ben training for?", "answer": "Lisbon marathon",
             "evidence": ["D1:2"], "category": 4},
        ],
    }  # fmt: skip
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]))
    return path


def test_memory_makes_the_difference_and_nothing_is_left_behind(tmp_path: Path) -> None:
    path = _file(tmp_path)
    report = evaluate_answers(path, Scripted(otherwise=first_memory), questions=2)
    assert report.questions == {"overall": 2, "single-hop": 2}
    # The cat and the marathon are far behind the recent turns: only retrieval finds them.
    assert report.f1["memory"] > 30.0
    assert report.f1["recent"] == 0.0  # the last turns are small talk
    assert report.f1["none"] == 0.0
    assert set(report.seconds_per_answer) == {"memory", "recent", "none"}
    assert report.examples[0]["reference"] == "Miso"
    assert "Miso" in report.examples[0]["memory"]


def test_questions_are_sampled_with_a_seed(tmp_path: Path) -> None:
    samples, _ = load_locomo(_file(tmp_path))
    one = sample_questions(samples, 1, seed=3)
    assert one == sample_questions(samples, 1, seed=3)
    assert len(sample_questions(samples, 10)) == 2  # no more than there are
    with pytest.raises(ValueError, match="positive"):
        evaluate_answers(_file(tmp_path), Scripted(otherwise=first_memory), questions=0)


def test_the_benchmark_answers_greedily_and_briefly() -> None:
    settings = MemorySettings(llm_temperature=0.7, llm_max_tokens=512, ollama_chat_model="m:1b")
    answering = answering_settings(settings)
    assert (answering.llm_temperature, answering.llm_max_tokens) == (0.0, 64)
    assert answering.ollama_chat_model == "m:1b"  # the configured model, as it is
    assert settings.llm_temperature == 0.7  # the caller's settings are left alone
