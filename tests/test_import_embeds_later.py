"""An import writes SQL only, and its facts are embedded in the background, not in a chat.

Issue 38 said "an import embeds every fact inside the request". There is no import request
(no HTTP route imports; ``memory-chain import`` is a command), and the import itself embeds
nothing: its turns are queued in tier 3's outbox in the transaction that writes them, and its
facts are stored without a vector. What the issue saw was the next step: a fact's vector was
computed when it was first ranked, so the first chat turn after an import embedded all of
that user's facts inside the request. Now the tier-3 backfill thread embeds them
(``FactStore.embed_pending``, one of its chores), and a chat turn meanwhile ranks them
unscored, newest first. These tests hold both to that, with tier 3 on and a model that
counts its calls and the thread that made them.
"""

from __future__ import annotations

import threading
import time
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


def test_imported_facts_are_embedded_by_the_backfill_thread_not_the_chat(tmp_path: Path) -> None:
    source = open_services(
        MemorySettings(data_dir=tmp_path / "source", memory_tier3_enabled=False, llm_fallback="off")
    )
    try:
        for text in ("I live in Porto.", "I am allergic to peanuts.", "I drive a Volvo."):
            source.manager.add_fact("ana", FactDraft(text))
        path = tmp_path / "export.jsonl"
        with atomic_text_file(path) as out:
            export_jsonl(source.store.engine, out)
    finally:
        source.close()

    target = open_services(
        MemorySettings(data_dir=tmp_path / "target", llm_fallback="off"), background=True
    )
    try:
        assert target.vectors is not None
        worker = target.vectors.worker
        assert worker is not None
        facts = target.manager.fact_store
        assert facts.embed_pending in worker.chores
        real = facts.embed
        assert real is not None
        callers: list[str] = []

        def counted(texts: list[str]) -> list[list[float]]:
            callers.append(threading.current_thread().name)
            return real(texts)

        facts.embed = counted
        question = target.vectors.embeddings.embed_query("Which foods must I avoid?")
        report = import_jsonl(target.store, path, max_chars=100_000)
        assert report.facts == 3
        # A chat turn right after (the facts scored or not, as the thread got to them).
        assert len(target.manager.retrieve("trip", "ana", "Which foods must I avoid?").facts) == 3
        deadline = time.monotonic() + 60
        while _unembedded(target) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _unembedded(target) == 0
        assert callers  # embedded, by the backfill thread only: never in the request
        assert set(callers) == {"memory-chain-backfill"}
        question = target.vectors.embeddings.embed_query("Which foods must I avoid?")
        assert target.manager.profile("ana", question)[0].content == "I am allergic to peanuts."
    finally:
        target.close()


def _unembedded(services: Any) -> int:
    with services.store.engine.connect() as conn:
        rows = conn.execute(select(facts.c.id).where(facts.c.embedding.is_(None))).all()
    return len(rows)
