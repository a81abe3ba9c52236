"""``memory-chain status``: what an import left, per user, for people and as JSON.

The command runs on a data folder in a temp directory with the real embedding model (the
import embeds what it stored); how the figures follow consolidation is tested on both
databases in ``tests/tiers/test_status.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memory_chain.cli import app

DATA = Path(__file__).parent / "samples"


def test_status_shows_what_an_import_stored_and_what_waits(tmp_path: Path) -> None:
    env = {
        "MEMORY_CHAIN_DATA_DIR": str(tmp_path / "data"),
        "MEMORY_CHAIN_DATABASE_URL": None,
        "MEMORY_CHAIN_LLM_FALLBACK": "off",
    }
    runner = CliRunner()
    assert runner.invoke(app, ["migrate"], env=env).exit_code == 0
    empty = runner.invoke(app, ["status"], env=env)
    assert empty.exit_code == 0, empty.output
    assert "nothing stored yet" in empty.stdout

    for name, user in (("chatgpt_conversations.json", "ana"), ("plain.csv", "bob")):
        imported = runner.invoke(app, ["import", str(DATA / name), "--user", user], env=env)
        assert imported.exit_code == 0, imported.output

    result = runner.invoke(app, ["status", "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["tier3"] is True
    ana, bob = report["users"]
    assert ana == {
        "user_id": "ana",
        "conversations": 2,
        "turns": 7,
        "turns_consolidated": 0,
        "turns_to_consolidate": 7,
        "conversations_to_consolidate": 2,
        "turns_to_embed": 0,
        "facts": 0,
        "facts_learnt": 0,
        "last_summary_at": None,
    }
    assert (bob["user_id"], bob["turns"]) == ("bob", 4)

    one = runner.invoke(app, ["status", "--user", "ana"], env=env)
    assert one.exit_code == 0, one.output
    assert "user ana: 2 conversations, 7 turns" in one.stdout
    assert "consolidated    0 of 7 turns (7 wait in 2 conversations)" in one.stdout
    assert "searchable      7 of 7 turns by meaning (0 wait to be embedded)" in one.stdout
    assert "user bob" not in one.stdout
    nobody = runner.invoke(app, ["status", "--user", "carol", "--json"], env=env)
    assert json.loads(nobody.stdout)["users"][0]["turns"] == 0
