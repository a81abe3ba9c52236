"""Store-item lines of the export format: what agents kept in the users' ``MemoryStore``.

An item of a user's own namespaces (:mod:`memory_chain.integrations.store_agent`, a row of
``store_items``) is one line (the whole format is in :mod:`.format`)::

    {"format": "memory-chain/store-item", "version": 3, "user_id": "ana",
     "namespace": ["notes"], "key": "diet", "value": {"text": "vegan, no nuts"},
     "index": true, "created_at": "2026-05-01T09:03:00.000000Z",
     "updated_at": "2026-05-02T18:00:00.000000Z"}

``index`` is whether the item is searched by query (``false``: it was put with
``index=False``). What a query is matched against is not in the file: on import it is every
string of the value, as a put without ``index`` fields computes it
(:func:`~memory_chain.tiers.sql.store_items.value_text`), and its vector is computed at the
item's first search with an embedding model, as for an item put without one. An item put
with ``index=["field", ...]`` is therefore matched against all of its strings once imported:
the fields named are not stored.

Example:
    >>> line = {"format": "memory-chain/store-item", "version": 3, "user_id": "ana",
    ...         "namespace": ["notes"], "key": "diet", "value": {"text": "vegan"}}
    >>> item = store_item_from_json(line)
    >>> check_store_item(item)
    >>> item.namespace, item.search_text
    (('notes',), 'vegan')
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory_chain.errors import InvalidInputError
from memory_chain.schemas import utcnow, validate_id
from memory_chain.storable import check_value
from memory_chain.tiers.sql.store_items import (
    RESERVED_LABELS,
    StoredItem,
    encode_namespace,
    encode_value,
    value_text,
)
from memory_chain.transfer.fields import (
    check_fields,
    check_version,
    format_timestamp,
    read_list,
    read_object,
    read_str,
    read_time,
)
from memory_chain.transfer.format import STORE_ITEM_FORMAT, STORE_ITEM_VERSIONS, VERSION

_FIELDS = frozenset(
    {
        "format",
        "version",
        "user_id",
        "namespace",
        "key",
        "value",
        "index",
        "created_at",
        "updated_at",
    }
)


def store_item_to_json(item: StoredItem) -> dict[str, Any]:
    """A store item as the JSON object of one line (without its search text and vector)."""
    return {
        "format": STORE_ITEM_FORMAT,
        "version": VERSION,
        "user_id": item.user_id,
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "index": item.search_text is not None,
        "created_at": format_timestamp(item.created_at),
        "updated_at": format_timestamp(item.updated_at),
    }


def store_item_from_json(value: object, *, now: datetime | None = None) -> StoredItem:
    """Read one store-item line's JSON object (see the module docstring for the format).

    Args:
        value: The parsed JSON value.
        now: The ``created_at`` of an item that leaves it out (default: now).

    Returns:
        The item, with the search text a put would compute and no vector;
        :func:`check_store_item` checks it against the store's rules.

    Raises:
        InvalidInputError: If the object is not a store item of a format version that has
            them, a field has the wrong type, or ``index`` is true of a value without text;
            the message names the field.
    """
    obj = read_object(value, "the line")
    if obj.get("format") != STORE_ITEM_FORMAT:
        raise InvalidInputError(f"format is {obj.get('format')!r}, expected {STORE_ITEM_FORMAT!r}")
    check_version(obj, STORE_ITEM_VERSIONS, "store items")
    check_fields(obj, _FIELDS, "")
    labels = read_list(obj.get("namespace"), "namespace")
    namespace = tuple(read_str(label, f"namespace[{i}]") or "" for i, label in enumerate(labels))
    item_value = read_object(obj.get("value"), "value")
    index = obj.get("index", True)
    if not isinstance(index, bool):
        raise InvalidInputError(f"index must be true or false, got {index!r}")
    text = value_text(item_value) if index else None
    if index and text is None:
        raise InvalidInputError(
            "index is true but the value holds no text to search: set index to false"
        )
    created_at = read_time(obj.get("created_at"), "created_at", now or utcnow())
    return StoredItem(
        user_id=read_str(obj.get("user_id"), "user_id") or "",
        namespace=namespace,
        key=read_str(obj.get("key"), "key") or "",
        value=item_value,
        created_at=created_at,
        updated_at=read_time(obj.get("updated_at"), "updated_at", created_at),
        search_text=text,
    )


def check_store_item(item: StoredItem) -> None:
    """Check that a store item read from a file can be stored as it is.

    The rules ``MemoryStore`` applies to a put, so that the item is reachable through it
    once imported.

    Args:
        item: The item, as read from a file.

    Raises:
        InvalidInputError: On an invalid user id, namespace label or key (1-128 letters,
            digits and ``._:@-``); an empty namespace, or one of the user's facts or
            conversations; a value holding text no database keeps (a NUL character or an
            unpaired surrogate, anywhere: :func:`~memory_chain.storable.check_value`), that
            is not JSON or longer than
            :data:`~memory_chain.tiers.sql.store_items.MAX_VALUE_CHARS`; an ``updated_at``
            before ``created_at``.
    """
    validate_id(item.user_id, "user id")
    if not item.namespace:
        raise InvalidInputError(
            'namespace is empty: an item lives in a namespace below its user, e.g. ["notes"]'
        )
    for label in item.namespace:
        validate_id(label, "namespace label")
    if item.namespace[0] in RESERVED_LABELS:
        raise InvalidInputError(
            f"namespace {encode_namespace(item.namespace)} is where MemoryStore shows the user's "
            f"{item.namespace[0]}, not a place for items: facts and conversations travel as "
            "their own lines; give the item another namespace"
        )
    validate_id(item.key, "key")
    check_value(item.value, "the value")
    encode_value(item.value)
    if item.updated_at < item.created_at:
        raise InvalidInputError(
            f"updated_at {format_timestamp(item.updated_at)} is before created_at "
            f"{format_timestamp(item.created_at)}: an item is updated after it is created"
        )


__all__ = ["check_store_item", "store_item_from_json", "store_item_to_json"]
