"""The README's settings table is the one generated from MemorySettings."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_chain.config import MemorySettings
from memory_chain.settings_doc import (
    END_MARKER,
    START_MARKER,
    UNSET,
    current_block,
    main,
    replace_block,
    settings_rows,
    settings_table,
)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_readme_block_is_the_generated_table() -> None:
    assert current_block(README.read_text()) == settings_table(), (
        "README.md's settings table is out of date: run "
        "`python -m memory_chain.settings_doc --write README.md`"
    )


def test_every_field_has_a_row_and_a_description() -> None:
    rows = settings_rows()
    assert [name for name, _, _ in rows] == [
        f"`MEMORY_CHAIN_{field.upper()}`" for field in MemorySettings.model_fields
    ]
    for name, _, meaning in rows:
        assert meaning, f"{name} has no Field description"


def test_defaults_are_shown_as_set_in_the_environment() -> None:
    rows = {name.strip("`"): default for name, default, _ in settings_rows()}
    assert rows["MEMORY_CHAIN_DATA_DIR"] == "`data`"
    assert rows["MEMORY_CHAIN_MEMORY_TIER3_ENABLED"] == "`true`"
    assert rows["MEMORY_CHAIN_CONSOLIDATION_IDLE_SECONDS"] == "`3600`"
    assert rows["MEMORY_CHAIN_LLM_TEMPERATURE"] == "`0.2`"
    assert rows["MEMORY_CHAIN_DATABASE_URL"] == UNSET
    assert rows["MEMORY_CHAIN_API_KEYS"] == UNSET


def test_write_replaces_only_the_block(tmp_path: Path) -> None:
    page = tmp_path / "README.md"
    page.write_text(f"# title\n\nbefore\n{START_MARKER}\nold table\n{END_MARKER}\n\nafter\n")
    main(["--write", str(page)])
    text = page.read_text()
    assert text.startswith("# title\n\nbefore\n")
    assert text.endswith(f"{END_MARKER}\n\nafter\n")
    assert current_block(text) == settings_table()
    assert replace_block(text, settings_table()) == text  # idempotent


def test_missing_markers_are_reported() -> None:
    with pytest.raises(ValueError, match="settings:start"):
        replace_block("# no block here\n", settings_table())
