"""Fixtures of the fault tests: a fake Ollama in the test process, memory_chain servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer, server_env


@pytest.fixture
def fake_llm() -> Iterator[FakeOllama]:
    """A fake Ollama on 127.0.0.1 (instant replies until a test changes its knobs)."""
    fake = FakeOllama().start()
    yield fake
    fake.stop()


@pytest.fixture
def make_server(fake_llm: FakeOllama) -> Iterator[Callable[..., RunningServer]]:
    """Build (not start) memory_chain servers talking to ``fake_llm``; stops them at the end.

    Call it with a data directory and ``MEMORY_CHAIN_*`` settings (lower-case, no prefix).
    """
    made: list[RunningServer] = []

    def make(data_dir: Path, **settings: object) -> RunningServer:
        server = RunningServer(data_dir, server_env(data_dir, fake_llm.url, **settings))
        made.append(server)
        return server

    yield make
    for server in made:  # before fake_llm stops: a graceful stop may still summarize
        server.stop()
