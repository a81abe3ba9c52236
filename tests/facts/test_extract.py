"""Facts learnt at consolidation: the reply's schema and parsing, the prompt's budget, the
trust given to the model's "replaces", the consolidation that files them, and the embedded
model extracting a clearly stated fact.

Fake chat models answer with scripted JSON, except in the last test (the real embedded model
behind Ollama's API).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_ollama import ChatOllama
from pydantic import Field

from memory_chain.chat.models import ModelInfo
from memory_chain.consolidation import ConsolidationService
from memory_chain.extraction import (
    EXTRACTION_SYSTEM,
    MAX_FACT_TEXT,
    MAX_FACTS,
    SUBJECTS,
    ExtractionError,
    FactExtractor,
    extraction_schema,
    parse_extraction,
)
from memory_chain.facts.grounding import (
    Evidence,
    clean_subject,
    echoes_assistant,
    grounded,
    is_copied_turn,
    is_question,
    is_request,
    subject_key,
)
from memory_chain.facts.model import KINDS, FactDraft
from memory_chain.manager import MemoryManager
from memory_chain.messages import message_text
from memory_chain.schemas import CUT, NewTurn, Turn
from memory_chain.tiers.buffer import TurnBuffer
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from memory_chain.tokens import EstimatingCounter
from tests.fake_chat import NO_FACTS, ScriptedFacts, fact, reply


class RecordingOllama(ChatOllama):
    """A ``ChatOllama`` that answers no facts without a server; keeps each call's arguments."""

    calls: list[dict[str, Any]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(kwargs)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(NO_FACTS))])


def turns(*texts: str, first: int = 1) -> list[Turn]:
    """Turns alternating user, assistant, numbered from ``first``."""
    at = datetime(2026, 5, 1, tzinfo=UTC)
    return [
        Turn(
            conversation_id="chat",
            turn_number=first + i,
            role="user" if i % 2 == 0 else "assistant",
            content=text,
            timestamp=at,
        )
        for i, text in enumerate(texts)
    ]


@pytest.fixture
def facts(sqlite_store: SQLStore, embeddings: SentenceEmbeddings) -> FactStore:
    return FactStore(sqlite_store.database, embed=embeddings.embed_documents)


def stored(store: SQLStore, conversation_id: str, chat: list[Turn]) -> None:
    """Store ``chat`` as the user ana's conversation: facts are filed only for a stored one."""
    store.append_turns(
        conversation_id, [NewTurn(t.role, t.content, t.timestamp) for t in chat], user_id="ana"
    )


# -- the schema ---------------------------------------------------------------------------------


def test_the_schema_bounds_every_field() -> None:
    schema = extraction_schema(["F1", "F2"])
    items = schema["properties"]["facts"]
    assert items["maxItems"] == MAX_FACTS == 6
    item = items["items"]
    assert item["properties"]["kind"]["enum"] == list(KINDS)
    assert item["properties"]["replaces"]["enum"] == ["", "F1", "F2"]
    assert item["properties"]["subject"]["enum"] == ["", *SUBJECTS]
    assert item["properties"]["text"]["maxLength"] == 200
    assert item["properties"]["turn"]["type"] == "integer"
    assert set(item["required"]) == {"text", "kind", "subject", "turn", "replaces"}
    assert extraction_schema()["properties"]["facts"]["items"]["properties"]["replaces"] == {
        "type": "string",
        "enum": [""],
    }


def test_llama_cpp_makes_a_grammar_of_the_schema() -> None:
    pytest.importorskip("llama_cpp")
    from memory_chain.local_llm.engine import _grammar

    assert _grammar(extraction_schema([f"F{i}" for i in range(1, 9)])) is not None


# -- parsing --------------------------------------------------------------------------------------

CHAT = turns(
    "We moved to Porto last month, my daughter Mia turns seven in May.",
    "Congratulations! Porto is lovely. Try the bakery Manteigaria.",
    "Thanks. I work as a pharmacist. Do you know a good school?",
    "The Oporto British School is well rated.",
)


