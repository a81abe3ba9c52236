"""docker-compose.scale.yml: several API replicas on PostgreSQL + pgvector behind nginx.

Validated like docker-compose.yml (``docker-compose config``, no Docker engine), then checked
for what makes it a scaled deployment: no state in the replicas (every tier in the database,
vectors included), several replicas behind the load balancer, the load balancer the only way
in, and the settings the replicas get valid for :class:`MemorySettings`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from memory_chain.config import MemorySettings
from tests.compose_files import (
    COMPOSE_SCALE,
    ENV_EXAMPLE,
    ROOT,
    api_policy,
    compose_config,
    ports,
    volumes,
)

NGINX_CONF = ROOT / "deploy" / "nginx.conf"
SERVICES = {"db", "api", "lb", "ollama", "ollama-pull", "open-webui"}


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    empty = tmp_path_factory.mktemp("compose-scale") / "empty.env"
    empty.write_text("")
    code, out, err = compose_config(empty, COMPOSE_SCALE)
    assert code == 0, f"docker-compose config failed:\n{err}"
    config: dict[str, Any] = yaml.safe_load(out)
    return config


def test_config_is_valid_and_env_example_resolves_the_same(resolved: dict[str, Any]) -> None:
    code, out, err = compose_config(ENV_EXAMPLE, COMPOSE_SCALE)
    assert code == 0, f"docker-compose config with .env.example failed:\n{err}"
    assert yaml.safe_load(out) == resolved


def test_replicas_keep_every_tier_in_postgresql_with_pgvector(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    assert set(services) == SERVICES
    api = services["api"]
    assert int(api["deploy"]["replicas"]) >= 2
    env = api["environment"]
    assert env["MEMORY_CHAIN_VECTOR_BACKEND"] == "pgvector"
    url = urlsplit(env["MEMORY_CHAIN_DATABASE_URL"])
    assert url.hostname == "db"
    db = services["db"]
    assert db["image"].startswith("pgvector/pgvector:")
    db_env = db["environment"]
    assert url.username == db_env["POSTGRES_USER"]
    assert url.password == db_env["POSTGRES_PASSWORD"]
    assert url.path == "/" + db_env["POSTGRES_DB"]
    assert "/var/lib/postgresql/data" in volumes(db)
    assert ports(db) == []  # the database is reached by the replicas only
    # Nothing a replica keeps is lost with it: no volume, no Qdrant, no SQLite.
    assert volumes(api) == {}
    assert not any("QDRANT" in name for name in env)
    # What the replicas are given is a valid configuration, and it means pgvector.
    settings = MemorySettings(
        _env_file=None,  # type: ignore[call-arg]
        **{
            name.removeprefix("MEMORY_CHAIN_").lower(): value
            for name, value in env.items()
            if value is not None
            and name not in {"MEMORY_CHAIN_API_KEYS", "MEMORY_CHAIN_PROXY_API_KEYS"}
        },
    )
    assert settings.vector_store == "pgvector"
    assert settings.sql_url.startswith("postgresql+psycopg://")


def test_the_load_balancer_is_the_only_way_in(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    api, lb = services["api"], services["lb"]
    inner_port = api["environment"]["MEMORY_CHAIN_SERVER_PORT"]
    assert ports(api) == []  # replicas cannot share a host port: the balancer publishes
    default_port = str(MemorySettings.model_fields["server_port"].default)
    assert ports(lb) == [("127.0.0.1", default_port, inner_port)]
    (mount,) = lb["volumes"]  # short syntax: source:target:mode
    source, target, mode = str(mount).split(":")
    assert (Path(source), target, mode) == (NGINX_CONF, "/etc/nginx/nginx.conf", "ro")
    webui = services["open-webui"]["environment"]
    assert webui["OPENAI_API_BASE_URL"] == f"http://lb:{inner_port}/v1"
    assert str(webui["ENABLE_FORWARD_USER_INFO_HEADERS"]).lower() == "true"


def test_the_replicas_answer_the_names_the_balancer_passes_on(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    policy = api_policy(services)
    webui = urlsplit(services["open-webui"]["environment"]["OPENAI_API_BASE_URL"])
    assert policy.host_allowed(webui.netloc)  # Open WebUI through the balancer: Host lb:8000
    published = ports(services["lb"])[0][1]
    assert policy.host_allowed(f"127.0.0.1:{published}")  # this machine's browser
    assert not policy.host_allowed(f"attacker.example:{published}")
    # nginx passes the client's Host on with its port: a page's Origin is compared with both.
    conf = NGINX_CONF.read_text()
    assert re.search(r"proxy_set_header Host \$http_host;", conf)
    assert "proxy_set_header Host $host;" not in conf


def test_start_order_and_health_checks(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    for name in SERVICES - {"ollama-pull"}:
        assert services[name]["healthcheck"]["test"], name
    assert services["api"]["depends_on"]["db"] == {"condition": "service_healthy"}
    assert services["lb"]["depends_on"] == {"api": {"condition": "service_healthy"}}
    assert services["open-webui"]["depends_on"] == {"lb": {"condition": "service_healthy"}}
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])


def test_nginx_spreads_requests_over_every_replica_and_streams(resolved: dict[str, Any]) -> None:
    conf = NGINX_CONF.read_text()
    port = resolved["services"]["api"]["environment"]["MEMORY_CHAIN_SERVER_PORT"]
    listen = re.search(r"listen (\d+);", conf)
    assert listen is not None
    assert listen[1] == port  # the port the lb service publishes
    # Docker's DNS names every replica of `api`; a variable makes nginx ask it again.
    assert "resolver 127.0.0.11" in conf
    assert re.search(rf"set \$api http://api:{port};\s+proxy_pass \$api;", conf)
    assert "proxy_buffering off;" in conf  # server-sent events pass chunk by chunk
    body = re.search(r"client_max_body_size (\d+)m;", conf)
    assert body is not None
    limit = MemorySettings.model_fields["max_request_bytes"].default
    assert int(body[1]) * 2**20 >= limit  # the API answers 413 itself, with its message
