"""The context budget: prompts fit the model's window, counted with the model's tokenizer."""

from __future__ import annotations

import random
import string
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_chain.chat.budget import (
    FACTS_HEADING,
    MEMORIES_HEADING,
    Budget,
    BuiltPrompt,
    build_prompt,
    fact_line,
    instructions,
)
from memory_chain.chat.excerpt import CUT, excerpt
from memory_chain.chat.lines import memory_label
from memory_chain.errors import ContextOverflowError, InvalidInputError
from memory_chain.local_llm.tokenizer import GGUFTokenCounter
from memory_chain.schemas import MemoryContext, MemoryItem, Turn
from memory_chain.tokens import EstimatingCounter, upper_bound_tokens

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
WORDS = " ".join(
    [
        "we fly to Lisbon on the third of May and the hotel near river costs 120 euros a night",
        "my daughter Mia turns 7 in June she loves bikes the locker code is 4471 remember that",
        "ERROR worker-3 request_id=9f2c1e0b path=/api/v1/users/8812/orders ConnectionResetError",
        "def main(argv): return parse(argv[1:]) # TODO ünïcödé 東京 café naïve 🚲 ☕ Москва",
    ]
).split()
_ROLE = {"system": "system", "human": "user", "ai": "assistant"}


def text(rng: random.Random, words: int) -> str:
    """``words`` words of chat, logs, code and other scripts, with some line breaks."""
    picked = [rng.choice(WORDS) for _ in range(max(words, 1))]
    return " ".join(w + ("\n" if rng.random() < 0.05 else "") for w in picked).strip()


def rendered(counter: GGUFTokenCounter, built: BuiltPrompt) -> int:
    """The prompt's tokens as the model reads it: its chat template rendered, then counted."""
    return counter.render_and_count(
        [{"role": _ROLE[m.type], "content": str(m.content)} for m in built.messages]
    )


def _turn(number: int, role: str, content: str) -> Turn:
    return Turn("chat", number, role, content, T0 + timedelta(minutes=number))  # type: ignore[arg-type]


def _item(
    number: int, content: str, *, kind: str = "turn", conversation: str = "old"
) -> MemoryItem:
    return MemoryItem(
        tier="tier3",
        kind=kind,  # type: ignore[arg-type]
        conversation_id=conversation,
        content=content,
        timestamp=T0 - timedelta(days=number),
        score=1.0 / (number + 1),
        turn_number=number + 1,
        role="user",
    )


def _context(
    rng: random.Random, recent: int, items: int, facts: int, *, sizes: tuple[int, int]
) -> MemoryContext:
    def size() -> int:
        # Mostly short turns; now and then a pasted document.
        return rng.randint(*sizes) if rng.random() < 0.15 else rng.randint(1, 60)

    return MemoryContext(
        conversation_id="chat",
        user_id="ana",
        summary=text(rng, rng.randint(20, 400)) if rng.random() < 0.6 else None,
        recent=tuple(
            _turn(n + 1, "user" if n % 2 == 0 else "assistant", text(rng, size()))
            for n in range(recent)
        ),
        items=tuple(_item(n, text(rng, size())) for n in range(items)),
        facts=tuple(
            _item(100 + n, text(rng, rng.randint(3, 30)), kind="fact") for n in range(facts)
        ),
    )


