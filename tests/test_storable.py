"""The one check every door runs on text and numbers before they are stored."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from memory_chain.errors import InvalidInputError
from memory_chain.storable import (
    MAX_STORED_INT,
    StorableText,
    check_stored_int,
    check_text,
    check_value,
    text_problem,
)


@pytest.mark.parametrize(
    "text", ["", "plain", "café ☕ 😀", "\u202e\u200b", "tab\tnew\nline\r", "\x01\x7f\ufffe"]
)
def test_text_every_database_keeps_passes(text: str) -> None:
    assert text_problem(text) is None
    assert check_text(text, "the text") is text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a\x00b", "contains a NUL character (\\x00) at position 1: remove it"),
        ("\x00", "at position 0"),
        ("Lisbon\x00\x00", "at position 6"),
        ("bad \ud800 here", "an unpaired surrogate (\\ud800) at position 4"),
        ("\udfff", "not valid Unicode: an unpaired surrogate (\\udfff) at position 0"),
        ("x\ud800\x00", "(\\ud800) at position 1"),  # the first problem is named
        ("x\x00\ud800", "NUL character (\\x00) at position 1"),
    ],
)
def test_what_a_database_refuses_is_named_with_its_position(text: str, says: str) -> None:
    problem = text_problem(text)
    assert problem is not None
    assert says in problem
    with pytest.raises(InvalidInputError, match=r"^the fact's text "):
        check_text(text, "the fact's text")


def test_a_pair_of_surrogate_escapes_is_one_character_and_fine() -> None:
    text = "\ud83d\ude00".encode("utf-16", "surrogatepass").decode("utf-16")
    assert text == "😀"
    assert text_problem(text) is None


def test_not_text_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="the key must be text, got int"):
        check_text(7, "the key")


def test_values_are_checked_everywhere_and_named_by_path() -> None:
    check_value({"a": [1, 2.5, None, True, {"b": "fine"}], "c": "ok"}, "the value")
    with pytest.raises(InvalidInputError, match=r"^the value\['notes'\]\[1\] contains a NUL"):
        check_value({"notes": ["fine", "bad\x00"]}, "the value")
    with pytest.raises(InvalidInputError, match=r"^a key of the value\['n'\] is not valid"):
        check_value({"n": {"k\ud800": 1}}, "the value")
    deep: object = "x"
    for _ in range(100):
        deep = [deep]
    with pytest.raises(InvalidInputError, match="nested more than 64 levels"):
        check_value(deep, "the value")


def test_stored_numbers_fit_an_integer_column() -> None:
    assert check_stored_int(0, "n") == 0
    assert check_stored_int(MAX_STORED_INT, "n") == 2**31 - 1
    for bad in (-1, 2**31, 10**30):
        with pytest.raises(InvalidInputError, match="tokens must be from 0 to 2,147,483,647"):
            check_stored_int(bad, "tokens")


def test_request_bodies_refuse_them_with_the_same_message() -> None:
    class Body(BaseModel):
        text: StorableText

    assert Body(text="fine").text == "fine"
    with pytest.raises(ValidationError, match=r"NUL character \(\\x00\) at position 2"):
        Body(text="ab\x00")