def test_a_reply_cut_short_keeps_its_complete_facts() -> None:
    whole = reply(
        fact("I moved to Porto last month.", 1),
        fact("My daughter Mia turns 7 in May.", 1),
        fact("I work as a pharmacist.", 3),
    )
    cut = whole[: whole.index("I work") + 5]
    found = parse_extraction(cut, CHAT)
    assert [f.text for f in found] == [
        "I moved to Porto last month.",
        "My daughter Mia turns 7 in May.",
    ]
    with pytest.raises(ExtractionError, match="cut before its first fact"):
        parse_extraction(whole[:30], CHAT)
    with pytest.raises(ExtractionError, match="not JSON"):
        parse_extraction("The user moved to Porto.", CHAT)
    assert parse_extraction(NO_FACTS, CHAT) == []
    # A model without the grammar may fence its JSON.
    assert len(parse_extraction(f"```json\n{whole}\n```", CHAT)) == 3


def test_questions_and_reported_questions_are_dropped() -> None:
    found = parse_extraction(
        reply(
            fact("Do you know a good school?", 3),
            fact("Where can I find a school", 3),
            fact("The user asked about a good school.", 3),
            fact("I work as a pharmacist.", 3),
        ),
        CHAT,
    )
    assert [f.text for f in found] == ["I work as a pharmacist."]
    assert is_question("Is Mia seven?")
    assert not is_question("Mia is seven.")


def test_requests_and_the_assistants_own_words_are_dropped() -> None:
    chat = turns(
        "I don't remember that movie's title. Also, please save this file as csv.",
        "I can't export files, but you can save it as CSV from your spreadsheet.",
        "Please no mushroom recipes, I can't stand mushrooms. Yes, the vegetarian option.",
    )
    found = parse_extraction(
        reply(
            fact("Also, please save this file as csv.", 1),  # a request to the assistant
            fact("I can't export files, but you can save it as CSV.", 1),  # the reply's words
            fact("Please no mushroom recipes, I can't stand mushrooms.", 3),  # a preference
            fact("I want the vegetarian option.", 3),  # said by both: the user's
            fact("I don't remember that movie's title.", 1),
        ),
        chat,
    )
    assert [f.text for f in found] == [
        "Please no mushroom recipes, I can't stand mushrooms.",
        "I want the vegetarian option.",
        "I don't remember that movie's title.",
    ]
    assert is_request("Kindly book the table for four.")
    assert not is_request("Please remember my wife is Ana.")
    assert not echoes_assistant("We moved to Porto.", ["We moved to Porto!"], ["Porto, nice."])


def test_a_turn_copied_whole_or_cut_at_the_length_limit_is_no_fact() -> None:
    said = (
        "Thanks, Mel! Your kind words mean a lot. I'll do my best for these kids. "
        "I quit my job. I start at Vetra on Monday. " + "I collect stamps from Peru " * 12
    )
    found = parse_extraction(
        reply(
            fact("Thanks, Mel! Your kind words mean a lot. I'll do my best for these kids.", 1),
            fact("I quit my job. I start at Vetra on Monday.", 1),  # two sentences: a fact
            fact(("I collect stamps from Peru " * 12)[:MAX_FACT_TEXT], 1),  # cut at the limit
        ),
        turns(said),
    )
    assert [f.text for f in found] == ["I quit my job. I start at Vetra on Monday."]
    assert not is_copied_turn("I live in St. Ives near Mr. Brown, who has a dog.")
    assert is_copied_turn("Hey! Long time no talk! Take a look at this.")


def test_facts_not_grounded_in_the_users_words_are_dropped() -> None:
    found = parse_extraction(
        reply(
            fact("I moved to York last month.", 1),  # the prompt's example, not this chat
            fact("My neighbour Farid plays the cello.", 3),
            fact("Farid is my neighbour.", 3),  # a name at the start counts too
            fact("My daughter Mia turns 8 in May.", 1),  # a number nobody said
            fact("I like the bakery Manteigaria.", 1),  # the assistant's words
            fact("I enjoy classical music.", 1),  # nothing the user said
            fact("The bakery in Porto is lovely, I should try it.", 1),  # mostly the reply's
            fact("My daughter Mia turns 7 in May.", 1),  # "seven" is 7
            fact("I am working as a pharmacist.", 3),  # "work" / "working"
        ),
        CHAT,
    )
    assert [f.text for f in found] == [
        "My daughter Mia turns 7 in May.",
        "I am working as a pharmacist.",
    ]
    said = Evidence.of(["My wife Ana's birthday is on 3 March."])
    assert grounded("Ana's birthday is 3 March.", said)
    assert not grounded("My birthday is 3 March 2024.", said)