@settings(
    max_examples=70,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    window=st.integers(256, 8192),
    max_tokens=st.one_of(st.none(), st.integers(1, 2048)),
    shape=st.tuples(st.integers(0, 10), st.integers(0, 30), st.integers(0, 6)),
    message_words=st.one_of(st.integers(1, 40), st.integers(40, 6000)),
    system_words=st.one_of(st.just(0), st.integers(1, 300)),
)
def test_the_prompt_never_exceeds_the_window_counted_with_the_models_tokenizer(
    qwen: GGUFTokenCounter,
    seed: int,
    window: int,
    max_tokens: int | None,
    shape: tuple[int, int, int],
    message_words: int,
    system_words: int,
) -> None:
    rng = random.Random(seed)
    try:
        budget = Budget.of(window=window, max_tokens=max_tokens, default_reply=512)
    except InvalidInputError:
        assert max_tokens is not None
        assert max_tokens >= window - 16
        return
    context = _context(rng, *shape, sizes=(200, 4000))
    message = text(rng, message_words)
    system = text(rng, system_words) if system_words else ""
    try:
        built = build_prompt(
            system=system, context=context, message=message, budget=budget, counter=qwen
        )
    except ContextOverflowError:
        # Refused only when the instructions and the message alone nearly fill the window.
        alone = qwen.render_and_count(
            [
                {"role": "system", "content": instructions(system)},
                {"role": "user", "content": message},
            ]
        )
        assert alone > budget.prompt - 40, (alone, budget)
        return
    real = rendered(qwen, built)
    assert built.tokens <= budget.prompt
    assert real <= budget.prompt, (real, built.tokens, budget)
    # The message is always there, whole; the instructions first.
    assert built.messages[-1].content == message
    assert str(built.messages[0].content).startswith(system or "You are")


def test_memory_fills_the_room_the_message_leaves(qwen: GGUFTokenCounter) -> None:
    rng = random.Random(7)
    context = _context(rng, 10, 30, 4, sizes=(10, 60))
    small = build_prompt(
        system="",
        context=context,
        message="Where do we fly?",
        budget=Budget.of(window=1024, max_tokens=None, default_reply=512),
        counter=qwen,
    )
    large = build_prompt(
        system="",
        context=context,
        message="Where do we fly?",
        budget=Budget.of(window=8192, max_tokens=None, default_reply=512),
        counter=qwen,
    )
    assert small.budget.reserve == 256  # a quarter of a small window
    assert rendered(qwen, small) <= 768
    sizes = {s.name: len(s.entries) for s in large.sections}
    assert (sizes["recent"], sizes["memories"], sizes["facts"]) == (10, 30, 4)
    assert sum(len(s.entries) for s in small.sections) < sum(sizes.values())
    # What the large window holds in all, the small one holds in part, in the same order.
    assert [s.name for s in small.sections] == [s.name for s in large.sections]
    system = str(large.messages[0].content)
    assert system.index(FACTS_HEADING) < system.index(MEMORIES_HEADING)


def test_facts_are_dated_by_when_the_user_told_them() -> None:
    porto = _item(40, "I live in Porto.", kind="fact")
    berlin = _item(2, "We moved to Berlin last month.", kind="fact")
    context = MemoryContext("chat", "ana", None, (), (), facts=(porto, berlin))
    built = build_prompt(
        system="",
        context=context,
        message="Any walks near me?",
        budget=Budget.of(window=4096, max_tokens=None, default_reply=512),
        counter=EstimatingCounter(),
    )
    (section,) = [s for s in built.sections if s.name == "facts"]
    told = [f"{porto.timestamp:%Y-%m-%d %H:%M}", f"{berlin.timestamp:%Y-%m-%d %H:%M}"]
    # "last month" is also given as the month it names, counted from when it was told.
    month_before = (berlin.timestamp.replace(day=1) - timedelta(days=1)).strftime("%B %Y")
    assert [e.text for e in section.entries] == [
        f"- ({told[0]}) I live in Porto.",
        f'- ({told[1]}; "last month" = {month_before}) We moved to Berlin last month.',
    ]
    assert [e.text for e in section.entries] == [fact_line(porto), fact_line(berlin)]
    system = str(built.messages[0].content)
    assert f"{FACTS_HEADING}\n{fact_line(porto)}\n{fact_line(berlin)}" in system
    assert "the later holds" in FACTS_HEADING


