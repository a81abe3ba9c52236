"""Tier 2 for memory_chain's LangGraph store: the agents' own items, and who owns what.

``MemoryStore`` (:mod:`memory_chain.integrations.store`) shows each user's facts and
conversations as namespaces, and keeps what an agent stores in any other namespace of the
user in ``store_items`` (migration 0011): one row per user, namespace and key, with the value
as JSON, the text a query is matched against and its vector. This module reads and writes
those rows, and lists what the namespace listing needs from the other tables (the users with
facts, the conversations of each user).

A namespace is stored below its user as a JSON array of labels, written the same way every
time, so that "every namespace under ``("notes",)``" is one indexed prefix condition.

Example:
    >>> items = StoreItems(store.database)  # doctest: +SKIP
    >>> items.put("ana", ("notes",), "diet", {"text": "vegan"}, search_text="vegan")
    ... # doctest: +SKIP
    >>> items.get("ana", ("notes",), "diet").value  # doctest: +SKIP
    {'text': 'vegan'}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, delete, or_, select, update

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.schemas import as_utc, utcnow
from memory_chain.tiers.sql.database import Database
from memory_chain.tiers.sql.models import conversations, facts, store_items
from memory_chain.tiers.sql.rows import client_id, naive_utc

#: The longest value accepted, as JSON characters: an item is a note or a record an agent
#: keeps, read whole by every search of its namespace, not a document store.
MAX_VALUE_CHARS = 64_000

#: The label below a user under which ``MemoryStore`` shows the user's facts (a view of the
#: ``facts`` table): no item is stored there.
FACTS = "facts"
#: The label below a user under which ``MemoryStore`` shows the user's conversations (a view
#: of the conversation tables): no item is stored there.
CONVERSATIONS = "conversations"
#: The labels no item's namespace may start with.
RESERVED_LABELS = (FACTS, CONVERSATIONS)


class StoreItemExistsError(MemoryChainError):
    """An item being restored is already stored (the same user, namespace and key)."""

    def __init__(self, user_id: str, namespace: Sequence[str], key: str) -> None:
        super().__init__(
            f"store item {key!r} in namespace {encode_namespace(namespace)} of user {user_id!r} "
            "already exists in the database: skip existing items (--on-conflict skip), or "
            "delete it first"
        )
        self.user_id = user_id
        self.namespace = tuple(namespace)
        self.key = key


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One of a user's items.

    Attributes:
        user_id: Whose.
        namespace: Its namespace below the user (``("notes",)``).
        key: Its key in the namespace.
        value: The value, as stored.
        created_at: When it was first stored.
        updated_at: When it was last stored.
        search_text: What a query is matched against (``None``: not searchable by query).
        embedding: ``search_text``'s vector (normalized float32), if embedded.
    """

    user_id: str
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    search_text: str | None = None
    embedding: bytes | None = None


def joined_text(texts: Iterable[str]) -> str | None:
    """Texts joined by newlines, blank ones left out (``None`` if none is left)."""
    return "\n".join(text for text in texts if text.strip()) or None


def value_text(value: Any) -> str | None:
    """Every string in a value, joined: what a query is matched against by default.

    An item put without index fields is searched by all of its strings; an imported item is
    too (its fields are not in the export).
    """
    return joined_text(_strings(value))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def encode_namespace(namespace: Sequence[str]) -> str:
    """A namespace as stored: its labels as a compact JSON array."""
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def encode_value(value: Mapping[str, Any]) -> str:
    """An item's value as stored (JSON).

    Raises:
        InvalidInputError: If it is not JSON (a set, a datetime, NaN, ...), or too long.
    """
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"an item's value must be JSON (strings, numbers, booleans, null, lists and "
            f"objects with string keys): {exc}; convert dates to ISO strings first"
        ) from exc
    if len(encoded) > MAX_VALUE_CHARS:
        raise InvalidInputError(
            f"an item's value has {len(encoded):,} characters as JSON, more than "
            f"{MAX_VALUE_CHARS:,}: store a summary, or split it into several items"
        )
    return encoded


