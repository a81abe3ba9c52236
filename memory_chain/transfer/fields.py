"""Reading the fields of an export line: typed, with messages that name the field.

Every kind of line (:mod:`.format`, :mod:`.items`) reads its JSON object with these, so a
wrong type, an unknown field or an unknown version is reported the same way whatever the
line holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory_chain.errors import InvalidInputError
from memory_chain.schemas import as_utc
from memory_chain.storable import MAX_STORED_INT


def format_timestamp(value: datetime) -> str:
    """A timestamp as written in the file: UTC, microseconds, ``Z``."""
    return as_utc(value).isoformat(timespec="microseconds").replace("+00:00", "Z")


def check_fields(obj: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    """Refuse a field not in ``allowed`` (a typo must not silently drop data).

    Raises:
        InvalidInputError: Naming the first unknown field and the known ones.
    """
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise InvalidInputError(
            f"{where}unknown field {unknown[0]!r}: the fields are {', '.join(sorted(allowed))}"
        )


def check_version(obj: dict[str, Any], readable: frozenset[int], what: str) -> None:
    """Refuse a line whose ``version`` is not one of ``readable`` (for lines of ``what``).

    Raises:
        InvalidInputError: Saying which versions are read, and to upgrade.
    """
    version = obj.get("version")
    if type(version) is not int or version not in readable:
        raise InvalidInputError(
            f"format version {version!r} is not supported for {what} (this memory-chain reads "
            f"version {', '.join(map(str, sorted(readable)))}): upgrade memory-chain, or "
            "export again with this version"
        )


def read_int(value: object, where: str, *, optional: bool = False) -> int | None:
    """A whole number from 0 to :data:`~memory_chain.storable.MAX_STORED_INT` (or ``None``).

    Every number of a line is stored in an ``INTEGER`` column (32-bit on PostgreSQL).

    Raises:
        InvalidInputError: On anything else (a boolean, a float, a negative number, one too
            large to store).
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_STORED_INT:
        wanted = f"a whole number from 0 to {MAX_STORED_INT:,}" + (" or null" if optional else "")
        raise InvalidInputError(f"{where} must be {wanted}, got {value!r}")
    return value


def read_str(value: object, where: str, *, optional: bool = False) -> str | None:
    """A string (or ``None`` if ``optional``).

    Raises:
        InvalidInputError: On anything else.
    """
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{where} must be a string, got {value!r}")
    return value


def read_time(value: object, where: str, default: datetime) -> datetime:
    """An ISO 8601 timestamp, in UTC (``default`` if ``None``; naive values are UTC).

    Raises:
        InvalidInputError: If it is not a string, or not ISO 8601.
    """
    if value is None:
        return default
    text = read_str(value, where) or ""
    try:
        return as_utc(datetime.fromisoformat(text))
    except ValueError:
        raise InvalidInputError(
            f"{where} {text!r} is not an ISO 8601 timestamp (e.g. 2026-05-03T10:00:00.000000Z)"
        ) from None


def read_object(value: object, where: str) -> dict[str, Any]:
    """A JSON object.

    Raises:
        InvalidInputError: On anything else.
    """
    if not isinstance(value, dict):
        raise InvalidInputError(f"{where} must be a JSON object, got {type(value).__name__}")
    return value


def read_list(value: object, where: str) -> list[Any]:
    """A JSON array.

    Raises:
        InvalidInputError: On anything else.
    """
    if not isinstance(value, list):
        raise InvalidInputError(f"{where} must be a JSON array, got {type(value).__name__}")
    return value


__all__ = [
    "check_fields",
    "check_version",
    "format_timestamp",
    "read_int",
    "read_list",
    "read_object",
    "read_str",
    "read_time",
]