def test_duplicates_vague_subjects_unknown_kinds_and_labels() -> None:
    found = parse_extraction(
        reply(
            fact("I work as a pharmacist.", 3, subject="user", kind="job"),
            fact("i work as a pharmacist", 3),
            fact(
                "I moved to Porto last month.",
                1,
                subject="The user's Home City",
                kind="biography",
                replaces="F9",
            ),
            fact("My daughter Mia turns 7 in May.", 1, subject="daughter", replaces="F1"),
        ),
        CHAT,
        labels=["F1"],
    )
    assert [(f.subject, f.kind, f.label) for f in found] == [
        (None, "other", None),
        ("home city", "biography", None),
        ("daughter", "other", "F1"),
    ]
    assert clean_subject("my wife's name") == "wife's name"
    assert clean_subject("Preference") is None
    assert clean_subject("the place where the user grew up as a child") is None
    # Several may hold at once: no subject to supersede by.
    assert [clean_subject(s) for s in ("Hobbies", "my pet", "friends", "Favourite Food")] == [
        None,
        None,
        None,
        "favourite food",
    ]
    assert subject_key("The user's Wife's Name") == subject_key("wife name") == "wife name"
    assert subject_key("home cities") == subject_key("A home city") == "home city"


def test_turns_map_to_the_nearest_user_turn() -> None:
    late = turns(*[t.content for t in CHAT], first=41)
    found = parse_extraction(
        reply(
            fact("I moved to Porto last month.", 2),  # an assistant line: the user's before it
            fact("I work as a pharmacist.", 4),
            fact("My daughter Mia turns 7 in May.", 99),  # no such line: the words decide
            fact("Mia is my daughter.", "one"),
        ),
        late,
    )
    assert [f.turn for f in found] == [41, 43, 41, 41]


# -- the prompt -----------------------------------------------------------------------------------


def test_a_long_range_is_read_in_parts_within_the_window(facts: FactStore) -> None:
    long_turn = "My locker code is 4471. " + "The corridor smells of fresh paint today. " * 400
    chat = turns(
        *[
            text
            for i in range(20)
            for text in (
                f"Message {i}: my colleague number {i} brings lemon cake on Fridays to the office.",
                f"Reply {i}: " + "that sounds like a lovely habit to keep up " * 6,
            )
        ],
        long_turn,
    )
    llm = ScriptedFacts()
    counter = EstimatingCounter()
    extractor = FactExtractor(
        llm, facts, model=lambda: ModelInfo("tiny", 2_048, counter), reply_tokens=256
    )
    assert extractor.extract("ana", chat) == []
    assert len(llm.prompts) >= 3
    shown: list[str] = []
    for prompt in llm.prompts:
        assert message_text(prompt[0]) == EXTRACTION_SYSTEM
        tokens = sum(counter.count(message_text(m)) for m in prompt) + 8 * len(prompt)
        assert tokens <= 2_048 - 256
        body = message_text(prompt[-1])
        assert body.startswith("Chat:\n[1] ")
        assert body.endswith(
            "\n\nKnown facts, for replaces:\n(none)\n\nFacts the User lines of the chat state:"
        )
        shown += [line for line in body.splitlines() if "] User: " in line]
    # Every user turn is in one part; the long one as its start, marked as cut.
    assert len(shown) == 21
    assert shown[-1].split("] User: ")[1].startswith("My locker code is 4471.")
    assert shown[-1].endswith(CUT)


def test_the_known_facts_are_labelled_and_chat_ollama_gets_the_schema(facts: FactStore) -> None:
    facts.add("ana", FactDraft("I live in Lisbon.", subject="home city"))
    facts.add("ana", FactDraft("I love sushi.", kind="preference"))
    llm = RecordingOllama(model="qwen", base_url="http://127.0.0.1:9")
    counter = EstimatingCounter()
    extractor = FactExtractor(llm, facts, model=lambda: ModelInfo("qwen", 2_048, counter))
    extractor.extract("ana", turns("Where should I eat sushi tonight?", "Try Sushi Cafe."))
    (call,) = llm.calls
    assert call["format"] == extraction_schema(["F1", "F2"])
    assert call["options"] == {"temperature": 0, "num_ctx": 2_048, "num_predict": 640}


