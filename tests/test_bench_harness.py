"""The benchmarks' harness (``benchmarks/harness/``): the order variants take, ratios, tables.

Nothing here is timed: what is checked is which variant ran when, what was kept, and the
figures computed from given samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from tests.bench_scripts import benchmark_module


@pytest.fixture(scope="module")
def harness() -> Iterator[ModuleType]:
    """The harness as the benchmark scripts import it (``benchmarks/`` on the path)."""
    with benchmark_module("harness") as module:
        yield module


def test_variants_take_turns_and_the_warm_up_is_not_kept(harness: ModuleType) -> None:
    calls: list[tuple[str, int]] = []
    checked: list[tuple[str, int, int]] = []

    def variant(name: str) -> Callable[[int], int]:
        def call(item: int) -> int:
            calls.append((name, item))
            return item * 10

        return call

    timings = harness.alternate(
        {name: variant(name) for name in ("a", "b", "c")},
        [0, 1, 2, 3],
        warmup=1,
        before=lambda name, item: calls.append((f"before {name}", item)),
        after=lambda name, item, result: checked.append((name, item, result)),
    )
    runs = [entry for entry in calls if not entry[0].startswith("before")]
    assert runs == [
        ("a", 0), ("b", 0), ("c", 0),
        ("b", 1), ("c", 1), ("a", 1),
        ("c", 2), ("a", 2), ("b", 2),
        ("a", 3), ("b", 3), ("c", 3),
    ]  # fmt: skip
    assert calls[:2] == [("before a", 0), ("a", 0)]
    assert ("b", 2, 20) in checked
    assert len(checked) == 12
    assert {name: len(samples) for name, samples in timings.samples.items()} == {
        "a": 3,
        "b": 3,
        "c": 3,
    }


@pytest.mark.parametrize(
    ("order", "second"), [("reverse", ["b", "a"]), ("fixed", ["a", "b"]), ("rotate", ["b", "a"])]
)
def test_the_order_of_the_second_input(harness: ModuleType, order: str, second: list[str]) -> None:
    seen: list[str] = []
    harness.alternate(
        {"a": lambda _: seen.append("a"), "b": lambda _: seen.append("b")}, [0, 1], order=order
    )
    assert seen[2:] == second


def test_ratios_of_given_samples(harness: ModuleType) -> None:
    timings = harness.Timings({"before": [10, 20, 40, 80], "after": [5, 10, 40, 40]})
    assert timings.ratio("after", "before") == pytest.approx(25 / 30)
    assert timings.paired_ratio("after", "before") == pytest.approx(0.5)
    assert timings.differences("after", "before") == [-5, -10, 0, -40]
    assert timings.summary("after")["n"] == 4
    assert timings.summary("after", unit="us")["max"] == pytest.approx(0.04)


def test_a_table_right_aligns_numbers_only(harness: ModuleType) -> None:
    lines = harness.table(("name", "n", "ok"), [("a", 1_000, True), ("long name", 3.5, False)])
    assert lines == [
        "  name           n  ok",
        "  a          1,000  yes",
        "  long name   3.50  NO",
    ]


def test_second_half_finds_the_middle_sample(harness: ModuleType) -> None:
    samples = [{"turns": turns} for turns in (0, 300, 480, 700, 1_000)]
    middle, last = harness.second_half(samples, "turns")
    assert (middle["turns"], last["turns"]) == (480, 1_000)
