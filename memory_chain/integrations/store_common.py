"""What every namespace of ``MemoryStore`` shares: found items, filters, ranking, the query.

Each kind of namespace (:mod:`.store_facts`, :mod:`.store_conversations`,
:mod:`.store_agent`) answers a search with its candidates (:class:`Hit`), scored when there
is a query; :func:`select_hits` then applies the filter, orders them and pages, the same way
for all of them.

Filters follow LangGraph's stores (``InMemoryStore``, ``PostgresStore``): ``{"field": value}``
matches equal values (objects and lists compared whole, nested objects field by field), and
``{"field": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}}`` compares. A dotted name
(``"user.city"``) reaches into nested objects when the value has no field of that very name.
Order comparisons hold between two numbers or two strings (ISO dates compare as strings);
any other pair does not match, where ``InMemoryStore`` would raise.
"""

from __future__ import annotations

import logging
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import Item, SearchItem
from langgraph.store.base.embed import get_text_at_path

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.tiers.sql.store_items import joined_text, value_text

logger = logging.getLogger(__name__)

_ORDER: dict[str, Callable[[Any, Any], Any]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
_OPERATORS = ("$eq", "$ne", *_ORDER)
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Hit:
    """An item a namespace holds, with its score for the query (``None``: not scored)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None

    def item(self) -> Item:
        """As LangGraph's ``Item`` (what ``get`` returns)."""
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )

    def search_item(self) -> SearchItem:
        """As LangGraph's ``SearchItem`` (what ``search`` returns)."""
        return SearchItem(
            namespace=self.namespace,
            key=self.key,
            value=self.value,
            created_at=self.created_at,
            updated_at=self.updated_at,
            score=self.score,
        )


class Query:
    """A search's query, embedded once, when first asked for, if there is a model.

    Args:
        text: The query.
        embeddings: The embedding model (``None``: none; queries match words).
    """

    def __init__(self, text: str, embeddings: Embeddings | None) -> None:
        self.text = text
        self.embeddings = embeddings
        self._vector: np.ndarray | None = None
        self._tried = False

    def vector(self) -> np.ndarray | None:
        """The query's normalized vector, or ``None`` without a model (or if it fails)."""
        if not self._tried and self.embeddings is not None:
            self._tried = True
            try:
                self._vector = normalized(self.embeddings.embed_query(self.text))
            except MemoryChainError as exc:
                logger.warning("store search not embedded (words are matched): %s", exc)
        return self._vector

    def words_score(self, text: str | None) -> float | None:
        """The share of the query's words that ``text`` holds (``None``: no text)."""
        if text is None:
            return None
        wanted = set(_WORDS.findall(self.text.casefold()))
        if not wanted:
            return 0.0
        return len(wanted & set(_WORDS.findall(text.casefold()))) / len(wanted)


class Namespace(Protocol):
    """One kind of namespace below a user; ``path`` is what follows its label."""

    def get(self, user_id: str, path: tuple[str, ...], key: str) -> Hit | None:
        """The item, or ``None``."""
        ...

    def put(
        self,
        user_id: str,
        path: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Any,
    ) -> None:
        """Store an item (``index`` as LangGraph's ``PutOp.index``)."""
        ...

    def delete(self, user_id: str, path: tuple[str, ...], key: str) -> None:
        """Delete an item (nothing to delete is no error)."""
        ...

    def search(
        self, user_id: str, path: tuple[str, ...], query: Query | None, want: int | None
    ) -> list[Hit]:
        """The candidates under ``path``, in order (scored when there is a query).

        ``want``: how many the caller keeps at most (``None``: a filter follows, give all).
        """
        ...


def normalized(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """``vector`` as float32 of length 1 (unchanged if it is zero)."""
    array = np.asarray(vector, dtype="<f4")
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def search_text(value: Mapping[str, Any], index: Any) -> str | None:
    """The text of a value a query is matched against, as ``PutOp.index`` asks.

    Args:
        value: The item's value.
        index: ``False``: none (the item is not searched by query); ``None``: every string
            in the value; a list of paths (``"text"``, ``"notes[*].body"``): the texts there.
    """
    if index is False:
        return None
    if index is None:
        return value_text(value)
    if isinstance(index, list) and all(isinstance(path, str) for path in index):
        return joined_text(text for path in index for text in get_text_at_path(value, path))
    raise InvalidInputError(f"index must be False, None or a list of field paths, got {index!r}")


def select_hits(
    hits: Sequence[Hit], filter_: Mapping[str, Any] | None, *, limit: int, offset: int
) -> list[SearchItem]:
    """Filter, order (scored hits first, best first; the rest as given) and page."""
    kept = [hit for hit in hits if matches(hit.value, filter_)]
    kept.sort(key=lambda hit: (hit.score is None, -(hit.score or 0.0)))
    return [hit.search_item() for hit in kept[offset : offset + limit]]


def check_filter(filter_: object) -> None:
    """Check a filter before any item is read.

    Raises:
        InvalidInputError: If it is not an object, or names an unknown operator.
    """
    if filter_ is None:
        return
    if not isinstance(filter_, Mapping):
        raise InvalidInputError(f"a filter is an object of field names, got {filter_!r}")
    for wanted in filter_.values():
        if isinstance(wanted, Mapping):
            unknown = [
                name
                for name in wanted
                if isinstance(name, str) and name.startswith("$") and name not in _OPERATORS
            ]
            if unknown:
                raise InvalidInputError(
                    f"unknown filter operator {unknown[0]!r}: use one of {', '.join(_OPERATORS)}"
                )
            check_filter({name: inner for name, inner in wanted.items() if name not in _OPERATORS})


def matches(value: Mapping[str, Any], filter_: Mapping[str, Any] | None) -> bool:
    """Whether a value passes a filter (see the module docstring).

    Raises:
        InvalidInputError: On an unknown operator, or a filter that is not an object.
    """
    if filter_ is None:
        return True
    if not isinstance(filter_, Mapping):
        raise InvalidInputError(f"a filter is an object of field names, got {filter_!r}")
    return all(_compare(_field(value, name), wanted) for name, wanted in filter_.items())


def _field(value: Any, name: str) -> Any:
    if not isinstance(value, Mapping):
        return None
    if name in value or "." not in name:
        return value.get(name)
    head, _, rest = name.partition(".")
    return _field(value.get(head), rest)


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        operators = [name for name in wanted if isinstance(name, str) and name.startswith("$")]
        if operators:
            return all(_apply(actual, name, operand) for name, operand in wanted.items())
        if not isinstance(actual, Mapping):
            return False
        return all(_compare(actual.get(name), inner) for name, inner in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _apply(actual: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return bool(actual == operand)
    if name == "$ne":
        return bool(actual != operand)
    compare = _ORDER.get(name)
    if compare is None:
        raise InvalidInputError(
            f"unknown filter operator {name!r}: use one of {', '.join(_OPERATORS)}"
        )
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (actual, operand))
    strings = isinstance(actual, str) and isinstance(operand, str)
    return (numbers or strings) and bool(compare(actual, operand))
