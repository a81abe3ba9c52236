"""memory_chain as a LangGraph store: ``MemoryStore``, a ``BaseStore`` over the tiers.

``create_agent(model, tools=..., store=MemoryStore(services))`` gives the agent's tools
(``runtime.store``) and LangGraph's memory tools long-term memory that is memory_chain's:
the facts the chat puts in every prompt, the conversations its retrieval searches, and a
durable place for what the agent keeps itself. Every namespace starts with the user's id:

=========================================== ==============================================
``(user_id, "facts")``                      the user's facts (:mod:`.store_facts`): get,
                                            put (add or edit), delete (dismiss), search
``(user_id, "conversations")``              the user's conversations, read-only
                                            (:mod:`.store_conversations`); a query runs
``(user_id, "conversations", conv_id)``     memory_chain's retrieval; the turns, read-only
``(user_id, label, ...)``                   the agent's own items, in tier 2
                                            (:mod:`.store_agent`)
=========================================== ==============================================

``search((user_id,))`` searches the user's facts and own items together (both scored by the
same cosine); conversations are searched in their own namespaces, as the retrieval's fused
scores do not compare with cosines. ``list_namespaces`` lists the namespaces that hold
items, of every user or, given a prefix that starts with a user id, of that user.

The operations of a batch run one after another, in order (a ``get`` after a ``put`` of
the same batch sees it). ``abatch`` runs the batch in a worker thread: the stores are
synchronous (SQLAlchemy, the embedding model), as the middleware's async hooks run them.
Ids are checked as memory_chain checks them (:func:`~memory_chain.schemas.validate_id`:
1-128 letters, digits and ``._:@-``): the user id (as every in-process door checks its user,
:func:`~memory_chain.identity.user_named`; a list's prefix naming a user too), the
conversation id, every namespace label and every key but a fact's (any string of up to 512
characters: each user's own, see :mod:`.store_facts`). LangGraph's own
``put``/``get``/``search`` also refuse a label with a dot, so a user id with a dot is
reachable through ``batch`` only. A put's key, labels and every string of its value (object
keys too) must be text a database keeps: no NUL character, no unpaired surrogate
(:func:`~memory_chain.storable.check_value`). TTLs are not supported.

Example:
    >>> import uuid
    >>> store = MemoryStore(services)  # doctest: +SKIP
    >>> store.put(("ana", "facts"), uuid.uuid4().hex, {"text": "I am vegan", "kind": "preference"})
    ... # doctest: +SKIP
    >>> store.search(("ana", "conversations"), query="when do we fly?", limit=3)
    ... # doctest: +SKIP
    >>> agent = create_agent(model, tools=[remember, recall], store=store)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from langgraph.store.base import (
    BaseStore,
    GetOp,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memory_chain.errors import InvalidInputError
from memory_chain.identity import user_named
from memory_chain.integrations.store_agent import AgentNamespace
from memory_chain.integrations.store_common import (
    Namespace,
    Query,
    check_filter,
    select_hits,
)
from memory_chain.integrations.store_conversations import ConversationNamespace
from memory_chain.integrations.store_facts import FactNamespace
from memory_chain.schemas import validate_id
from memory_chain.services import Services
from memory_chain.storable import check_text, check_value
from memory_chain.tiers.sql.store_items import (
    CONVERSATIONS,
    FACTS,
    StoreItems,
    conversation_ids,
    users_with_facts,
)

_SHAPES = (
    "(user_id, 'facts'), (user_id, 'conversations'[, conversation_id]) or (user_id, label, ...)"
)


class MemoryStore(BaseStore):
    """A LangGraph ``BaseStore`` over memory_chain (see the module docstring).

    Creating one does no I/O.

    Args:
        services: The opened services (:func:`~memory_chain.services.open_services`).

    Example:
        >>> store = MemoryStore(services)  # doctest: +SKIP
        >>> store.put(("ana", "notes"), "diet", {"text": "vegan, no nuts"})  # doctest: +SKIP
        >>> store.get(("ana", "notes"), "diet").value  # doctest: +SKIP
        {'text': 'vegan, no nuts'}
    """

    def __init__(self, services: Services) -> None:
        self.embeddings = services.vectors.embeddings if services.vectors is not None else None
        self.database = services.store.database
        self.facts = FactNamespace(services.manager.fact_store, self.embeddings)
        self.conversations = ConversationNamespace(services.manager)
        self.items = StoreItems(self.database)
        self.own = AgentNamespace(self.items, self.embeddings)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result per operation.

        Raises:
            InvalidInputError: On a malformed namespace, key, value, filter or page, or a
                write to a read-only namespace (the operations before it are done).
        """
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            kind, user, path = self._route(op.namespace)
            hit = kind.get(user, path, op.key)
            return hit.item() if hit is not None else None
        if isinstance(op, PutOp):
            kind, user, path = self._route(op.namespace)
            check_text(op.key, "the key")
            check_value(op.value, "the value")
            if op.value is None:
                kind.delete(user, path, op.key)
            else:
                kind.put(user, path, op.key, op.value, op.index)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list(op)
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")

    def _route(self, namespace: Sequence[str]) -> tuple[Namespace, str, tuple[str, ...]]:
        labels = _labels(namespace)
        if len(labels) < 2:
            raise InvalidInputError(
                f"namespace {tuple(namespace)!r} names only a user: items live in {_SHAPES}"
            )
        user, label = labels[0], labels[1]
        if label == FACTS:
            return self.facts, user, labels[2:]
        if label == CONVERSATIONS:
            return self.conversations, user, labels[2:]
        return self.own, user, labels[1:]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        limit, offset = _page(op.limit, op.offset)
        check_filter(op.filter)
        labels = _labels(op.namespace_prefix)
        query = Query(op.query, self.embeddings) if op.query and op.query.strip() else None
        # Without a filter, the first offset + limit of each source are all a page needs.
        want = None if op.filter else offset + limit
        if len(labels) == 1:
            user = labels[0]
            hits = self.facts.search(user, (), query, want) + self.own.search(user, (), query, want)
            if query is None:
                hits.sort(key=lambda hit: hit.updated_at, reverse=True)
        else:
            kind, user, path = self._route(labels)
            hits = kind.search(user, path, query, want)
        return select_hits(hits, op.filter, limit=limit, offset=offset)

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit, offset = _page(op.limit, op.offset)
        conditions = tuple(op.match_conditions or ())
        for condition in conditions:
            if condition.match_type not in ("prefix", "suffix"):
                raise InvalidInputError(
                    f"unknown match type {condition.match_type!r}: use 'prefix' or 'suffix'"
                )
        # A prefix that names a user lists that user's namespaces only.
        user = next(
            (
                user_named(c.path[0], None)
                for c in conditions
                if c.match_type == "prefix" and c.path and c.path[0] != "*"
            ),
            None,
        )
        found = [ns for ns in self._namespaces(user) if all(_holds(c, ns) for c in conditions)]
        if op.max_depth is not None:
            if op.max_depth < 1:
                raise InvalidInputError(f"max_depth must be at least 1, got {op.max_depth!r}")
            found = [ns[: op.max_depth] for ns in found]
        return sorted(set(found))[offset : offset + limit]

    def _namespaces(self, user_id: str | None) -> set[tuple[str, ...]]:
        """Every namespace holding items (one user's, or every user's)."""
        spaces: set[tuple[str, ...]] = {
            (user, FACTS) for user in users_with_facts(self.database, user_id)
        }
        for user, conversation in conversation_ids(self.database, user_id):
            spaces.add((user, CONVERSATIONS))
            spaces.add((user, CONVERSATIONS, conversation))
        for user, namespace in self.items.namespaces(user_id):
            spaces.add((user, *namespace))
        return spaces


def _labels(namespace: Sequence[str]) -> tuple[str, ...]:
    """The namespace's labels, checked: the user's id first.

    Raises:
        InvalidInputError: If it is empty or a label is malformed.
    """
    if not isinstance(namespace, tuple | list) or not namespace:
        raise InvalidInputError(f"a namespace starts with the user's id: {_SHAPES}")
    user_named(namespace[0], None)  # the user, checked as at every door
    for label in namespace[1:]:
        check_text(label, "a namespace label")
    for label in namespace[1:]:
        validate_id(label, "namespace label")
    return tuple(namespace)


def _page(limit: object, offset: object) -> tuple[int, int]:
    return _count("limit", limit), _count("offset", offset)


def _count(name: str, number: object) -> int:
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise InvalidInputError(f"{name} must be an integer of at least 0, got {number!r}")
    return number


def _holds(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether a namespace matches a prefix or suffix (``"*"`` matches any label)."""
    path = tuple(condition.path)
    if not path:
        return True
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(want in ("*", label) for want, label in zip(path, part, strict=True))
