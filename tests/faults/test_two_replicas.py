"""Two real ``memory-chain serve`` processes on one PostgreSQL with pgvector.

A client alternates between them in one conversation, as a load balancer would send it: the
prompt each replica gives the model holds the turn the other replica acknowledged just
before (tier 1 is per replica, and checked against SQL), turn numbers stay contiguous, and
every turn ends up as one point in the shared vector table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import _fresh_postgres_database
from tests.faults.chat import chat, health, turn_numbers, wait_for
from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _recent_turns(messages: list[dict[str, Any]]) -> list[str]:
    """The conversation turns of a chat prompt (tier 1's recent turns and the new message);
    the system message, which lists what searches found, is left out."""
    return [str(m.get("content", "")) for m in messages if m.get("role") != "system"]


def test_replicas_read_each_others_turns_and_share_the_vectors(
    tmp_path: Path,
    postgres_url: str,
    fake_llm: FakeOllama,
    make_server: Callable[..., RunningServer],
) -> None:
    url = _fresh_postgres_database(postgres_url)
    settings = {"database_url": url, "vector_backend": "pgvector", "log_level": "WARNING"}
    servers = [make_server(tmp_path / name, **settings).start() for name in ("a", "b")]
    clients = [httpx.Client(base_url=server.url, timeout=60) for server in servers]
    try:
        for client in clients:
            assert health(client)["tier3"]["backend"].startswith("pgvector")
        codes = [4411, 5823, 9067]
        for round_, code in enumerate(codes):
            first, second = clients[round_ % 2], clients[(round_ + 1) % 2]
            # The client sends only its new message (the conversation is named by header), so
            # what the model sees of earlier turns comes from the replica's memory. The second
            # replica has the conversation cached from the previous round.
            assert chat(second, "lockers", [], f"hello again {round_}").status_code == 200
            assert chat(first, "lockers", [], f"my locker code is {code}").status_code == 200
            before = len(fake_llm.chat_messages)
            assert chat(second, "lockers", [], "what is my code?").status_code == 200
            recent = _recent_turns(fake_llm.chat_messages[before])
            assert f"my locker code is {code}" in recent  # acknowledged by the other replica
        expected = list(range(1, 2 * 3 * len(codes) + 1))
        for client in clients:
            assert turn_numbers(client, "lockers") == expected

        def embedded() -> bool:
            return all(health(client)["tier3"]["queued_turns"] == 0 for client in clients)

        wait_for(embedded, 60, "the replicas' backfill to embed every turn")
        engine = create_engine(url)
        with engine.connect() as conn:
            points = conn.execute(
                text(
                    "SELECT count(*), count(DISTINCT (conversation_id, turn_number)) "
                    "FROM vector_points WHERE collection = 'conversation_memory'"
                )
            ).one()
        engine.dispose()
        assert tuple(points) == (len(expected), len(expected))
    finally:
        for client in clients:
            client.close()
