"""An export reads in short transactions, a page at a time: nothing skipped or repeated.

Beyond one page of conversations and one of store items, with a conversation added and one
purged between pages (:mod:`memory_chain.tiers.sql.export`), on SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_chain.config import MemorySettings
from memory_chain.facts.model import Fact, FactDraft
from memory_chain.integrations.store import MemoryStore
from memory_chain.schemas import NewTurn
from memory_chain.services import open_services
from memory_chain.tiers.sql import export
from memory_chain.tiers.sql.rows import ConversationRecord
from memory_chain.tiers.sql.store_items import StoredItem


def test_pages_with_writes_between_them(
    sql_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = sql_url if sql_url.startswith("postgresql") else None
    settings = MemorySettings(
        data_dir=tmp_path / "data",
        database_url=database,
        memory_tier3_enabled=False,
        llm_fallback="off",
    )
    monkeypatch.setattr(export, "_PAGE", 3)
    monkeypatch.setattr(export, "_ITEM_PAGE", 2)
    services = open_services(settings)
    try:
        for number in range(7):
            services.store.append_turns(f"c{number}", [NewTurn("user", "hi")], user_id="ana")
        services.store.append_turns("bobs", [NewTurn("user", "hi")], user_id="bob")
        store = MemoryStore(services)
        for number in range(5):
            store.put(("ana", "notes"), f"k{number}", {"text": f"note {number}"})
        store.put(("bob", "notes"), "k0", {"text": "bob's"})
        services.manager.add_fact("ana", FactDraft("I live in Porto.", origin="api"))

        read = export.read_export(services.store.engine, user_id="ana")
        first = [next(read) for _ in range(4)]
        services.store.append_turns("late", [NewTurn("user", "hi")], user_id="ana")
        services.manager.delete_conversation("c5", "ana")
        rest = list(read)
    finally:
        services.close()
    items = first + rest
    conversations = [i.info.conversation_id for i in items if isinstance(i, ConversationRecord)]
    assert conversations == ["c0", "c1", "c2", "c3", "c4", "c6", "late"]
    assert [i.text for i in items if isinstance(i, Fact)] == ["I live in Porto."]
    keys = [(i.user_id, i.key) for i in items if isinstance(i, StoredItem)]
    assert keys == [("ana", f"k{number}") for number in range(5)]
