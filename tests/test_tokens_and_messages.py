"""Offline token counting and message conversion."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from memory_chain.messages import to_message, to_new_turns
from memory_chain.schemas import Turn, utcnow
from memory_chain.tokens import TokenCounter, estimate_tokens


def test_counter_uses_the_bundled_tokenizer_without_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_network(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("token counting tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    counter = TokenCounter()
    # WordPiece splits the rare word; the regex estimate would not give exactly these.
    assert counter.count("hello world") == 2
    assert counter.count("unbelievably") > 1
    assert counter.count_many(["a b c", ""]) == [3, 0]


def test_estimate_is_used_without_a_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing\.json"):
        TokenCounter(tokenizer_path=tmp_path / "missing.json")
    counter = TokenCounter(bundled=False)
    assert counter.count("Hello, world!") == estimate_tokens("Hello, world!") == 4
    assert estimate_tokens("") == 0
    assert estimate_tokens("internationalization") > 1


def test_messages_round_trip_through_turns() -> None:
    counter = TokenCounter()
    new = to_new_turns([SystemMessage("s"), HumanMessage("hi there"), AIMessage("yo")], counter)
    assert [t.role for t in new] == ["system", "user", "assistant"]
    assert new[1].tokens is not None
    assert new[1].tokens.total == 2
    turn = Turn("c", 7, "assistant", "yo", utcnow())
    message = to_message(turn)
    assert isinstance(message, AIMessage)
    assert message.id == "c:7"
    assert message.additional_kwargs["turn_number"] == 7