# -- reconciliation -------------------------------------------------------------------------------


def test_replaces_is_trusted_only_for_a_similar_fact(
    facts: FactStore, sqlite_store: SQLStore
) -> None:
    # Known since before the chat (1 May): a correction never retires a value that started
    # to hold after it was said (facts/rules.py), so the known facts must be older.
    april = datetime(2026, 4, 1, tzinfo=UTC)
    paris = facts.add("ana", FactDraft("I live in Paris.", valid_from=april)).fact
    sushi = facts.add("ana", FactDraft("I love sushi.", kind="preference", valid_from=april)).fact
    chat = turns("I live in Berlin now. My dog is called Rex.", "Nice!")
    llm = ScriptedFacts(replies=[NO_FACTS, NO_FACTS])
    extractor = FactExtractor(llm, facts)
    extractor.extract("ana", chat)  # which label is which: the most relevant first
    known = message_text(llm.prompts[0][-1]).split("Known facts, for replaces:\n")[1]
    listed = known.split("\n\n")[0].splitlines()
    label = {text.split(". ", 1)[1]: text.split(".", 1)[0] for text in listed}
    llm.replies = [
        reply(
            fact("I live in Berlin now.", 1, subject="city", replaces=label[paris.text]),
            fact("My dog is called Rex.", 1, subject="dog", replaces=label[sushi.text]),
        )
    ]
    found = extractor.extract("ana", chat)
    assert [(f.text, f.replaces.id if f.replaces else None) for f in found] == [
        ("I live in Berlin now.", paris.id),
        ("My dog is called Rex.", None),  # about something else: the store's rule decides
    ]
    assert extractor.file("ana", "moving", found) == []  # no such conversation: not filed
    stored(sqlite_store, "moving", chat)
    changes = extractor.file("ana", "moving", found)
    assert [c.action for c in changes] == ["corrected", "added"]
    assert {f.text for f in facts.of_user("ana")} == {
        "I love sushi.",
        "I live in Berlin now.",
        "My dog is called Rex.",
    }
    # Paris is superseded now: the same claim again is left to the store's rule (known).
    again = extractor.file("ana", "moving", [found[0]])
    assert [c.action for c in again] == ["same"]


def test_facts_of_one_range_do_not_supersede_one_another(
    facts: FactStore, sqlite_store: SQLStore
) -> None:
    chat = turns("My brother Marek just opened a bike shop. I helped him paint the sign.", "Nice!")
    stored(sqlite_store, "shop", chat)
    extractor = FactExtractor(
        ScriptedFacts(
            replies=[
                reply(
                    fact("My brother Marek just opened a bike shop.", 1, subject="brother"),
                    fact("I helped him paint the sign.", 1, subject="brother"),
                )
            ]
        ),
        facts,
    )
    changes = extractor.learn("ana", "shop", chat)
    assert [c.action for c in changes] == ["added", "added"]
    assert len(facts.of_user("ana")) == 2


def test_forget_requests_are_no_source_of_facts(facts: FactStore) -> None:
    chat = turns(
        "I smoke a few cigarettes a day. My dog is called Rex.",
        "Noted.",
        "Please forget that I smoke.",  # not shown; and it names turn 1's smoking
        "Done.",
        "I work as a pharmacist.",  # "forget that" points back to it: not shown
        "Nice.",
        "Forget that.",
        "Done.",
        "Remember that my wife is Ana.",  # a save is shown: it gives the saved fact a subject
        "Noted.",
    )
    llm = ScriptedFacts(
        replies=[
            reply(
                fact("I smoke a few cigarettes a day.", 1, subject="smoking"),
                fact("My dog is called Rex.", 1, subject="dog"),
                fact("My wife is Ana.", 6, subject="wife"),
            )
        ]
    )
    found = FactExtractor(llm, facts).extract("ana", chat)
    body = message_text(llm.prompts[0][-1])
    assert "forget" not in body.lower()
    assert "pharmacist" not in body
    assert "[6] User: Remember that my wife is Ana." in body
    assert [(f.text, f.turn) for f in found] == [
        ("My dog is called Rex.", 1),
        ("My wife is Ana.", 9),
    ]
    # A range of requests to forget only asks the model nothing.
    quiet = ScriptedFacts()
    assert FactExtractor(quiet, facts).extract("ana", turns("Forget that I smoke.", "Done.")) == []
    assert quiet.prompts == []


