"""An import file checked as a whole, before anything of it is written.

:func:`~memory_chain.transfer.jsonl.import_jsonl` reads a file twice. On the first pass each
line is read and checked on its own (:func:`~memory_chain.transfer.jsonl.read_jsonl`) and
noted in an :class:`ImportPlan` with its line number, which then refuses what no single line
shows: a conversation, fact or store item that comes twice, a fact superseded by another
user's or whose id another user has, a store key naming two current facts of its user, more
current facts for a user than memory keeps (``memory_max_facts_per_user``, counting those
stored), and (with ``on_conflict="fail"``) a conversation or store item already stored. Only
then does the second pass write.

Example:
    >>> plan = ImportPlan()  # doctest: +SKIP
    >>> for number, item in read_jsonl(path, max_chars=200_000):  # doctest: +SKIP
    ...     plan.add(number, item)
    >>> plan.check(store.engine, on_conflict="fail", max_facts=2000)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from sqlalchemy import Engine

from memory_chain.errors import FactLimitError, InvalidInputError
from memory_chain.facts.model import MAX_FACTS_PER_USER, Fact
from memory_chain.tiers.sql.fact_adds import check_room, count_current
from memory_chain.tiers.sql.restore import (
    ConversationExistsError,
    ItemKey,
    OnConflict,
    existing_conversations,
    existing_facts,
    existing_store_items,
    keys_in_use,
)
from memory_chain.tiers.sql.rows import ConversationRecord, storage_errors
from memory_chain.tiers.sql.store_items import (
    StoredItem,
    StoreItemExistsError,
    encode_namespace,
)


class ImportFileError(InvalidInputError):
    """A line of an import file cannot be imported.

    Attributes:
        line: The 1-based line number.
    """

    def __init__(self, line: int, detail: str) -> None:
        super().__init__(f"line {line}: {detail}")
        self.line = line


@dataclass
class ImportPlan:
    """What a file holds, by line number (see the module docstring).

    Attributes:
        conversations: The line of each ``(user_id, conversation_id)``.
        fact_lines: The line of each fact id.
        facts: Each fact, by id.
        items: The line of each store item, by (user id, namespace, key).
    """

    conversations: dict[tuple[str, str], int] = field(default_factory=dict)
    fact_lines: dict[str, int] = field(default_factory=dict)
    facts: dict[str, Fact] = field(default_factory=dict)
    items: dict[ItemKey, int] = field(default_factory=dict)

    def add(self, number: int, item: ConversationRecord | Fact | StoredItem) -> None:
        """Note a line's conversation, fact or store item.

        Raises:
            ImportFileError: If the file had it already (the same conversation of the same
                user, fact id, or store item of the same user, namespace and key).
        """
        if isinstance(item, Fact):
            if item.id in self.fact_lines:
                raise ImportFileError(
                    number,
                    f"fact {item.id!r} comes twice (first on line {self.fact_lines[item.id]}): "
                    "keep one; nothing was imported",
                )
            self.fact_lines[item.id] = number
            self.facts[item.id] = item
            return
        if isinstance(item, StoredItem):
            key = (item.user_id, item.namespace, item.key)
            if key in self.items:
                where = encode_namespace(item.namespace)
                raise ImportFileError(
                    number,
                    f"store item {item.key!r} in namespace {where} of user {item.user_id!r} "
                    f"comes twice (first on line {self.items[key]}): keep one; nothing was "
                    "imported",
                )
            self.items[key] = number
            return
        owned = (item.info.user_id or "", item.info.conversation_id)
        if owned in self.conversations:
            raise ImportFileError(
                number,
                f"conversation {owned[1]!r} of user {owned[0]!r} comes twice (first on line "
                f"{self.conversations[owned]}): keep one; nothing was imported",
            )
        self.conversations[owned] = number

    def check(
        self, engine: Engine, on_conflict: OnConflict, *, max_facts: int = MAX_FACTS_PER_USER
    ) -> None:
        """Check the file against itself and the database, once every line is added.

        Args:
            engine: The database imported into.
            on_conflict: ``"fail"`` also refuses a conversation or store item already
                stored; ``"skip"`` leaves them to be skipped.
            max_facts: The most current facts a user may have.

        Raises:
            ImportFileError: Naming the first line at fault.
        """
        self._check_facts(engine, max_facts)
        if on_conflict != "fail":
            return
        taken = {
            self.conversations[owned]: f"{ConversationExistsError(owned[1])}"
            for owned in existing_conversations(engine, self.conversations)
        }
        taken.update(
            (self.items[key], f"{StoreItemExistsError(*key)}")
            for key in existing_store_items(engine, self.items)
        )
        if taken:
            first = min(taken)
            raise ImportFileError(first, f"{taken[first]}; nothing was imported")

    def _check_facts(self, engine: Engine, max_facts: int) -> None:
        """Refuse facts that would replace one of another user, or whose id another has."""
        lines, facts = self.fact_lines, self.facts
        for fact_id, number in lines.items():
            fact = facts[fact_id]
            replacement = facts.get(fact.superseded_by or "")
            if replacement is not None and replacement.user_id != fact.user_id:
                raise ImportFileError(
                    number,
                    f"fact {fact_id!r} of user {fact.user_id!r} is superseded by fact "
                    f"{replacement.id!r} of user {replacement.user_id!r} (line "
                    f"{lines[replacement.id]}): a fact is replaced by one of the same user; "
                    "nothing was imported",
                )
        stored = existing_facts(engine, lines)
        foreign = [fact_id for fact_id, owner in stored.items() if owner != facts[fact_id].user_id]
        if foreign:
            first = min(foreign, key=lines.__getitem__)
            raise ImportFileError(
                lines[first],
                f"fact {first!r} is already stored for another user: fact ids are unique in a "
                "database, keep the file's facts to their users; nothing was imported",
            )
        self._check_keys(engine, stored)
        self._check_room(engine, stored, max_facts)

    def _check_room(self, engine: Engine, stored: Collection[str], max_facts: int) -> None:
        """Refuse current facts that would take a user past ``max_facts``."""
        adding: dict[str, list[str]] = {}
        for fact_id in self.fact_lines:
            fact = self.facts[fact_id]
            if fact.current and fact_id not in stored:
                adding.setdefault(fact.user_id, []).append(fact_id)
        if not adding:
            return
        with storage_errors(), engine.connect() as conn:
            counts = count_current(conn, adding)
        for user_id, fact_ids in adding.items():
            try:
                check_room(user_id, counts[user_id], len(fact_ids), max_facts, origin="import")
            except FactLimitError as exc:
                first = fact_ids[max(max_facts - counts[user_id], 0)]
                raise ImportFileError(
                    self.fact_lines[first], f"{exc}; nothing was imported"
                ) from exc

    def _check_keys(self, engine: Engine, stored: Collection[str]) -> None:
        """Refuse a store key that would name two current facts of its user."""
        keyed: dict[tuple[str, str], str] = {}
        for fact_id, number in self.fact_lines.items():
            fact = self.facts[fact_id]
            if fact.key is None or not fact.current or fact_id in stored:
                continue
            owned = (fact.user_id, fact.key)
            if owned in keyed:
                raise ImportFileError(
                    number,
                    f"key {fact.key[:80]!r} of user {fact.user_id!r} names another current "
                    f"fact too (line {self.fact_lines[keyed[owned]]}): a key names one current "
                    "fact; nothing was imported",
                )
            keyed[owned] = fact_id
        taken = keys_in_use(engine, keyed)
        if taken:
            first = min(taken, key=lambda owned: self.fact_lines[keyed[owned]])
            raise ImportFileError(
                self.fact_lines[keyed[first]],
                f"key {first[1][:80]!r} of user {first[0]!r} names a current fact stored "
                f"already ({taken[first]}): dismiss it (DELETE /v1/facts/{taken[first]}) or "
                "leave the key out of the file; nothing was imported",
            )


__all__ = ["ImportFileError", "ImportPlan"]