def test_unused_room_passes_on_to_the_sections_after() -> None:
    counter = EstimatingCounter()
    rng = random.Random(3)
    items = tuple(_item(n, text(rng, 40)) for n in range(40))
    context = MemoryContext("chat", "ana", None, (), items)
    built = build_prompt(
        system="",
        context=context,
        message="bikes?",
        budget=Budget.of(window=4096, max_tokens=None, default_reply=512),
        counter=counter,
    )
    memories = next(s for s in built.sections if s.name == "memories")
    # No facts, summary or recent turns: recalled items get all the room they left.
    assert memories.room > 0.9 * (built.budget.prompt - 100)
    assert built.tokens > 0.9 * built.budget.prompt


def test_a_long_recent_turn_enters_as_an_excerpt_around_what_is_asked(
    qwen: GGUFTokenCounter,
) -> None:
    rng = random.Random(11)
    filler = [text(rng, 80) for _ in range(120)]
    paste = "\n".join([*filler[:60], "kernel: ENOSPC on /var/lib/postgres", *filler[60:]])
    context = MemoryContext(
        "chat", "ana", None, (_turn(1, "user", paste), _turn(2, "assistant", "Got it.")), ()
    )
    built = build_prompt(
        system="",
        context=context,
        message="What was the ENOSPC error about?",
        budget=Budget.of(window=2048, max_tokens=None, default_reply=512),
        counter=qwen,
    )
    recent = next(s for s in built.sections if s.name == "recent")
    first, second = recent.entries
    assert (first.cut, second.cut) == (True, False)
    assert "ENOSPC on /var/lib/postgres" in first.text
    assert first.text.startswith(CUT)
    assert first.text.endswith(CUT)
    assert rendered(qwen, built) <= built.budget.prompt


def test_a_message_that_cannot_fit_is_refused_with_the_numbers(qwen: GGUFTokenCounter) -> None:
    message = text(random.Random(5), 3000)
    with pytest.raises(ContextOverflowError) as caught:
        build_prompt(
            system="",
            context=MemoryContext("chat", "ana", None, (), ()),
            message=message,
            budget=Budget.of(window=2048, max_tokens=None, default_reply=512),
            counter=qwen,
            model="small:1b",
        )
    error = caught.value
    assert error.message_tokens == qwen.count(message)
    assert (error.window, error.reserve) == (2048, 512)
    assert f"{error.message_tokens:,} tokens" in str(error)
    assert "'small:1b'" in str(error)
    assert "2,048" in str(error)


def test_an_excerpt_holds_the_detail_and_fits(qwen: GGUFTokenCounter) -> None:
    rng = random.Random(2)
    before, after = text(rng, 2000), text(rng, 2000)
    long = f"{before}\nThe spare key is under the blue flowerpot.\n{after}"
    cut = excerpt(long, "where is the spare key?", 120, qwen)
    assert "spare key is under the blue flowerpot" in cut
    assert cut.startswith(CUT)
    assert cut.endswith(CUT)
    assert qwen.count(cut) <= 120
    assert excerpt("short text", "key", 120, qwen) == "short text"
    # No word matches: the start, cut at its end.
    head = excerpt(long, "zebra", 60, qwen)
    assert head.endswith(CUT)
    assert not head.startswith(CUT)
    assert qwen.count(head) <= 60
    assert excerpt(long, "key", 2, qwen) == ""


def _random(rng: random.Random, alphabet: str, longest: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, longest)))


