"""Settings: their names, the MEMORY_CHAIN_ prefix and laptop defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from memory_chain.config import MemorySettings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in list(__import__("os").environ):
        if name.startswith("MEMORY_CHAIN_"):
            monkeypatch.delenv(name)


def test_defaults_work_without_any_service() -> None:
    settings = MemorySettings()
    assert settings.memory_tier1_max_turns == 10
    assert settings.memory_tier2_summary_threshold == 10
    assert settings.memory_tier3_enabled is True
    assert settings.qdrant_collection_conversations == "conversation_memory"
    assert settings.embedding_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert settings.embedding_dimension == 384
    assert settings.qdrant_port == 6333
    assert settings.sql_url == "sqlite:///data/memory.db"
    assert settings.vector_path == Path("data/vectors")
    assert settings.qdrant_server_url is None


def test_environment_prefix_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_CHAIN_DATA_DIR", "/srv/mc")
    monkeypatch.setenv("MEMORY_CHAIN_MEMORY_TIER1_MAX_TURNS", "20")
    monkeypatch.setenv("MEMORY_CHAIN_QDRANT_HOST", "qdrant")
    settings = MemorySettings()
    assert settings.memory_tier1_max_turns == 20
    assert settings.sql_url == "sqlite:////srv/mc/memory.db"
    assert settings.qdrant_server_url == "http://qdrant:6333"
    monkeypatch.setenv("MEMORY_CHAIN_QDRANT_URL", "https://cluster.example:6334")
    monkeypatch.setenv("MEMORY_CHAIN_DATABASE_URL", "postgresql+psycopg://u@db/memory")
    settings = MemorySettings()
    assert settings.qdrant_server_url == "https://cluster.example:6334"
    assert settings.sql_url == "postgresql+psycopg://u@db/memory"


def test_sqlite_path_setting_and_env_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MEMORY_CHAIN_SQLITE_DATABASE_PATH=/app/data/memory.db\n")
    assert MemorySettings().sql_url == "sqlite:////app/data/memory.db"


@pytest.mark.parametrize(
    ("field", "value"),
    [("memory_tier1_max_turns", 0), ("qdrant_port", 70_000), ("database_url", " ")],
)
def test_bad_values_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        MemorySettings(**{field: value})


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ({"api_keys": {" ": "alice"}}, "empty key"),
        ({"api_keys": {"k": "no spaces"}}, "invalid api_keys user id"),
        ({"proxy_api_keys": {"k": "../x"}}, "invalid proxy_api_keys namespace"),
        ({"proxy_api_keys": {"k": "web:ui"}}, "contains ':'"),
        ({"api_keys": {"k": "alice"}, "proxy_api_keys": {"k": "webui"}}, "both"),
        ({"api_keys": {"k": "webui:alice"}, "proxy_api_keys": {"p": "webui"}}, "namespace"),
        # A direct user named as a namespace would be that proxy's shared user.
        ({"api_keys": {"k": "webui"}, "proxy_api_keys": {"p": "webui"}}, "also a proxy"),
        # The default user (keyless, in-process doors) is reserved the same way.
        ({"default_user_id": "webui", "proxy_api_keys": {"p": "webui"}}, "default_user_id"),
        ({"default_user_id": "webui:x", "proxy_api_keys": {"p": "webui"}}, "default_user_id"),
        ({"default_user_id": "no spaces"}, "invalid default_user_id"),
        ({"proxy_shared_user": True}, "no proxy_api_keys"),
    ],
)
def test_key_settings_are_checked(keys: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        MemorySettings(**keys)  # type: ignore[arg-type]
    assert not MemorySettings().keys_required
    assert MemorySettings(proxy_api_keys={"p": "webui"}).keys_required


def test_key_settings_that_do_not_collide_are_accepted() -> None:
    settings = MemorySettings(
        # Two keys of one user, or of one namespace: a key being rotated.
        api_keys={"k1": "ana", "k1-rotated": "ana", "k2": "team:ana"},
        proxy_api_keys={"p1": "webui", "p1-rotated": "webui", "p2": "chat"},
        default_user_id="me",
        proxy_shared_user=True,
    )
    assert settings.keys_required
    assert settings.proxy_shared_user
    assert not MemorySettings().proxy_shared_user


def test_vector_backend_follows_the_qdrant_settings_unless_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert MemorySettings().vector_store == "embedded"
    monkeypatch.setenv("MEMORY_CHAIN_QDRANT_URL", "http://qdrant:6333")
    assert MemorySettings().vector_store == "qdrant"  # as before the setting existed
    monkeypatch.delenv("MEMORY_CHAIN_QDRANT_URL")
    monkeypatch.setenv("MEMORY_CHAIN_DATABASE_URL", "postgresql+psycopg://u@db/memory")
    monkeypatch.setenv("MEMORY_CHAIN_VECTOR_BACKEND", "pgvector")
    assert MemorySettings().vector_store == "pgvector"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"vector_backend": "pgvector"}, "not a PostgreSQL URL"),
        ({"vector_backend": "pgvector", "database_url": "sqlite:///x.db"}, "not a PostgreSQL"),
        ({"vector_backend": "qdrant"}, "qdrant_url is unset"),
        ({"vector_backend": "embedded", "qdrant_url": "http://q:6333"}, "unset it"),
        (
            {
                "vector_backend": "pgvector",
                "database_url": "postgresql://u@db/m",
                "qdrant_host": "q",
            },
            "set vector_backend=qdrant",
        ),
        ({"vector_backend": "chroma"}, "embedded"),
    ],
)
def test_vector_backend_contradictions_are_refused(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        MemorySettings(**settings)  # type: ignore[arg-type]
