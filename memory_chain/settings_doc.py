"""The settings table of the README, generated from :class:`MemorySettings`.

One row per field: the environment variable, the default and the field's description, so the
documentation cannot drift from the code (``tests/test_settings_doc.py`` compares them).

Print the table, or rewrite the README's block between the marker comments::

    python -m memory_chain.settings_doc
    python -m memory_chain.settings_doc --write README.md

Example:
    >>> from memory_chain.settings_doc import settings_table
    >>> settings_table().splitlines()[0]
    '| variable | default | meaning |'
"""

from __future__ import annotations

import argparse
import re
import sys
import typing
from collections.abc import Sequence
from enum import Enum
from pathlib import Path

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from memory_chain.config import MemorySettings

START_MARKER = "<!-- settings:start -->"
END_MARKER = "<!-- settings:end -->"
#: Shown as the default of a field that is unset by default (an en dash, as in the README).
UNSET = "\N{EN DASH}"
_PLACEHOLDER = re.compile(r"<\w+>(?:[\w/.-]*\w)?")


def _cell(text: str) -> str:
    # Placeholders such as <data_dir>/memory.db would render as HTML tags: show them as code.
    return _PLACEHOLDER.sub(lambda match: f"`{match[0]}`", text).replace("|", "\\|")


def format_default(field: FieldInfo) -> str:
    """A field's default as written in the table (:data:`UNSET` when there is none)."""
    value = field.get_default(call_default_factory=True)
    if value is None:
        return UNSET
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, dict | list) and not value:
        return UNSET
    return f"`{value}`"


def _choices(field: FieldInfo) -> str:
    if typing.get_origin(field.annotation) is typing.Literal:
        values = ", ".join(f"`{value}`" for value in typing.get_args(field.annotation))
        return f" One of {values}."
    return ""


def settings_rows(
    settings_class: type[BaseSettings] = MemorySettings,
) -> list[tuple[str, str, str]]:
    """``(environment variable, default, description)`` of every field, in class order."""
    prefix = str(settings_class.model_config.get("env_prefix", ""))
    rows = []
    for name, field in settings_class.model_fields.items():
        description = (field.description or "").strip() + _choices(field)
        rows.append((f"`{prefix}{name.upper()}`", format_default(field), _cell(description)))
    return rows


def settings_table(settings_class: type[BaseSettings] = MemorySettings) -> str:
    """The markdown table of :func:`settings_rows` (ends with a newline)."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, default, meaning in settings_rows(settings_class):
        lines.append(f"| {name} | {default} | {meaning} |")
    return "\n".join(lines) + "\n"


def replace_block(document: str, table: str) -> str:
    """``document`` with the text between the settings markers replaced by ``table``.

    Raises:
        ValueError: If the markers are missing or out of order.
    """
    start = document.find(START_MARKER)
    end = document.find(END_MARKER)
    if start < 0 or end < start:
        raise ValueError(
            f"no settings block: put {START_MARKER} and {END_MARKER} on their own lines "
            "where the table goes"
        )
    head = document[: start + len(START_MARKER)]
    return f"{head}\n{table}{document[end:]}"


def current_block(document: str) -> str:
    """The text between the settings markers (without them)."""
    start = document.index(START_MARKER) + len(START_MARKER)
    return document[start : document.index(END_MARKER)].removeprefix("\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Print the table, or rewrite the block in the given file (``--write``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, metavar="FILE", help="rewrite FILE's block")
    args = parser.parse_args(argv)
    table = settings_table()
    if args.write is None:
        sys.stdout.write(table)
        return
    path: Path = args.write
    path.write_text(replace_block(path.read_text(), table))


if __name__ == "__main__":
    main()
