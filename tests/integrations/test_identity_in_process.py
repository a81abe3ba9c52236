"""The in-process doors check the user they are given as every door does.

The agent middleware (``run_ids``), the LangGraph store (a namespace's first label, and a
list's prefix), the MCP server for one user (``memory-chain mcp --user``) and the chat chain
hold the stores themselves, so no key is asked: the user the code names is checked by
:func:`memory_chain.identity.user_named`, the in-process branch of ``identify``. A malformed
user is refused by each with the same error and message; the middleware no longer turns a
non-string (``42``) into a user id. SQLite only, no model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp

from memory_chain.chain import chat_request
from memory_chain.config import MemorySettings
from memory_chain.errors import InvalidInputError
from memory_chain.integrations.mcp import build_mcp_server
from memory_chain.integrations.middleware import run_ids
from memory_chain.integrations.store import MemoryStore
from memory_chain.schemas import validate_id
from memory_chain.services import Services, open_services

BAD_USERS = {
    "int": 42,
    "space": "a b",
    "too-long": "x" * 129,
    "nul": "ana\x00",
    "path": "../etc",
    "newline": "ana\n",
}


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    data_dir = tmp_path_factory.mktemp("in-process") / "data"
    settings = MemorySettings(data_dir=data_dir, llm_fallback="off", memory_tier3_enabled=False)
    opened = open_services(settings)
    try:
        yield opened
    finally:
        opened.close()


def _runtime(user: object) -> Any:
    """What LangGraph hands the middleware: the thread, and a context naming the user."""
    return SimpleNamespace(context={"user_id": user}, execution_info=SimpleNamespace(thread_id="t"))


DOORS: dict[str, Callable[[Services, object], object]] = {
    "middleware": lambda services, user: run_ids(_runtime(user), "default"),
    "store put": lambda services, user: MemoryStore(services).batch(
        [PutOp((user, "notes"), "k", {"text": "x"})]  # type: ignore[arg-type]
    ),
    "store get": lambda services, user: MemoryStore(services).batch(
        [GetOp((user, "facts"), "k")]  # type: ignore[arg-type]
    ),
    "store list": lambda services, user: MemoryStore(services).batch(
        [ListNamespacesOp(match_conditions=(MatchCondition("prefix", (user,)),))]  # type: ignore[arg-type]
    ),
    "mcp": lambda services, user: build_mcp_server(services, user=user),  # type: ignore[arg-type]
    "chain": lambda services, user: chat_request(
        "hi", {"configurable": {"conversation_id": "c", "user_id": user}}
    ),
}


@pytest.mark.parametrize("bad", BAD_USERS.values(), ids=BAD_USERS.keys())
def test_every_in_process_door_refuses_a_malformed_user_the_same_way(
    services: Services, bad: object
) -> None:
    # What identify's in-process branch answers (tests/test_identity.py): the user id check.
    with pytest.raises(InvalidInputError) as expected:
        validate_id(bad, "user id")
    for name, door in DOORS.items():
        with pytest.raises(InvalidInputError) as refused:
            door(services, bad)
        assert str(refused.value) == str(expected.value), name


def test_in_process_doors_act_as_the_user_named_or_the_default(services: Services) -> None:
    assert run_ids(_runtime("webui:u-1"), "default").user_id == "webui:u-1"
    assert run_ids(_runtime(None), "default").user_id == "default"
    assert run_ids(_runtime(""), "default").user_id == "default"  # an unset config value
    store = MemoryStore(services)
    store.put(("ana", "notes"), "k", {"text": "vegan"})
    item = store.get(("ana", "notes"), "k")
    assert item is not None
    assert item.value == {"text": "vegan"}
    assert store.list_namespaces(prefix=("ana",)) == [("ana", "notes")]
    with pytest.raises(InvalidInputError, match="invalid user id ''"):
        store.batch([GetOp(("", "notes"), "k")])  # a store namespace has no default user


def test_the_mcp_command_checks_its_user_as_the_other_doors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from memory_chain.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_CHAIN_DATA_DIR", str(tmp_path / "data"))
    result = CliRunner().invoke(app, ["mcp", "--user", "a b"])
    assert result.exit_code != 0
    assert "invalid user id 'a b'" in result.output