# -- consolidation ---------------------------------------------------------------------------------


def _consolidation(store: SQLStore, extractor: FactExtractor) -> ConsolidationService:
    summarizer = RunnableLambda(lambda _inputs: "Ana talked about her family.")
    return ConsolidationService(store, TurnBuffer(), summarizer, extractor=extractor)


def _chat(
    store: SQLStore, conversation: str, texts: Sequence[str], *, start: datetime | None = None
) -> None:
    """The turns stored, a minute apart from ``start`` (default: now)."""
    roles = ("user", "assistant")
    new = [
        NewTurn(roles[i % 2], text, start + timedelta(minutes=i) if start else None)  # type: ignore[arg-type]
        for i, text in enumerate(texts)
    ]
    store.append_turns(conversation, new, user_id="ana")


@pytest.fixture
def service_parts(sqlite_store: SQLStore, facts: FactStore) -> tuple[SQLStore, FactStore]:
    return sqlite_store, facts


def test_consolidation_files_extracted_facts_with_their_turns(
    service_parts: tuple[SQLStore, FactStore],
) -> None:
    store, facts = service_parts
    said = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
    _chat(store, "family", [t.content for t in CHAT], start=said)
    llm = ScriptedFacts(
        replies=[
            reply(
                fact("My daughter Mia turns 7 in May.", 1, subject="daughter", kind="relationship"),
                fact("I work as a pharmacist.", 3, subject="job", kind="biography"),
            )
        ]
    )
    service = _consolidation(store, FactExtractor(llm, facts))
    try:
        assert service.consolidate("family", "ana") is not None
    finally:
        service.stop()
    learnt = {f.text: f for f in facts.of_user("ana")}
    assert set(learnt) == {"My daughter Mia turns 7 in May.", "I work as a pharmacist."}
    mia = learnt["My daughter Mia turns 7 in May."]
    assert (mia.origin, mia.conversation_id, mia.turns, mia.subject, mia.kind) == (
        "extracted",
        "family",
        (1, 1),
        "daughter",
        "relationship",
    )
    assert learnt["I work as a pharmacist."].turns == (3, 3)
    # Each holds from when its turn was said, not from when it was learnt.
    assert mia.valid_from == said
    assert learnt["I work as a pharmacist."].valid_from == said + timedelta(minutes=2)
    assert mia.created_at > said
    assert service.extraction_failures == 0


def test_facts_past_the_users_limit_are_skipped_and_the_range_consolidated(
    sqlite_store: SQLStore, embeddings: SentenceEmbeddings, caplog: pytest.LogCaptureFixture
) -> None:
    facts = FactStore(sqlite_store.database, embed=embeddings.embed_documents, max_facts=2)
    facts.add("ana", FactDraft("I play the cello on Sundays."))
    _chat(sqlite_store, "family", [t.content for t in CHAT])
    llm = ScriptedFacts(
        replies=[
            reply(
                fact("My daughter Mia turns 7 in May.", 1, subject="daughter", kind="relationship"),
                fact("I work as a pharmacist.", 3, subject="job", kind="biography"),
            )
        ]
    )
    service = _consolidation(sqlite_store, FactExtractor(llm, facts))
    try:
        with caplog.at_level("WARNING"):
            assert service.consolidate("family", "ana") is not None
    finally:
        service.stop()
    # One fact fitted; the other was skipped and logged; the range is consolidated.
    assert {f.text for f in facts.of_user("ana")} == {
        "I play the cello on Sundays.",
        "My daughter Mia turns 7 in May.",
    }
    assert "I work as a pharmacist." in caplog.text
    assert "MEMORY_CHAIN_MEMORY_MAX_FACTS_PER_USER" in caplog.text
    assert service.extraction_failures == 0
    assert len(sqlite_store.get_summaries("family", user_id="ana")) == 1


