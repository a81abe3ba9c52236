"""Reading chat exports: each format from a file written by hand in it, told by its content."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_chain.errors import InvalidInputError
from memory_chain.imports import detect_format, read_history

DATA = Path(__file__).parent / "samples"


def _texts(conversation: object) -> list[tuple[str, str]]:
    return [(t.role, t.content) for t in conversation.turns]  # type: ignore[attr-defined]


def test_chatgpt_follows_the_branch_last_seen_and_counts_what_it_leaves_out() -> None:
    found, (trip, dog) = read_history(DATA / "chatgpt_conversations.json")
    assert found == "chatgpt"
    assert trip.conversation_id == "chatgpt-6627a1b0-1111-4c2d-9e8f-0a1b2c3d4e5f"
    assert trip.title == "Trip to Lisbon"
    # The edited branch (Baixa) is kept; the old one (Alfama) is not.
    assert _texts(trip) == [
        ("user", "We fly to Lisbon on 3 May 2024. Remember that my locker code is 4471."),
        ("assistant", "Noted. Lisbon in May is lovely."),
        ("user", "Find me a hotel in Baixa, the Hotel Baixa-7733 looks good."),
        ("assistant", "Hotel Baixa-7733 has four stars and a rooftop bar."),
        ("assistant", "What a view of the Tagus!"),
    ]
    # System (hidden), the tool call, its result and the image alone; one empty reply.
    assert (trip.skipped_other, trip.skipped_empty) == (4, 1)
    assert trip.turns[0].timestamp == datetime(2024, 4, 25, 9, 0, tzinfo=UTC)
    # No current node: the newest leaf; an undated message takes the time before it.
    assert _texts(dog) == [("user", "Hi"), ("user", "My dog is called Rex-4410.")]
    assert (dog.skipped_other, dog.skipped_empty) == (0, 1)
    assert dog.turns[1].timestamp == dog.turns[0].timestamp


def test_open_webui_export_follows_current_id_and_names_each_account() -> None:
    found, (garden, piano) = read_history(DATA / "open_webui_export.json")
    assert found == "open-webui"
    # The chat keeps its id: the proxy names an Open WebUI chat by it.
    assert garden.conversation_id == "3f1c2b9e-0a4d-4e7f-8b6a-1c2d3e4f5a6b"
    assert garden.owner == "7d0e8f3a-5b1c-4a2d-9e6f-0b1c2d3e4f5a"
    assert garden.title == "Garden plans"
    # The regenerated reply (m3) is the one kept; the failed empty reply is counted.
    assert _texts(garden) == [
        ("user", "I planted 12 tomato plants of the variety Cherokee-5521."),
        ("assistant", "Cherokee tomatoes ripen in August."),
        ("user", "Forget the basil, I gave up on it."),
    ]
    assert garden.skipped_empty == 1
    assert garden.turns[0].timestamp == datetime(2024, 6, 1, 0, 0, tzinfo=UTC)
    assert piano.owner == "2b3c4d5e-6f70-4a1b-8c9d-0e1f2a3b4c5d"
    assert len(piano.turns) == 2


def test_open_webui_one_chat_and_the_apis_json_lines_are_read_too(tmp_path: Path) -> None:
    chats = json.loads((DATA / "open_webui_export.json").read_text())
    one = tmp_path / "chat-export-1.json"
    one.write_text(json.dumps([chats[1]]))
    streamed = tmp_path / "all.ndjson"
    streamed.write_text("".join(json.dumps(chat) + "\n" for chat in chats))
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps([chats[1]["chat"]]))
    assert [c.title for c in read_history(one)[1]] == ["Piano"]
    assert detect_format(streamed) == "open-webui"
    assert [c.title for c in read_history(streamed)[1]] == ["Garden plans", "Piano"]
    (bare,) = read_history(legacy)[1]
    assert bare.owner is None
    assert len(bare.turns) == 2


@pytest.mark.parametrize("name", ["plain.jsonl", "plain.csv"])
def test_plain_rows_group_by_conversation_in_file_order(name: str) -> None:
    found, (bikes, work) = read_history(DATA / name)
    assert found == name.rsplit(".", 1)[1]
    assert (bikes.conversation_id, bikes.title) == ("import-bikes", "Bikes")
    assert _texts(bikes) == [
        ("user", "My bike is a green Brompton-8812."),
        ("assistant", "A Brompton folds small."),
    ]
    assert (bikes.skipped_empty, bikes.skipped_other) == (1, 0)
    # A name with a space is no id: hashed, the same every time.
    assert work.conversation_id.startswith("import-")
    assert " " not in work.conversation_id
    assert _texts(work) == [
        ("user", "Remember that the deadline is 14 October."),
        ("assistant", "Understood."),
    ]
    assert (work.skipped_empty, work.skipped_other) == (0, 1)
    assert work.turns[0].timestamp == datetime(2023, 9, 2, 10, 0, tzinfo=UTC)
    assert work.turns[1].timestamp == work.turns[0].timestamp


def test_the_format_is_told_by_content_and_can_be_forced(tmp_path: Path) -> None:
    renamed = tmp_path / "export.txt"
    renamed.write_text((DATA / "chatgpt_conversations.json").read_text())
    assert detect_format(renamed) == "chatgpt"
    own = tmp_path / "own.jsonl"
    own.write_text('{"format": "memory-chain/conversation", "version": 3}\n{broken\n')
    assert detect_format(own) == "memory-chain"
    with pytest.raises(InvalidInputError, match="not a ChatGPT conversation"):
        read_history(DATA / "open_webui_export.json", format="chatgpt")
    unknown = tmp_path / "unknown.json"
    unknown.write_text('[{"what": 1}]')
    with pytest.raises(InvalidInputError, match="pass --format"):
        read_history(unknown)


def test_a_bad_plain_row_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"conversation": "a", "role": "user", "content": "x"}\n'
        '{"conversation": "a", "role": "user", "content": "y", "timestamp": "soon"}\n'
    )
    with pytest.raises(InvalidInputError, match="line 2: timestamp 'soon'"):
        read_history(bad)
