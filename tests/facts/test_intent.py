"""Explicit memory requests: "remember …" / "forget …" said to the assistant, and what."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_chain.intent import Action, Intent, parse_intent

SAVES = [
    # The misfires of the old regex.
    ("Remember: my wife is Ana", "my wife is Ana"),
    ("Remember that my wife is Ana.", "my wife is Ana."),
    ("remember that my cat is named Tom", "my cat is named Tom"),
    ("Please remember I'm allergic to nuts", "I'm allergic to nuts"),
    ("Remember, I'm allergic to nuts", "I'm allergic to nuts"),
    ("Remember my name is Bob.", "my name is Bob."),
    ("Remember this: the code is 7319", "the code is 7319"),
    ("Remember this, my seat is 14C", "my seat is 14C"),
    ("Remember this... my seat is 14C", "my seat is 14C"),
    ("Memorize this: pi is 3.14159", "pi is 3.14159"),
    ("Don't forget that my birthday is May 3", "my birthday is May 3"),
    ("Do not forget my flight is LH123", "my flight is LH123"),
    ("don\u2019t forget: my PIN is 1234", "my PIN is 1234"),
    ("Don't forget my birthday", "my birthday"),
    ("Never forget that Bob hates cilantro", "Bob hates cilantro"),
    ("Keep in mind that I'm on a budget", "I'm on a budget"),
    ("Keep my budget in mind", "my budget"),
    ("Make a note that I'm vegan", "I'm vegan"),
    ("Make a note of my passport number: X123", "my passport number: X123"),
    ("Note down my address: 12 Main St", "my address: 12 Main St"),
    ("Save to memory: I prefer metric units", "I prefer metric units"),
    ("Add to your memory that I live in Oslo", "I live in Oslo"),
    ("For future reference, my passport expires in 2030", "my passport expires in 2030"),
    # A request phrased as a question, with a statement for content.
    ("Can you remember that I'm vegan?", "I'm vegan"),
    ("Could you remember my sister's name is Ana?", "my sister's name is Ana"),
    ("Hey, can you please remember that my son is 7?", "my son is 7"),
    ("Can you keep in mind that I'm vegan?", "I'm vegan"),
    ("Can you make a note of my flight number, LH123?", "my flight number, LH123"),
    # Other request frames.
    ("I want you to remember that I hate olives", "I hate olives"),
    ("I'd like you to keep in mind that I work nights", "I work nights"),
    ("Make sure you remember that I'm left-handed", "I'm left-handed"),
    ("You should remember that I'm diabetic", "I'm diabetic"),
    # Politeness, fillers, a name: they do not matter.
    ("Hey Claude, remember that I take my coffee black", "I take my coffee black"),
    ("Jarvis, remember this: gate B12", "gate B12"),
    ("Also, remember I'm flying out on Friday", "I'm flying out on Friday"),
    ("And please remember that my dog is called Rex.", "my dog is called Rex."),
    ("Oh and one more thing, remember that I'm 40", "I'm 40"),
    ("REMEMBER THAT MY WIFE IS ANA", "MY WIFE IS ANA"),
    # Unicode apostrophes and quotes; the user's own characters come back.
    ("Remember that I\u2019m vegan", "I\u2019m vegan"),
    ("Remember \u201cmy wife is Ana\u201d", "my wife is Ana"),
    ("Remember 'the gate code is 1234'.", "the gate code is 1234"),
    # Request words after the content are the request's, with the end punctuation.
    ("Remember that I'm vegan, please.", "I'm vegan"),
    ("Remember that I'm vegan, ok?", "I'm vegan"),
    # The request after what it is about, in the same sentence.
    ("My seat is 14C, remember that.", "My seat is 14C"),
    ("The code is 7319 - don't forget it!", "The code is 7319"),
    ("I'm vegan, so please remember that.", "I'm vegan"),
    ("The meeting is at 3, keep that in mind.", "The meeting is at 3"),
    ("If I mention Bob, remember that he's my brother.", "If I mention Bob, he's my brother."),
    # "that" is only dropped as a complementizer.
    ("Remember that song", "that song"),
    ("Remember that Dr. Smith is my GP.", "Dr. Smith is my GP."),
]

NOT_SAVES = [
    "I don't remember that movie",
    "Do you remember that song?",
    "Please save this file as csv",
    "Save the document as pdf",
    "Save money",
    "How do I save this to memory?",
    "Did you remember to call?",
    "Remember when we went to Paris?",
    "Remember the time we got lost in Rome",
    "Remember what I told you about my allergy",
    "Can you remember what I said?",
    "Can you remember my birthday?",
    "Can you remember that?",
    "I remember my first car",
    "I can't remember where I put my keys",
    "We remember",
    "He told me to remember that",
    "She said, remember that the door sticks",
    '"Remember that I\'m vegan," he said.',
    "Remember to buy milk",
    "Please remember to call mom tomorrow",
    "Don't forget to call mom",
    "Remember me?",
    "Remember this?",
    "Remember that?",
    "Remember.",
    "Note that the API changed",
    "",
    "   ",
    "Hello there, how are you?",
]

FORGETS = [
    ("Forget that I live in Berlin", "I live in Berlin"),
    ("Forget my old address", "my old address"),
    ("Forget about my ex", "my ex"),
    ("Please forget that I'm vegan", "I'm vegan"),
    ("You can forget my old number", "my old number"),
    ("I need you to forget my old phone number", "my old phone number"),
    ("Could you forget my old address?", "my old address"),
    ("Stop remembering my birthday", "my birthday"),
    ("Don't remember my address anymore", "my address"),
    ("Delete the fact that I smoke", "I smoke"),
    ("Remove my address from your memory", "my address"),
    ("Erase what you know about my ex", "my ex"),
    ("Delete everything you know about me", "everything you know about me"),
    ("Forget this: my old number 555-1234", "my old number 555-1234"),
    ("Forget what I said about my job", "what I said about my job"),
    ("forget about my old job, please", "my old job"),
]

NOT_FORGETS = [
    "I forgot my keys",
    "I always forget names",
    "Did you forget?",
    "Forget-me-nots bloom in May",
    "Forgetting things is normal",
    "Delete the file",
    "Remove the last paragraph",
    "Clear your memory",
    "Forget it, I'll do it myself",
    "Forget that, my new address is 9 Oak Rd",
    "Never mind, forget it.",
    "Can you forget that?",
    "Don't remember?",
]

REFERS_BACK = [
    ("Remember this.", "save"),
    ("remember that!", "save"),
    ("REMEMBER THIS", "save"),
    ("Remember it", "save"),
    ("Please remember this, Claude.", "save"),
    ("Remember what I just said", "save"),
    ("Keep this in mind", "save"),
    ("Note this down", "save"),
    ("Write that down", "save"),
    ("Save this to your memory", "save"),
    ("Make a note.", "save"),
    ("Can you remember this for me?", "save"),
    ("Could you please remember this?", "save"),
    ("Can you note that down?", "save"),
    ("Forget that.", "forget"),
    ("Forget it", "forget"),
    ("Forget about it", "forget"),
    ("Please forget that", "forget"),
    ("Forget I said that", "forget"),
    ("Don't remember this", "forget"),
    ("Delete that from your memory", "forget"),
]

MULTI_SENTENCE = [
    ("My seat is 14C. Remember this.", "save", "My seat is 14C."),
    ("Hi! My seat is 14C. Remember that. Thanks!", "save", "My seat is 14C."),
    ("Remember this. My seat is 14C.", "save", "My seat is 14C."),
    ("Remember this!\nMy locker code is 4411", "save", "My locker code is 4411"),
    ("Remember this. Why is the sky blue? The gate is B12.", "save", "The gate is B12."),
    ("My seat is 14C. Can you remember that?", "save", "My seat is 14C."),
    ("Would you remember that for later? I park on level 3.", "save", "I park on level 3."),
    ("Please save this to memory. My locker is 12.", "save", "My locker is 12."),
    (
        "I had a long day. My seat is 14C. Don't forget!",
        "save",
        "I had a long day. My seat is 14C.",
    ),
    ("Thanks for the help! Remember that I'm vegan. Bye.", "save", "I'm vegan."),
    ("My old address was 5 Elm St. Forget it.", "forget", "My old address was 5 Elm St."),
    ("Ok. Forget my old address. It's wrong.", "forget", "my old address."),
    ("Forget my old address. Remember that I live in Oslo.", "forget", "my old address."),
]


@pytest.mark.parametrize(("message", "text"), SAVES)
def test_save_requests(message: str, text: str) -> None:
    assert parse_intent(message) == Intent("save", text, refers_back=False)


@pytest.mark.parametrize("message", NOT_SAVES)
def test_not_save_requests(message: str) -> None:
    assert parse_intent(message) is None


@pytest.mark.parametrize(("message", "text"), FORGETS)
def test_forget_requests(message: str, text: str) -> None:
    assert parse_intent(message) == Intent("forget", text, refers_back=False)


@pytest.mark.parametrize("message", NOT_FORGETS)
def test_not_forget_requests(message: str) -> None:
    intent = parse_intent(message)
    assert intent is None or intent.action != "forget"


@pytest.mark.parametrize(
    ("message", "expected"),
    [("Don't forget my birthday", "my birthday"), ("Never forget 9/11", "9/11")],
)
def test_dont_forget_is_a_save(message: str, expected: str) -> None:
    assert parse_intent(message) == Intent("save", expected, refers_back=False)


@pytest.mark.parametrize(("message", "action"), REFERS_BACK)
def test_refers_back(message: str, action: Action) -> None:
    assert parse_intent(message) == Intent(action, "", refers_back=True)


@pytest.mark.parametrize(("message", "action", "text"), MULTI_SENTENCE)
def test_multi_sentence(message: str, action: Action, text: str) -> None:
    assert parse_intent(message) == Intent(action, text, refers_back=False)


def test_a_bare_remember_needs_something_around_it() -> None:
    assert parse_intent("Don't forget!") is None
    assert parse_intent("Remember?") is None
    assert parse_intent("I was in Paris. Remember?") is None


def test_typographic_and_plain_apostrophes_agree() -> None:
    plain = parse_intent("Don't forget that I'm vegan")
    curly = parse_intent("Don\u2019t forget that I\u2019m vegan")
    assert plain is not None
    assert curly is not None
    assert (plain.action, plain.text.replace("'", "\u2019")) == (curly.action, curly.text)


def test_a_long_message_without_a_trigger_is_none() -> None:
    assert parse_intent("lorem ipsum dolor sit amet " * 2000) is None


def test_a_long_message_with_a_request_at_the_end() -> None:
    message = "Some context here. " * 500 + "My seat is 14C, remember that."
    assert parse_intent(message) == Intent("save", "My seat is 14C", refers_back=False)


_FRAGMENTS = [
    "remember",
    "Remember",
    "forget",
    "Forget",
    "don't",
    "don\u2019t",
    "this",
    "that",
    "it",
    "please",
    "can you",
    "I",
    "my",
    "seat",
    "is",
    "14C",
    "about",
    "delete",
    "the fact",
    "from your memory",
    "keep",
    "in mind",
    "note",
    "down",
    "save",
    "to memory",
    "what",
    "when",
    "to",
    "for me",
    ",",
    ".",
    "?",
    "!",
    ":",
    "-",
    "\n",
    '"',
    "'",
    "\u201c",
    "\u201d",
    "so",
    "Claude,",
    "what you know about",
    "make a note of",
    "for future reference",
    "Dr.",
    "St.",
]
_WORDS = re.compile(r"\w+")


def _check(message: str) -> None:
    intent = parse_intent(message)
    if intent is None:
        return
    assert intent.action in ("save", "forget")
    assert intent.refers_back == (intent.text == "")
    assert intent.text == intent.text.strip()
    for word in _WORDS.findall(intent.text):
        assert word in message


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_never_raises_and_text_comes_from_the_message(message: str) -> None:
    _check(message)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=25).map(" ".join))
def test_never_raises_on_request_like_text(message: str) -> None:
    _check(message)
