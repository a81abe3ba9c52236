"""Tier 1: the bounded LRU buffer and its chat history, alone and over tier 2."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from memory_chain.errors import InvalidInputError
from memory_chain.schemas import ConversationMetadata, NewTurn, TokenUsage, Turn
from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
from memory_chain.tiers.sql import SQLStore
from tests.deprecated_doors import USES_DEPRECATED_HISTORIES

pytestmark = USES_DEPRECATED_HISTORIES


def _turns(conversation_id: str, numbers: range) -> list[Turn]:
    now = datetime(2025, 11, 13, 10, tzinfo=UTC)
    return [Turn(conversation_id, n, "user", f"m{n}", now, TokenUsage(total=2)) for n in numbers]


def test_buffer_keeps_last_n_turns_with_metadata() -> None:
    buffer = TurnBuffer(max_turns=3, max_conversations=10)
    buffer.extend("c", _turns("c", range(1, 6)))
    cached = buffer.get("c")
    assert cached is not None
    assert [t.turn_number for t in cached] == [3, 4, 5]
    messages = buffer.get_messages("c")
    assert messages is not None
    assert [m.content for m in messages] == ["m3", "m4", "m5"]
    meta = buffer.metadata("c")
    assert meta is not None
    assert (meta.turn_count, meta.total_tokens) == (5, 10)
    assert meta.created_at <= meta.last_updated


def test_lru_evicts_least_recently_used_conversation() -> None:
    buffer = TurnBuffer(max_turns=2, max_conversations=3)
    for name in ("a", "b", "c"):
        buffer.extend(name, _turns(name, range(1, 2)))
    assert buffer.get("a") is not None  # "a" is now the most recently used
    buffer.extend("d", _turns("d", range(1, 2)))
    assert len(buffer) == 3
    assert "b" not in buffer
    assert {"a", "c", "d"} <= {name for name in ("a", "b", "c", "d") if name in buffer}


def test_extend_skips_duplicates_and_drops_entry_on_gap() -> None:
    buffer = TurnBuffer(max_turns=5)
    buffer.extend("c", _turns("c", range(1, 4)))
    buffer.extend("c", _turns("c", range(2, 5)))  # 2 and 3 are already there
    cached = buffer.get("c")
    assert cached is not None
    assert [t.turn_number for t in cached] == [1, 2, 3, 4]
    buffer.extend("c", _turns("c", range(6, 7)))  # turn 5 went missing: stale entry
    assert buffer.get("c") is None
    # Turns of a conversation that is not cached are cached only if they start it.
    buffer.extend("late", _turns("late", range(7, 9)))
    assert buffer.get("late") is None


def test_put_never_replaces_newer_turns() -> None:
    buffer = TurnBuffer(max_turns=5)
    buffer.extend("c", _turns("c", range(1, 5)))
    old = ConversationMetadata(datetime.now(UTC), datetime.now(UTC), turn_count=2)
    buffer.put("c", _turns("c", range(1, 3)), old)
    cached = buffer.get("c")
    assert cached is not None
    assert cached[-1].turn_number == 4


def test_prune_keeps_last_turns() -> None:
    buffer = TurnBuffer(max_turns=10)
    buffer.extend("c", _turns("c", range(1, 11)))
    buffer.prune("c", keep_last=5)
    cached = buffer.get("c")
    assert cached is not None
    assert [t.turn_number for t in cached] == [6, 7, 8, 9, 10]
    meta = buffer.metadata("c")
    assert meta is not None
    assert meta.turn_count == 10
    buffer.extend("c", _turns("c", range(11, 12)))
    cached = buffer.get("c")
    assert cached is not None
    assert cached[-1].turn_number == 11


def test_buffer_entries_are_scoped_to_their_user() -> None:
    buffer = TurnBuffer()
    buffer.extend("c", _turns("c", range(1, 2)), user_id="alice")
    assert buffer.get("c", "alice") is not None
    assert buffer.get_messages("c", "bob") is None  # bob's "c" is another conversation
    buffer.extend("c", _turns("c", range(1, 3)), user_id="bob")
    assert [t.turn_number for t in buffer.get("c", "bob") or []] == [1, 2]
    assert [t.turn_number for t in buffer.get("c", "alice") or []] == [1]
    buffer.clear_user("alice")
    assert buffer.get("c", "alice") is None
    assert buffer.get("c", "bob") is not None


def test_memory_only_history_numbers_turns_locally() -> None:
    history = BufferChatMessageHistory(TurnBuffer(max_turns=4), "local")
    history.add_messages([SystemMessage("be brief"), HumanMessage("hi"), AIMessage("hello")])
    history.add_user_message("how are you?")
    history.add_ai_message("fine")
    assert [m.content for m in history.messages] == ["hi", "hello", "how are you?", "fine"]
    assert [m.type for m in history.messages] == ["human", "ai", "human", "ai"]
    assert history.messages[-1].additional_kwargs["turn_number"] == 5
    history.clear()
    assert history.messages == []


def test_memory_only_history_rejects_bad_input() -> None:
    history = BufferChatMessageHistory(TurnBuffer(), "local", max_message_chars=10)
    history.add_user_message("ok")
    with pytest.raises(InvalidInputError):
        history.add_messages([HumanMessage("fine"), HumanMessage("x" * 11)])
    with pytest.raises(InvalidInputError):
        history.add_user_message("")
    assert [m.content for m in history.messages] == ["ok"]


def test_history_writes_through_and_rebuilds_from_sql(sqlite_store: SQLStore) -> None:
    buffer = TurnBuffer(max_turns=3)
    history = BufferChatMessageHistory(buffer, "c", source=sqlite_store, user_id="u")
    history.add_messages([HumanMessage(f"q{i}") for i in range(1, 6)])
    # Write-through: all five are in SQL, the last three in the buffer.
    assert len(sqlite_store.get_turns("c", user_id="u")) == 5
    assert [m.content for m in history.messages] == ["q3", "q4", "q5"]

    # A restart is an empty buffer: the next read rebuilds it from SQL.
    fresh = TurnBuffer(max_turns=3)
    reopened = BufferChatMessageHistory(fresh, "c", source=sqlite_store, user_id="u")
    assert ("u", "c") not in fresh
    assert [m.content for m in reopened.messages] == ["q3", "q4", "q5"]
    meta = fresh.metadata("c", "u")
    assert meta is not None
    assert meta.turn_count == 5
    reopened.add_ai_message("a6")
    assert [m.content for m in reopened.messages] == ["q4", "q5", "a6"]
    assert reopened.messages[-1].additional_kwargs["turn_number"] == 6


def test_history_over_sql_rejects_bad_input_without_changes(sqlite_store: SQLStore) -> None:
    buffer = TurnBuffer()
    history = BufferChatMessageHistory(buffer, "c", source=sqlite_store)
    history.add_user_message("kept")
    with pytest.raises(InvalidInputError):
        history.add_messages([HumanMessage("ok"), HumanMessage("")])
    assert [t.content for t in sqlite_store.get_turns("c", user_id="default")] == ["kept"]
    assert [m.content for m in history.messages] == ["kept"]


def test_history_clear_removes_from_both_tiers(sqlite_store: SQLStore) -> None:
    buffer = TurnBuffer()
    history = BufferChatMessageHistory(buffer, "c", source=sqlite_store)
    history.add_user_message("forget me")
    history.clear()
    assert history.messages == []
    assert sqlite_store.get_conversation("c", user_id="default") is None


def test_concurrent_histories_on_one_conversation_stay_consistent(
    sqlite_store: SQLStore,
) -> None:
    buffer = TurnBuffer(max_turns=10)
    barrier = threading.Barrier(16)

    def chat(i: int) -> None:
        history = BufferChatMessageHistory(buffer, "hot", source=sqlite_store)
        barrier.wait()
        for j in range(5):
            history.add_messages([HumanMessage(f"{i}-{j}")])
            assert len(history.messages) <= 10

    threads = [threading.Thread(target=chat, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history = BufferChatMessageHistory(buffer, "hot", source=sqlite_store)
    cached = [m.additional_kwargs["turn_number"] for m in history.messages]
    assert cached == list(range(71, 81))
    stored = sqlite_store.recent_turns("hot", 10, user_id="default")
    assert [m.content for m in history.messages] == [t.content for t in stored]


def test_user_turn_of_new_turn_dataclass_is_plain() -> None:
    turn = NewTurn("user", "x")
    assert turn.timestamp is None
