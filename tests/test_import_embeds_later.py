"""An import writes SQL only: no turn and no fact is embedded while it runs.

Issue 38 said "an import embeds every fact inside the request". There is no import request
(no HTTP route imports; ``memory-chain import`` is a command), and the import itself embeds
nothing: its turns are queued in tier 3's outbox in the transaction that writes them, and its
facts are stored without a vector (a fact's vector is computed when it is first ranked). The
command then drains the outbox itself, after the SQL writes, as a server's worker would.
This test holds the import to that: with tier 3 on and a model that counts its calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from memory_chain.config import MemorySettings
from memory_chain.facts.model import FactDraft
from memory_chain.schemas import NewTurn
from memory_chain.services import open_services
from memory_chain.tiers.sql.models import facts
from memory_chain.transfer import atomic_text_file, export_jsonl, import_jsonl


def test_an_import_queues_turns_and_stores_facts_without_embedding(tmp_path: Path) -> None:
    source = open_services(
        MemorySettings(data_dir=tmp_path / "source", memory_tier3_enabled=False, llm_fallback="off")
    )
    try:
        turns = [NewTurn("user", f"Turn {n} about Lisbon.") for n in range(6)]
        source.store.append_turns("trip", turns, user_id="ana")
        for text in ("I live in Porto.", "My wife is Marta.", "I am vegan."):
            source.manager.add_fact("ana", FactDraft(text))
        path = tmp_path / "export.jsonl"
        with atomic_text_file(path) as out:
            export_jsonl(source.store.engine, out)
    finally:
        source.close()

    target = open_services(MemorySettings(data_dir=tmp_path / "target", llm_fallback="off"))
    try:
        assert target.vectors is not None
        embeddings = target.vectors.embeddings
        calls: list[int] = []
        real = embeddings.embed_documents

        def counted(texts: list[str], *args: Any, **kwargs: Any) -> list[list[float]]:
            calls.append(len(texts))
            return real(texts, *args, **kwargs)

        embeddings.embed_documents = counted  # type: ignore[method-assign]
        report = import_jsonl(target.store, path, max_chars=100_000)
        assert (report.turns, report.facts) == (6, 3)
        assert calls == []  # nothing embedded during the import
        assert target.queued_turns() == 6  # the turns wait in the outbox
        with target.store.engine.connect() as conn:
            vectors = conn.execute(select(facts.c.embedding)).scalars().all()
        assert vectors == [None, None, None]
    finally:
        target.close()