def _under(prefix: Sequence[str]) -> ColumnElement[bool]:
    """Namespaces equal to ``prefix`` or below it."""
    exact = encode_namespace(prefix)
    if not prefix:
        return store_items.c.namespace.startswith("[")
    below = exact[:-1] + ","  # '["a","b"]' -> '["a","b",'
    return or_(
        store_items.c.namespace == exact,
        store_items.c.namespace.startswith(below, autoescape=True),
    )


def item_from_row(row: Any) -> StoredItem:
    """A ``store_items`` row as a :class:`StoredItem`."""
    return StoredItem(
        user_id=row.user_id,
        namespace=tuple(json.loads(row.namespace)),
        key=row.key,
        value=json.loads(row.value),
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        search_text=row.search_text,
        embedding=row.embedding,
    )


class StoreItems:
    """The users' items in ``store_items`` (see the module docstring).

    Creating one does no I/O.

    Args:
        database: Tier 2.
    """

    def __init__(self, database: Database) -> None:
        self.database = database

    def get(self, user_id: str, namespace: Sequence[str], key: str) -> StoredItem | None:
        """The item, or ``None``."""
        rows = self.database.read(
            select(store_items).where(
                store_items.c.user_id == user_id,
                store_items.c.namespace == encode_namespace(namespace),
                store_items.c.key == key,
            )
        )
        return item_from_row(rows[0]) if rows else None

    def values(self, user_id: str, namespace: Sequence[str], keys: Sequence[str]) -> dict[str, Any]:
        """The values of the items of ``keys`` in ``namespace`` that exist, by key (one read)."""
        if not keys:
            return {}
        rows = self.database.read(
            select(store_items.c.key, store_items.c.value).where(
                store_items.c.user_id == user_id,
                store_items.c.namespace == encode_namespace(namespace),
                store_items.c.key.in_(list(keys)),
            )
        )
        return {row.key: json.loads(row.value) for row in rows}

    def under(self, user_id: str, prefix: Sequence[str] = ()) -> list[StoredItem]:
        """The user's items in ``prefix`` and the namespaces below it, last stored first."""
        rows = self.database.read(
            select(store_items)
            .where(store_items.c.user_id == user_id, _under(prefix))
            .order_by(store_items.c.updated_at.desc(), store_items.c.namespace, store_items.c.key)
        )
        return [item_from_row(row) for row in rows]

    def put(
        self,
        user_id: str,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        search_text: str | None = None,
        embedding: bytes | None = None,
    ) -> None:
        """Store an item, or replace the one under that key (its creation time is kept).

        Raises:
            InvalidInputError: If the value is not JSON, or too long.
        """
        encoded = encode_value(value)
        now = naive_utc(utcnow())
        values = {
            "value": encoded,
            "search_text": search_text,
            "embedding": embedding,
            "updated_at": now,
        }
        statement = self.database.insert(store_items).values(
            user_id=user_id,
            namespace=encode_namespace(namespace),
            key=key,
            created_at=now,
            **values,
        )
        upsert = statement.on_conflict_do_update(
            index_elements=[store_items.c.user_id, store_items.c.namespace, store_items.c.key],
            set_=values,
        )

        def work(conn: Connection) -> None:
            conn.execute(upsert)

        self.database.write(work)

    def restore(self, items: Sequence[StoredItem], *, skip_existing: bool = False) -> int:
        """Store items as they were exported (dates kept), in one transaction.

        Unlike :meth:`put`, an item already stored is never replaced. An item restored
        without a vector is embedded at its first search with an embedding model, as one
        put without a model is (:mod:`memory_chain.integrations.store_agent`).

        Args:
            items: The items, ``search_text`` as a put would have computed it.
            skip_existing: Leave an item already stored (the same user, namespace and key)
                as it is and go on; else refuse the whole batch.

        Returns:
            How many were stored.

        Raises:
            StoreItemExistsError: If one is already stored and not ``skip_existing``;
                nothing of the batch is written.
            InvalidInputError: If a value is not JSON, or too long; nothing is written.
        """
        rows = [
            {
                "user_id": item.user_id,
                "namespace": encode_namespace(item.namespace),
                "key": item.key,
                "value": encode_value(item.value),
                "search_text": item.search_text,
                "embedding": item.embedding,
                "created_at": naive_utc(item.created_at),
                "updated_at": naive_utc(item.updated_at),
            }
            for item in items
        ]
        keys = [store_items.c.user_id, store_items.c.namespace, store_items.c.key]

        def work(conn: Connection) -> int:
            stored = 0
            for item, row in zip(items, rows, strict=True):
                statement = self.database.insert(store_items).values(**row)
                # RETURNING, not rowcount: the row comes back only if it was inserted.
                added = conn.execute(
                    statement.on_conflict_do_nothing(index_elements=keys).returning(
                        store_items.c.key
                    )
                ).first()
                if added is None and not skip_existing:
                    raise StoreItemExistsError(item.user_id, item.namespace, item.key)
                stored += added is not None
            return stored

        restored: int = self.database.write(work) if rows else 0
        return restored

    def set_embeddings(
        self, user_id: str, vectors: Mapping[tuple[tuple[str, ...], str], tuple[str, bytes]]
    ) -> None:
        """Store the vectors of items embedded late, if their text is still the one embedded.

        Args:
            user_id: Whose items.
            vectors: ``(namespace, key) -> (search_text embedded, vector)``.
        """

        def work(conn: Connection) -> None:
            for (namespace, key), (text, vector) in vectors.items():
                conn.execute(
                    update(store_items)
                    .where(
                        store_items.c.user_id == user_id,
                        store_items.c.namespace == encode_namespace(namespace),
                        store_items.c.key == key,
                        store_items.c.search_text == text,
                    )
                    .values(embedding=vector)
                )

        self.database.write(work)

    def delete(self, user_id: str, namespace: Sequence[str], key: str) -> bool:
        """Delete an item; whether there was one."""

        def work(conn: Connection) -> bool:
            result = conn.execute(
                delete(store_items).where(
                    store_items.c.user_id == user_id,
                    store_items.c.namespace == encode_namespace(namespace),
                    store_items.c.key == key,
                )
            )
            return bool(result.rowcount)

        deleted: bool = self.database.write(work)
        return deleted

    def namespaces(self, user_id: str | None = None) -> list[tuple[str, tuple[str, ...]]]:
        """``(user_id, namespace)`` of every namespace holding items (one user's, or all)."""
        statement = select(store_items.c.user_id, store_items.c.namespace).distinct()
        if user_id is not None:
            statement = statement.where(store_items.c.user_id == user_id)
        return [
            (row.user_id, tuple(json.loads(row.namespace))) for row in self.database.read(statement)
        ]


def users_with_facts(database: Database, user_id: str | None = None) -> list[str]:
    """The users with at least one current fact (or ``[user_id]`` if that user has one)."""
    statement = select(facts.c.user_id).where(facts.c.status == "current").distinct()
    if user_id is not None:
        statement = statement.where(facts.c.user_id == user_id)
    return [row.user_id for row in database.read(statement)]


def conversation_ids(database: Database, user_id: str | None = None) -> list[tuple[str, str]]:
    """``(user_id, conversation_id)`` of every conversation not deleted (one user's, or all).

    Conversation ids are the ones clients use.
    """
    statement = select(conversations.c.user_id, conversations.c.conversation_id).where(
        or_(conversations.c.status.is_(None), conversations.c.status != "deleted"),
        conversations.c.user_id.is_not(None),
    )
    if user_id is not None:
        statement = statement.where(conversations.c.user_id == user_id)
    return [(row.user_id, client_id(row.conversation_id)) for row in database.read(statement)]