def test_the_estimate_counts_high_on_every_kind_of_text(qwen: GGUFTokenCounter) -> None:
    """For a model whose tokenizer memory_chain lacks, the estimate must not count short."""
    rng = random.Random(0)
    hexes, b64 = "0123456789abcdef", string.ascii_letters + string.digits + "+/"
    kinds = {
        "prose": [text(rng, rng.randint(1, 200)) for _ in range(200)],
        "code": [
            Path(path).read_text(encoding="utf-8")[:4000]
            for path in ("memory_chain/chat/budget.py", "memory_chain/tokens.py")
        ],
        "hex": [_random(rng, hexes, 64) for _ in range(300)],
        "base64": [_random(rng, b64, 88) for _ in range(300)],
        "letters": [_random(rng, string.ascii_letters, 60) for _ in range(300)],
        "printable": [_random(rng, string.printable, 80) for _ in range(300)],
        "chinese": [_random(rng, "".join(map(chr, range(0x4E00, 0x5A00))), 40) for _ in range(200)],
        "emoji": [_random(rng, "".join(map(chr, range(0x1F600, 0x1F64F))), 20) for _ in range(200)],
    }
    for kind, texts in kinds.items():
        real = [qwen.count(t) for t in texts]
        estimated = [upper_bound_tokens(t) for t in texts]
        assert sum(estimated) >= sum(real), kind
        assert max(r - e for r, e in zip(real, estimated, strict=True)) <= 3, kind


def test_a_large_profile_costs_the_prompt_the_facts_that_fit() -> None:
    counted: list[str] = []

    class Counting(EstimatingCounter):
        def count_many(self, texts: list[str]) -> list[int]:
            counted.extend(texts)
            return super().count_many(texts)

    facts = tuple(
        _item(n, f"Note {n}: I care about hiking and sushi; Ana lives in Porto.", kind="fact")
        for n in range(64)  # a profile's read: the 64 most relevant of a large one
    )
    context = MemoryContext("chat", "ana", None, (), (), facts=facts)
    built = build_prompt(
        system="",
        context=context,
        message="Any walks near me?",
        budget=Budget.of(window=2048, max_tokens=None, default_reply=512),
        counter=Counting(),
    )
    (section,) = [s for s in built.sections if s.name == "facts"]
    fitted = len(section.entries)
    assert 0 < fitted < 20
    assert [e.text for e in section.entries] == [fact_line(f) for f in facts[:fitted]]
    lines = [text for text in counted if text.startswith("- (")]
    assert len(lines) <= fitted + 8  # the lines that fit, and one batch more at most


def test_a_recalled_turn_s_relative_times_are_given_as_dates() -> None:
    # A model that sees "yesterday" under a date answers "yesterday" when asked when: the
    # line also says which day that was, counted from when the turn was said.
    interview = _item(3, "I had my design internship interview yesterday!")
    summary = replace(_item(1, "Gina talked about an interview yesterday."), kind="summary")
    context = MemoryContext("chat", "ana", None, (), (interview, summary))
    built = build_prompt(
        system="",
        context=context,
        message="When was the interview?",
        budget=Budget.of(window=4096, max_tokens=None, default_reply=512),
        counter=EstimatingCounter(),
    )
    (section,) = [s for s in built.sections if s.name == "memories"]
    day_before = (interview.timestamp - timedelta(days=1)).date().isoformat()
    texts = [e.text for e in section.entries]
    assert f'another one; "yesterday" = {day_before}) I had my' in texts[0]
    assert texts[0] in str(built.messages[0].content)
    assert '"yesterday" =' not in texts[1]  # a summary's date is its last turn's: left alone


def test_an_excerpted_turn_s_label_dates_only_what_it_shows() -> None:
    # A long turn is cut around the question's words; "yesterday" in the part cut out would
    # name a date for words the model cannot see.
    filler = " ".join(f"We walked past house number {n} on the long street." for n in range(300))
    long_turn = _item(3, f"My interview went well. {filler} Yesterday I painted the fence.")
    context = MemoryContext("chat", "ana", None, (), (long_turn,))
    built = build_prompt(
        system="",
        context=context,
        message="How did the interview go?",
        budget=Budget.of(window=4096, max_tokens=None, default_reply=512),
        counter=EstimatingCounter(),
    )
    (section,) = [s for s in built.sections if s.name == "memories"]
    (entry,) = section.entries
    assert entry.cut
    assert "My interview went well." in entry.text
    assert "painted the fence" not in entry.text
    assert '"yesterday" =' not in entry.text.casefold()
    # The whole turn's label names that day.
    assert '"yesterday" =' in memory_label(long_turn, "chat").casefold()