@pytest.mark.parametrize(
    "failure", [ConnectionError("model down"), "The user has a daughter.", '{"facts": [{"te']
)
def test_a_failed_extraction_keeps_the_summary_and_is_counted(
    service_parts: tuple[SQLStore, FactStore], failure: object
) -> None:
    store, facts = service_parts
    _chat(store, "family", [t.content for t in CHAT])
    service = _consolidation(store, FactExtractor(ScriptedFacts(replies=[failure]), facts))
    try:
        stored = service.consolidate("family", "ana")
    finally:
        service.stop()
    assert stored is not None
    assert [s.summary_text for s in store.get_summaries("family", user_id="ana")] == [
        "Ana talked about her family."
    ]
    assert service.extraction_failures == 1
    assert service.failures == 0
    assert facts.of_user("ana") == []


def test_a_fact_dismissed_on_request_is_not_learnt_again_from_the_request(
    service_parts: tuple[SQLStore, FactStore],
) -> None:
    store, facts = service_parts
    facts.add("ana", FactDraft("I smoke a few cigarettes a day.", origin="extracted"))
    manager = MemoryManager(store, TurnBuffer(), facts=facts)
    manager.add_turns(
        "quit",
        "ana",
        [
            NewTurn("user", "Please forget that I smoke."),
            NewTurn("assistant", "Done."),
            NewTurn("user", "I'd rather not have that on record."),
            NewTurn("assistant", "Understood."),
        ],
    )
    assert facts.of_user("ana") == []
    llm = ScriptedFacts(replies=[reply(fact("I smoke.", 1, subject="smoking"))])
    service = _consolidation(store, FactExtractor(llm, facts))
    try:
        assert service.consolidate("quit", "ana") is not None
    finally:
        service.stop()
    assert len(llm.prompts) == 1
    assert facts.of_user("ana") == []


def test_an_explicit_save_takes_the_extracted_subject_and_a_later_value_supersedes_it(
    service_parts: tuple[SQLStore, FactStore],
) -> None:
    store, facts = service_parts
    manager = MemoryManager(store, TurnBuffer(), facts=facts)
    manager.add_turns(
        "home",
        "ana",
        [NewTurn("user", "Remember: I live in Lisbon."), NewTurn("assistant", "Noted.")],
    )
    (saved,) = facts.of_user("ana")
    assert (saved.text, saved.origin, saved.subject) == ("I live in Lisbon.", "explicit", None)
    llm = ScriptedFacts(
        replies=[
            reply(fact("I live in Lisbon.", 1, subject="home city", kind="biography")),
            reply(fact("I live in Porto now.", 1, subject="Home City", kind="biography")),
        ]
    )
    service = _consolidation(store, FactExtractor(llm, facts))
    try:
        assert service.consolidate("home", "ana") is not None
        (known,) = facts.of_user("ana")
        assert (known.id, known.subject, known.kind) == (saved.id, "home city", "biography")
        manager.add_turns(
            "move",
            "ana",
            [NewTurn("user", "We moved, I live in Porto now."), NewTurn("assistant", "Nice.")],
        )
        assert service.consolidate("move", "ana") is not None
    finally:
        service.stop()
    assert [f.text for f in facts.of_user("ana")] == ["I live in Porto now."]
    (old,) = facts.of_user("ana", statuses=("superseded",))
    assert old.id == saved.id


def test_a_request_to_remember_restated_by_the_model_is_the_saved_fact(
    service_parts: tuple[SQLStore, FactStore],
) -> None:
    store, facts = service_parts
    manager = MemoryManager(store, TurnBuffer(), facts=facts)
    manager.add_turns(
        "car",
        "ana",
        [
            NewTurn("user", "Remember that my car is a green Vespera. Remember it."),
            NewTurn("assistant", "Noted."),
            NewTurn("user", "I remember that summer in Rome, we drove it all the way there."),
            NewTurn("assistant", "What a trip."),
        ],
    )
    (saved,) = facts.of_user("ana")
    llm = ScriptedFacts(
        replies=[
            reply(
                # The request copied, as models do.
                fact("Remember: my car is a green Vespera.", 1, subject="car"),
                fact("I remember it.", 1),
                # Not a request's turn: as given.
                fact("I remember that summer in Rome.", 3),
            ),
            # Or restated in the first person.
            reply(fact("I remember that my car is a green Vespera.", 1)),
        ]
    )
    extractor = FactExtractor(llm, facts)
    service = _consolidation(store, extractor)
    try:
        assert service.consolidate("car", "ana") is not None
    finally:
        service.stop()
    said = store.get_turns("car", user_id="ana")
    assert [f.text for f in extractor.extract("ana", said)] == ["My car is a green Vespera."]
    learnt = {f.text: f for f in facts.of_user("ana")}
    # No second row: the saved fact takes the subject the restatement gave.
    assert set(learnt) == {"my car is a green Vespera.", "I remember that summer in Rome."}
    assert (learnt["my car is a green Vespera."].id, learnt[saved.text].subject) == (
        saved.id,
        "car",
    )


