"""Which export a file is, told by its content, and reading it into conversations.

* a JSON array (or one object) of conversations with a ``mapping``: ChatGPT's
  ``conversations.json`` (:mod:`.chatgpt`);
* a JSON array (or one object, or JSON Lines) of chats with a ``chat`` holding a ``history``
  or ``messages``: Open WebUI's export (:mod:`.openwebui`);
* JSON Lines whose first object has a ``format`` of ``memory-chain/...``: memory_chain's own
  export (read by :func:`memory_chain.transfer.import_jsonl`);
* JSON Lines (or a JSON array) of objects with ``conversation`` and ``role``: the plain
  format (:mod:`.plain`);
* anything else is read as the plain format's CSV.

``--format`` (``format=``) skips the detection.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_chain.errors import InvalidInputError
from memory_chain.imports.chatgpt import is_chatgpt_conversation, read_chatgpt
from memory_chain.imports.model import FORMATS, HistoryConversation, HistoryFormat
from memory_chain.imports.openwebui import is_open_webui_chat, read_open_webui
from memory_chain.imports.plain import csv_rows, is_plain_row, read_plain_rows

_OWN_FORMAT = "memory-chain/"


def _json_lines(text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"line {number} is not JSON: {exc.msg}") from None


def _parse(text: str) -> tuple[str, Any]:
    """``("json", value)``, ``("jsonl", first object)`` or ``("text", None)``.

    JSON Lines are told by their first line alone: a malformed later line is reported by
    the format's reader, with its number.
    """
    stripped = text.lstrip()
    if not stripped.startswith(("[", "{")):
        return "text", None
    try:
        return "json", json.loads(stripped)
    except json.JSONDecodeError:
        pass
    first = stripped.split("\n", 1)[0]
    try:
        return "jsonl", json.loads(first)
    except json.JSONDecodeError:
        return "text", None


def _classify(kind: str, value: Any) -> HistoryFormat:
    items = value if isinstance(value, list) else [value]
    first = next((item for item in items if item is not None), None)
    if kind == "text":
        return "csv"
    if isinstance(first, dict) and str(first.get("format", "")).startswith(_OWN_FORMAT):
        return "memory-chain"
    if is_chatgpt_conversation(first):
        return "chatgpt"
    if is_open_webui_chat(first):
        return "open-webui"
    if is_plain_row(first):
        return "jsonl"
    raise InvalidInputError(
        "cannot tell which export this is: expected Open WebUI's chat export, ChatGPT's "
        "conversations.json, memory-chain's JSON Lines, or the plain JSON Lines / CSV of "
        "conversation, role, content, timestamp (docs/cli.md); pass --format to say which"
    )


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text: {exc}") from None


def detect_format(path: Path) -> HistoryFormat:
    """The format of an export file, told by its content (see the module docstring).

    Raises:
        InvalidInputError: If it is none of the formats read.
    """
    return _classify(*_parse(_read_text(path)))


def read_history(
    path: Path, *, format: HistoryFormat | None = None
) -> tuple[HistoryFormat, list[HistoryConversation]]:
    """Read an export file into conversations (``memory-chain`` files are not read here).

    Args:
        path: The file.
        format: Its format; ``None`` to tell it by its content.

    Returns:
        The format and the conversations, in file order.

    Raises:
        InvalidInputError: On a file that is not in the format, naming what is wrong where;
            on ``memory-chain`` (import those with :func:`memory_chain.transfer.import_jsonl`).
    """
    if format is not None and format not in FORMATS:
        raise InvalidInputError(f"unknown format {format!r}: use one of {', '.join(FORMATS)}")
    text = _read_text(path)
    kind, value = _parse(text)
    found = format or _classify(kind, value)
    if found == "memory-chain":
        raise InvalidInputError(
            f"{path} is memory-chain's own export: import it with memory_chain.transfer"
        )
    if found == "csv":
        return found, list(read_plain_rows(csv_rows(text), "csv"))
    if kind == "text":
        raise InvalidInputError(f"{path} is not JSON, as the {found} format is")
    if kind == "jsonl":
        numbered = list(_json_lines(text))
    else:
        numbered = list(enumerate(value if isinstance(value, list) else [value]))
    items = [item for _, item in numbered]
    if found == "jsonl":
        where = "line" if kind == "jsonl" else "item"
        rows = (
            (f"{where} {number}", row)
            for number, row in numbered
            if _is_object(row, f"{where} {number}")
        )
        return found, list(read_plain_rows(rows, "jsonl"))
    reader = read_chatgpt if found == "chatgpt" else read_open_webui
    return found, list(reader(items))


def _is_object(row: object, where: str) -> bool:
    if not isinstance(row, dict):
        raise InvalidInputError(f"{where} is not a JSON object")
    return True


__all__ = ["detect_format", "read_history"]
