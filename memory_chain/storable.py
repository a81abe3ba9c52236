r"""What text and numbers the stores can keep: one check for every door.

PostgreSQL refuses two kinds of text that Python strings and JSON can carry: a NUL character
(``\x00``: a ``text`` value cannot hold one) and an unpaired surrogate (``\ud800``: valid as
a JSON escape, but no UTF-8 encoding exists for it, so no driver can send it). SQLite keeps
the first and refuses the second, and a NUL it kept makes the user's export unimportable.
PostgreSQL's ``INTEGER`` columns hold 32-bit numbers. So every door that takes text or
numbers to be stored (the REST bodies, LangServe's input, the MCP tools, the LangGraph
store, an import) checks them here first and answers with what to fix, instead of letting
the database refuse them later (a 500, or a stored row that cannot be moved).

Example:
    >>> check_text("I live in Lisbon", "the fact's text")
    'I live in Lisbon'
    >>> text_problem("Lis\x00bon")
    'contains a NUL character (\\x00) at position 3: remove it'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator

from memory_chain.errors import InvalidInputError

#: The largest number an ``INTEGER`` column holds (32-bit on PostgreSQL).
MAX_STORED_INT = 2**31 - 1

#: How deep :func:`check_value` looks into nested objects and lists.
_MAX_DEPTH = 64


def text_problem(text: str) -> str | None:
    """What keeps ``text`` from being stored, said as what to fix; ``None`` if nothing.

    The first problem is named: a NUL character, or an unpaired surrogate (the character
    that cannot be encoded as UTF-8), with its position (counted from 0).
    """
    nul = text.find("\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        if nul == -1 or exc.start < nul:
            code = f"\\u{ord(text[exc.start]):04x}"
            return (
                f"is not valid Unicode: an unpaired surrogate ({code}) at position {exc.start}: "
                "remove it, or send the whole character (UTF-8 text, or both halves of a JSON "
                "\\u escape pair)"
            )
    if nul != -1:
        return f"contains a NUL character (\\x00) at position {nul}: remove it"
    return None


def check_text(text: object, what: str) -> str:
    """``text``, if the stores can keep it.

    Args:
        text: The text.
        what: How to name it in the message ("the fact's text").

    Returns:
        The text, unchanged.

    Raises:
        InvalidInputError: If it is not a string, or holds a NUL character or an unpaired
            surrogate; the message says which and where.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be text, got {type(text).__name__}")
    problem = text_problem(text)
    if problem is not None:
        raise InvalidInputError(f"{what} {problem}")
    return text


def check_value(value: object, what: str) -> None:
    """Check every string in a JSON-like value (object keys too), as :func:`check_text` does.

    Args:
        value: Objects, lists, strings, numbers, booleans and ``None``, nested.
        what: How to name the value; a nested string is named by its path
            (``the value['notes'][2]``).

    Raises:
        InvalidInputError: On the first string that cannot be stored, or nesting deeper than
            64 levels.
    """
    _check_value(value, what, 0)


def _check_value(value: object, where: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise InvalidInputError(f"{where} is nested more than {_MAX_DEPTH} levels deep")
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            if isinstance(key, str):
                check_text(key, f"a key of {where}")
            _check_value(inner, f"{where}[{key!r}]", depth + 1)
    elif isinstance(value, list | tuple):
        for index, inner in enumerate(value):
            _check_value(inner, f"{where}[{index}]", depth + 1)


def check_stored_int(number: int, what: str) -> int:
    """``number``, if an ``INTEGER`` column holds it (0 to :data:`MAX_STORED_INT`).

    Raises:
        InvalidInputError: Naming the range.
    """
    if not 0 <= number <= MAX_STORED_INT:
        raise InvalidInputError(f"{what} must be from 0 to {MAX_STORED_INT:,}, got {number:,}")
    return number


def _pydantic_text(text: str) -> str:
    problem = text_problem(text)
    if problem is not None:
        raise ValueError(f"the text {problem}")  # pydantic reports it as a 422 on the field
    return text


#: A string field of a request body that is stored (pydantic refuses unpaired surrogates
#: itself; this adds the NUL character, with the same message as :func:`check_text`).
StorableText = Annotated[str, AfterValidator(_pydantic_text)]


__all__ = [
    "MAX_STORED_INT",
    "StorableText",
    "check_stored_int",
    "check_text",
    "check_value",
    "text_problem",
]