def test_a_request_to_remember_a_correction_names_the_fact_known_before_it(
    service_parts: tuple[SQLStore, FactStore],
) -> None:
    store, facts = service_parts
    manager = MemoryManager(store, TurnBuffer(), facts=facts)
    april = datetime(2026, 4, 1, tzinfo=UTC)
    _chat(store, "niece", ["My niece is called Lucja.", "A lovely name."], start=april)
    lucja = facts.add(
        "ana",
        FactDraft(
            "My niece is called Lucja.",
            origin="extracted",
            conversation_id="niece",
            turns=(1, 1),
            valid_from=april,
        ),
    ).fact
    manager.add_turns(
        "niece",
        "ana",
        [
            NewTurn("user", "Actually, remember that my niece is Lucia, not Lucja."),
            NewTurn("assistant", "Lucia it is."),
        ],
    )
    saved = next(f for f in facts.of_user("ana") if f.origin == "explicit")
    assert saved.turns == (3, 3)
    llm = ScriptedFacts(replies=[NO_FACTS])
    extractor = FactExtractor(llm, facts)
    the_range = store.get_turns("niece", user_id="ana", after=2)
    extractor.extract("ana", the_range)
    known = message_text(llm.prompts[0][-1]).split("Known facts, for replaces:\n")[1]
    # Known: what memory held before the range (an earlier turn of the same conversation
    # too), not the fact the range's request saved: the model can only name the old value.
    assert known.split("\n\n")[0].splitlines() == ["F1. My niece is called Lucja."]
    llm.replies = [reply(fact("My niece is Lucia.", 1, subject="niece", replaces="F1"))]
    changes = extractor.file("ana", "niece", extractor.extract("ana", the_range))
    assert [(c.action, c.replaced.id if c.replaced else None) for c in changes] == [
        ("corrected", lucja.id)
    ]
    assert {f.text for f in facts.of_user("ana")} == {saved.text, "My niece is Lucia."}


# -- the embedded model --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_embedded_model_learns_a_clearly_stated_fact(
    local_llm_url: str, sqlite_store: SQLStore, embeddings: SentenceEmbeddings
) -> None:
    from memory_chain.catalog import OllamaCatalog
    from memory_chain.llm import embedded_counters
    from memory_chain.local_llm.model import MODEL_NAME

    catalog = OllamaCatalog(
        local_llm_url, default_model=MODEL_NAME, local_counters=embedded_counters()
    )
    llm = ChatOllama(base_url=local_llm_url, model=MODEL_NAME, temperature=0)
    facts = FactStore(sqlite_store.database, embed=embeddings.embed_documents)
    extractor = FactExtractor(llm, facts, model=lambda: catalog.resolve(None))
    chat = turns(
        "My daughter Mia turns 7 in May.",
        "Happy early birthday to Mia! Are you planning a party?",
        "Yes, a small one at home. I work as a nurse, so it has to be on a Sunday.",
        "A Sunday party at home sounds lovely.",
    )
    found = extractor.extract("ana", chat)
    assert any("Mia" in f.text for f in found), found
    said = Evidence.of(t.content for t in chat if t.role == "user")
    assert all(grounded(f.text, said) and f.turn in (1, 3) for f in found)
    stored(sqlite_store, "party", chat)
    changes = extractor.file("ana", "party", found)
    assert changes
    assert all(c.fact.origin == "extracted" for c in changes)
