"""The answers benchmark's parts that need no model: scoring, the paired test, the prompts.

``benchmarks/bench_answers.py`` asks a real model; here a fake one stands in, and what is
checked is what the benchmark computes from replies and how it builds the history prompts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from memory_chain.chat.budget import Budget, build_prompt
from memory_chain.chat.models import OneModel
from memory_chain.eval.answer_score import contains_answer
from memory_chain.eval.answers import answer
from memory_chain.eval.history_prompt import (
    QUESTION_ROOM,
    dated_turns,
    history_context,
    turns_that_fit,
)
from memory_chain.eval.locomo_data import LocomoSample, load_locomo
from memory_chain.eval.paired import bootstrap_interval, paired_test
from memory_chain.schemas import Turn
from memory_chain.tokens import EstimatingCounter
from tests.bench_scripts import benchmark_module
from tests.fake_chat import Scripted


def test_contains_compares_normalized_words_in_order() -> None:
    assert contains_answer("She went on the Lisbon trip!", "lisbon trip", 4)
    assert contains_answer("7 May, 2023.", "7 May 2023", 2)  # commas and punctuation go
    assert not contains_answer("the trip to Lisbon", "Lisbon trip", 4)  # words in order
    assert not contains_answer("Lisbonne", "Lisbon", 4)  # whole words only
    assert not contains_answer("anything", "...", 4)  # no words: never contained
    # A multi-hop reference needs every part, in any order; other categories the whole.
    assert contains_answer("Camping and pottery, also painting", "pottery, camping", 1)
    assert not contains_answer("camping only", "pottery, camping", 1)
    assert contains_answer("pottery and camping", "pottery, camping", 4)  # "and" goes too
    assert not contains_answer("camping and pottery", "pottery, camping", 4)


def test_the_paired_test_counts_pairs_and_brackets_the_mean() -> None:
    test = paired_test([1.0, 0.5, 1.0, 0.0, 0.25], [0.0, 0.5, 0.5, 0.0, 0.5])
    assert (test.n, test.better, test.worse, test.ties) == (5, 2, 1, 2)
    assert test.mean_difference == pytest.approx(0.25)
    assert test.low <= test.mean_difference <= test.high
    assert test.sign_p == pytest.approx(1.0)  # 2 against 1 is a coin's split
    assert not test.outside_noise
    # Forty questions all one point better: the interval is away from 0 and the sign test agrees.
    clear = paired_test([1.0] * 40, [0.0] * 40)
    assert clear.outside_noise
    assert clear.low == clear.high == 1.0
    assert clear.sign_p < 1e-9
    assert clear.as_dict()["outside_noise"] is True
    one = paired_test([1.0], [0.0])  # an interval of one value, but one question is no evidence
    assert one.low == one.high == 1.0
    assert not one.outside_noise


def test_the_bootstrap_is_seeded_and_checks_its_input() -> None:
    differences = [0.1, -0.4, 0.3, 0.0, 0.2, -0.1]
    assert bootstrap_interval(differences, seed=1) == bootstrap_interval(differences, seed=1)
    low, high = bootstrap_interval(differences, level=0.5)
    wide_low, wide_high = bootstrap_interval(differences, level=0.99)
    assert wide_low <= low <= high <= wide_high
    with pytest.raises(ValueError, match="at least one"):
        paired_test([], [])
    with pytest.raises(ValueError, match="pairs need both"):
        paired_test([1.0], [1.0, 0.0])


def _conversation(sessions: int = 3, per_session: int = 20) -> list[Turn]:
    turns = []
    for session in range(sessions):
        start = datetime(2023, 5, 8, 13, 56, tzinfo=UTC) + timedelta(days=7 * session)
        for index in range(per_session):
            number = session * per_session + index + 1
            speaker = "Ana" if index % 2 == 0 else "Ben"
            turns.append(
                Turn(
                    "conv",
                    number,
                    "user" if speaker == "Ana" else "assistant",
                    f"{speaker}: turn {number} of the conversation, about the garden and travel.",
                    start + timedelta(seconds=30 * index),
                )
            )
    return turns


def test_each_session_starts_with_its_date() -> None:
    dated = dated_turns(_conversation())
    labelled = [turn.turn_number for turn in dated if turn.content.startswith("(")]
    assert labelled == [1, 21, 41]
    assert dated[20].content.startswith("(2023-05-15 13:56) Ana: turn 21")
    assert dated[21].content == _conversation()[21].content  # the rest as stored


@pytest.mark.parametrize("window", [512, 1024, 8192])
def test_the_history_fits_the_window_whole_and_the_same_for_every_question(window: int) -> None:
    counter = EstimatingCounter()
    turns = dated_turns(_conversation())
    budget = Budget.of(window=window, max_tokens=None, default_reply=64)
    kept = turns_that_fit(turns, budget, counter)
    assert kept == turns[len(turns) - len(kept) :]  # the newest turns, in order
    total = sum(counter.count(turn.content) for turn in turns)
    if window == 8192:
        assert kept == turns  # the whole conversation fits
        assert total < window
    else:
        assert 0 < len(kept) < len(turns)
    context = history_context("conv", "user", kept)
    questions = ["When?", "What did Ana plant in the garden in May? " * 3]
    assert counter.count(questions[1]) <= QUESTION_ROOM
    built = [
        build_prompt(system="", context=context, message=q, budget=budget, counter=counter)
        for q in questions
    ]
    for prompt in built:
        assert prompt.tokens <= budget.prompt
        assert [m.content for m in prompt.messages[1:-1]] == [t.content for t in kept]
    # Only the question differs: the model's cache of the rest serves every question.
    assert built[0].messages[:-1] == built[1].messages[:-1]
    if len(kept) < len(turns):
        # Filled up to the question's room and the next older turn (about 25 tokens).
        assert budget.prompt - built[0].tokens < QUESTION_ROOM + 40


#: Says "Lisbon" and reports its prompt's tokens.
LISBON = AIMessage(
    "Lisbon", usage_metadata={"input_tokens": 321, "output_tokens": 2, "total_tokens": 323}
)


def test_an_answer_is_built_for_the_window_asked_and_reports_the_model_s_count() -> None:
    model = Scripted(otherwise=LISBON)
    core: Any = SimpleNamespace(models=OneModel(model, window=32768), default_reply_tokens=64)
    context = history_context("conv", "user", _conversation(sessions=30))
    whole = answer(core, context, "Where?")
    assert (whole.text, whole.prompt_tokens) == ("Lisbon", 321)
    assert whole.seconds >= 0
    small = answer(core, context, "Where?", window=1024)
    sent = [len(prompt) for prompt in model.prompts]
    assert sent[0] == 600 + 2  # every turn, the system message and the question
    assert sent[1] < 60  # cut to the window asked for
    assert isinstance(model.prompts[1][0], SystemMessage)
    assert small.prompt_tokens == 321


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """``benchmarks/bench_answers.py`` as the scripts import each other."""
    with benchmark_module("bench_answers") as module:
        yield module


def _row(category: str, scores: dict[str, tuple[float, bool, int]]) -> dict[str, Any]:
    return {
        "category": category,
        **{
            name: {"f1": f1, "contains": contains, "prompt_tokens": tokens, "seconds": 2.0}
            for name, (f1, contains, tokens) in scores.items()
        },
    }


def test_the_report_pairs_memory_with_the_whole_conversation(bench: ModuleType) -> None:
    names = bench.conditions(facts=False)
    assert names == ["memory 2048", "memory 4096", "none", "whole", "last 4096"]
    assert bench.conditions(facts=True)[:2] == ["memory 2048 +facts", "memory 4096 +facts"]
    scores = {
        "memory 2048": (1.0, True, 1800),
        "memory 4096": (1.0, True, 2500),
        "none": (0.0, False, 60),
        "whole": (0.5, False, 16000),
        "last 4096": (0.0, False, 3900),
    }
    rows = [_row("single-hop", scores)] * 3 + [
        _row("temporal", scores | {"whole": (1.0, True, 16000)})
    ]
    lines, results = bench.report(rows, names)
    memory = results["conditions"]["memory 4096"]
    assert (memory["f1"], memory["contains"], memory["prompt_tokens"]) == (100.0, 100.0, 2500)
    assert results["conditions"]["whole"]["per_category"]["temporal"]["f1"] == 100.0
    assert results["per_category_n"] == {"single-hop": 3, "temporal": 1}
    test = results["paired"]["memory 4096 - whole: f1"]
    assert (test["better"], test["worse"], test["ties"]) == (3, 0, 1)
    assert any("memory 4096 - whole, f1: +37.5" in line for line in lines)
    verdicts = bench.verdicts(results)
    assert verdicts == {
        "memory 2048 F1 >= whole": "ok",
        "memory 2048 tokens <= 1/4 whole": "ok",
        "memory 4096 F1 >= whole": "ok",
        "memory 4096 tokens <= 1/4 whole": "ok",
    }
    # No question answered (a run stopped at once): a report, no tests, no verdicts.
    assert bench.report([], names)[1]["paired"] == {}
    assert bench.verdicts({"conditions": {}}) == {}


def echo(messages: list[BaseMessage]) -> str:
    """The last turn before the question, or the first recalled line, or nothing."""
    system = str(messages[0].content)
    if len(messages) > 2:
        return str(messages[-2].content)
    if "Relevant memories" in system:
        return system.split("(most relevant first):\n", 1)[1].splitlines()[0]
    return "I do not know."


def _tiny(
    tmp_path: Path, talk: list[tuple[str, str]], qa: tuple[str, str, int]
) -> list[LocomoSample]:
    """A one-session LoCoMo file of ``talk`` (said on 8 May 2023) and one question, loaded."""
    question, reference, category = qa
    sample = {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": s, "dia_id": f"D1:{i}", "text": t}
                for i, (s, t) in enumerate(talk, start=1)
            ],
        },
        "qa": [{"question": question, "answer": reference, "evidence": ["D1:1"],
                "category": category}],
    }  # fmt: skip
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]))
    return load_locomo(path)[0]


def test_a_question_is_asked_every_way_on_a_stored_conversation(
    bench: ModuleType, tmp_path: Path
) -> None:
    from memory_chain.chat.core import ChatCore
    from memory_chain.eval.locomo import ingested

    talk = [("Ana", "I adopted a cat named Miso yesterday.")] + [
        ("Ben" if i % 2 else "Ana", f"Small talk number {i} about the weather today.")
        for i in range(1, 40)
    ]
    samples = _tiny(tmp_path, talk, ("What is the name of Ana's cat?", "Miso", 4))
    with ingested(samples, None, lambda *_: None, {}, user_of=bench.user_of) as (manager, _):
        cores = {
            window: ChatCore(
                manager, OneModel(Scripted(otherwise=echo), window=window), default_reply_tokens=64
            )
            for window in (4096, 400)
        }
        history = {
            bench.WHOLE: bench.histories(cores[4096], 4096, samples[0]),
            "last": bench.histories(cores[400], 400, samples[0]),
        }
        asking = bench.Asking(cores[4096], cores[4096], cores[400], history)
        row = bench.ask(asking, samples[0], samples[0].questions[0], 1, bench.conditions(False))
        assert manager.turns("question-1", bench.user_of(samples[0])) == []  # left behind: none
    assert len(history[bench.WHOLE].recent) == 40
    assert history[bench.WHOLE].recent[0].content.startswith("(2023-05-08 13:56) Ana: I adopted")
    assert 0 < len(history["last"].recent) < 40
    assert set(bench.conditions(facts=False)) <= set(row)
    assert row["memory 2048"]["contains"]  # the cat is found by retrieval
    assert row["whole"]["f1"] == 0.0  # the echo says the last turn: small talk
    assert row["none"]["reply"] == "I do not know."
    tokens = {name: row[name]["prompt_tokens"] for name in bench.conditions(facts=False)}
    assert tokens["none"] < tokens["last 4096"] < 400 < tokens["whole"]


def test_a_stopped_run_has_asked_a_mix_of_questions(bench: ModuleType) -> None:
    from memory_chain.eval.locomo_data import LocomoQuestion, LocomoSample

    questions = [LocomoQuestion(f"q{i}", 1 + i // 10, ("D1:1",), "a") for i in range(40)]
    sample = LocomoSample("conv", ("Ana", "Ben"), [], questions)
    asked = bench.asked_order(sample, 40, seed=0)
    assert asked == bench.asked_order(sample, 40, seed=0)  # seeded
    assert sorted(q.question for _, q in asked) == sorted(q.question for q in questions)
    first = {q.category for _, q in asked[:12]}
    assert len(first) >= 3  # in file order the first 12 would be two kinds


def test_the_dates_ablation_asks_memory_without_its_resolved_dates(
    bench: ModuleType, tmp_path: Path
) -> None:
    from memory_chain.chat.core import ChatCore
    from memory_chain.eval.locomo import ingested

    names = bench.conditions(False, dates_ablation=True, only="memory 4096,memory 4096 -dates")
    assert names == ["memory 4096", "memory 4096 -dates"]
    with pytest.raises(SystemExit, match="no condition memory 9"):
        bench.conditions(False, only="memory 9")
    talk = [("Ana", "I adopted a cat, Miso, yesterday."), ("Ben", "Lovely! What colour is she?")]
    samples = _tiny(tmp_path, talk, ("When did Ana adopt Miso?", "7 May 2023", 2))
    model = Scripted(otherwise="7 May 2023")
    with ingested(samples, None, lambda *_: None, {}, user_of=bench.user_of) as (manager, _):
        core = ChatCore(manager, OneModel(model, window=4096), default_reply_tokens=64)
        asking = bench.Asking(core, core, core, {})
        row = bench.ask(asking, samples[0], samples[0].questions[0], 1, names)
    dated, undated = (str(prompt[0].content) for prompt in model.prompts)
    assert '"yesterday" = 2023-05-07) Ana: I adopted a cat, Miso, yesterday.' in dated
    assert "Miso, yesterday." in undated
    assert '"yesterday" =' not in undated
    assert row["memory 4096"]["f1"] == 1.0
    rows = [row | {"category": "temporal"}]
    _, results = bench.report(rows, names)
    assert set(results["paired"]) == {
        "memory 4096 - memory 4096 -dates: f1",
        "memory 4096 - memory 4096 -dates: contains",
    }
    # Only the questions of a category, when asked for.
    temporal = bench.asked_order(samples[0], 5, seed=0, category="temporal")
    assert [q.question for _, q in temporal] == ["When did Ana adopt Miso?"]
    assert bench.asked_order(samples[0], 5, seed=0, category="single-hop") == []


class _Reading:
    """An extractor that records the turns it is given, finds nothing in them and files one
    fact per range all the same (what filing did is counted)."""

    def __init__(self) -> None:
        self.read: list[Turn] = []

    def extract(self, user_id: str, turns: list[Turn]) -> list[Any]:
        self.read += turns
        return []

    def file(self, *args: Any, **kwargs: Any) -> list[Any]:
        return [SimpleNamespace(action="added")]


def test_facts_are_learnt_from_the_turns_as_said_without_the_speakers_name(
    tmp_path: Path,
) -> None:
    from memory_chain.eval.locomo import ingested

    talk = [("Ana", "I adopted a cat named Miso."), ("Ben", "Ana: that is what I call news!")]
    samples = _tiny(tmp_path, talk, ("What is the name of Ana's cat?", "Miso", 4))
    reading = _Reading()
    with (
        benchmark_module("bench_answers_facts") as facts_bench,
        ingested(samples, None, lambda *_: None, {}, user_of=facts_bench.user_of) as (
            manager,
            numbers,
        ),
    ):
        stored = manager.turns(samples[0].sample_id, facts_bench.user_of(samples[0]))
        said: list[str] = []
        run = SimpleNamespace(progress=said.append)
        facts_bench.learn_facts(manager, reading, samples[0], numbers["tiny"], 10, run)
    # Stored with the name, for retrieval and the answering model; read without it.
    assert [t.content for t in stored] == [f"{s}: {t}" for s, t in talk]
    assert [(t.role, t.content) for t in reading.read] == [
        ("user", "I adopted a cat named Miso."),
        ("assistant", "Ana: that is what I call news!"),  # only the speaker's own name goes
    ]
    assert said[-1] == "tiny: filed 1 added"  # one session, one range
