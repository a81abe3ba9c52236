"""Storing imported conversations: as history, idempotent, resumable, dry-runnable.

Each conversation is stored through :meth:`MemoryManager.add_turns
<memory_chain.manager.MemoryManager.add_turns>` with ``as_history=True``: old sentences are
history, not requests to act now, so "remember ..." or "forget ..." in an imported message
files or dismisses nothing; the facts come from the consolidation of the imported ranges
(a server consolidates them in the background: imported conversations are idle, so its
idle scan finds them; ``memory-chain consolidate --all`` does it at once). Turns keep their
own times, so summaries and facts are dated by the time things were said.

Importing again adds nothing: a conversation's id comes from the export's own id, and the
turns memory already holds for it (stored by an earlier import, or through the proxy while
chatting in Open WebUI) are compared with the export's, whitespace aside; only the turns
after them are added (a chat continued since the last export gets its new turns). A
conversation whose stored turns differ from the export's (edited since) is left as it is
and reported. Each conversation is one transaction: a failure (a message too long, the
database gone) is reported with the conversation and the import goes on with the next;
running the same import again resumes, since what was stored is skipped.

The title is kept as a store item of the user (namespace ``("imports",)``, key: the
conversation id), with the format and the source's id: agents find it through the
LangGraph store, ``memory-chain export`` carries it, and the conversation endpoints show it
(:func:`imported_titles`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memory_chain.errors import InvalidInputError, MemoryChainError
from memory_chain.imports.model import HistoryConversation
from memory_chain.schemas import NewTurn, TokenUsage, Turn, validate_id
from memory_chain.tiers.sql import SQLStore
from memory_chain.tiers.sql.store_items import StoreItems
from memory_chain.tokens import TokenCounter

logger = logging.getLogger(__name__)

#: The store namespace (below each user) holding imported conversations' titles.
IMPORTS_NAMESPACE = ("imports",)

#: ``(conversations done, conversations in all)``.
ImportProgress = Callable[[int, int], None]


class HistorySink(Protocol):
    """What the import stores through (:class:`~memory_chain.manager.MemoryManager`)."""

    store: SQLStore
    counter: TokenCounter

    def add_turns(
        self,
        conversation_id: str,
        user_id: str,
        turns: Sequence[NewTurn],
        *,
        index_now: bool = True,
        as_history: bool = False,
    ) -> list[Turn]:
        """Store turns."""
        ...

    def turns(
        self, conversation_id: str, user_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Turn]:
        """Stored turns."""
        ...


@dataclass
class ImportFailure:
    """A conversation that could not be stored (the rest of the import went on)."""

    conversation_id: str
    title: str | None
    error: str


@dataclass
class HistoryReport:
    """What an import stored (or, on a dry run, would store).

    Attributes:
        format: The export's format.
        dry_run: Nothing was stored; the counts say what would be.
        conversations: Conversations that got new turns.
        turns: Turns stored.
        unchanged: Conversations memory already held in full.
        skipped_empty: Empty messages left out.
        skipped_other: Messages left out that are no user or assistant text (system
            prompts, tool calls and results, hidden messages, images or files alone).
        diverged: Conversations whose stored turns differ from the export's (left as
            they are).
        failed: Conversations that could not be stored.
        users: Whose conversations got turns.
        conversation_ids: The conversations that got turns (to consolidate, to follow).
    """

    format: str
    dry_run: bool = False
    conversations: int = 0
    turns: int = 0
    unchanged: int = 0
    skipped_empty: int = 0
    skipped_other: int = 0
    diverged: list[str] = field(default_factory=list)
    failed: list[ImportFailure] = field(default_factory=list)
    users: set[str] = field(default_factory=set)
    conversation_ids: list[tuple[str, str]] = field(default_factory=list)

    def describe(self) -> str:
        """One paragraph for people: what was (or would be) stored and left out."""
        verb = "would import" if self.dry_run else "imported"
        lines = [
            f"{verb} {self.turns} turns in {self.conversations} conversations "
            f"({self.format}, {len(self.users)} users); {self.unchanged} conversations "
            f"already stored; left out {self.skipped_empty} empty messages and "
            f"{self.skipped_other} others (system, tool, hidden, non-text)"
        ]
        for cid in self.diverged:
            lines.append(f"left as stored: {cid} (its stored turns differ from the export's)")
        for failure in self.failed:
            named = (
                f"{failure.conversation_id} ({failure.title})"
                if failure.title
                else (failure.conversation_id)
            )
            lines.append(f"failed: {named}: {failure.error}")
        if self.failed:
            lines.append("run the same import again to resume: what is stored is skipped")
        return "\n".join(lines)


def owner_rule(
    *, user: str | None, namespace: str | None, default_user: str
) -> Callable[[HistoryConversation], str]:
    """Whose a conversation is: ``user`` if given, else as the proxy names its owner.

    An Open WebUI chat names its account: the proxy stores that account's memory as
    ``<namespace>:<account id>`` behind a ``proxy_api_keys`` key, or as the account id
    on a server without keys (``namespace`` ``None``). Other exports name nobody: they
    are ``default_user``'s.

    Raises:
        InvalidInputError: If the user id (or the namespaced one) is malformed.
    """
    if user is not None:
        validate_id(user, "user id")
    if namespace is not None and (":" in namespace or not namespace):
        raise InvalidInputError(f"namespace {namespace!r} must be a proxy_api_keys namespace")

    def owner(conversation: HistoryConversation) -> str:
        if user is not None:
            return user
        if conversation.owner is None:
            return default_user
        name = f"{namespace}:{conversation.owner}" if namespace else conversation.owner
        return validate_id(name, "user id (Open WebUI's account, as the proxy names it)")

    return owner


def proxy_namespace(namespaces: Collection[str], chosen: str | None) -> str | None:
    """The namespace Open WebUI's accounts are stored under.

    Args:
        namespaces: The ``proxy_api_keys`` namespaces of the settings.
        chosen: The one asked for (``""``: none, the accounts' ids as they are).

    Raises:
        InvalidInputError: If several namespaces are configured and none is chosen.
    """
    if chosen is not None:
        return chosen or None
    distinct = sorted(set(namespaces))
    if len(distinct) > 1:
        raise InvalidInputError(
            f"several proxy namespaces are configured ({', '.join(distinct)}): say which "
            "Open WebUI serves (--open-webui-namespace), or give --user"
        )
    return distinct[0] if distinct else None


def _key(role: str, text: str) -> tuple[str, str]:
    return role, " ".join(text.split())


def store_history(
    sink: HistorySink,
    conversations: Iterable[HistoryConversation],
    *,
    format: str,
    owner: Callable[[HistoryConversation], str],
    dry_run: bool = False,
    progress: ImportProgress | None = None,
) -> HistoryReport:
    """Store conversations read from an export (see the module docstring).

    Args:
        sink: The memory manager.
        conversations: What a reader produced.
        format: The export's format (for the report and the title items).
        owner: Whose each conversation is (:func:`owner_rule`).
        dry_run: Store nothing; report what would be stored.
        progress: Told ``(done, total)`` after each conversation.

    Returns:
        The report; failures are in it, not raised.
    """
    todo = list(conversations)
    report = HistoryReport(format=format, dry_run=dry_run)
    titles = StoreItems(sink.store.database)
    for done, conversation in enumerate(todo, start=1):
        report.skipped_empty += conversation.skipped_empty
        report.skipped_other += conversation.skipped_other
        try:
            _store_one(sink, titles, conversation, owner, report, dry_run)
        except MemoryChainError as exc:
            logger.warning("import of %s failed: %s", conversation.conversation_id, exc)
            report.failed.append(
                ImportFailure(conversation.conversation_id, conversation.title, str(exc))
            )
        if progress is not None:
            progress(done, len(todo))
    return report


def _store_one(  # noqa: PLR0917 - one conversation's step of store_history
    sink: HistorySink,
    titles: StoreItems,
    conversation: HistoryConversation,
    owner: Callable[[HistoryConversation], str],
    report: HistoryReport,
    dry_run: bool,
) -> None:
    user = owner(conversation)
    cid = validate_id(conversation.conversation_id)
    stored = sink.turns(cid, user)
    source = conversation.turns
    common = min(len(stored), len(source))
    if [_key(t.role, t.content) for t in stored[:common]] != [
        _key(t.role, t.content) for t in source[:common]
    ]:
        report.diverged.append(cid)
        return
    new = source[len(stored) :]
    if not new:
        report.unchanged += 1
        return
    if not dry_run:
        counts = sink.counter.count_many([turn.content for turn in new])
        sink.add_turns(
            cid,
            user,
            [
                NewTurn(turn.role, turn.content, timestamp=turn.timestamp, tokens=TokenUsage(n))
                for turn, n in zip(new, counts, strict=True)
            ],
            index_now=False,
            as_history=True,
        )
        if conversation.title:
            titles.put(
                user,
                IMPORTS_NAMESPACE,
                cid,
                {
                    "title": conversation.title,
                    "format": conversation.source,
                    "source_id": conversation.source_id,
                },
                search_text=conversation.title,
            )
    report.conversations += 1
    report.turns += len(new)
    report.users.add(user)
    report.conversation_ids.append((cid, user))


def imported_titles(
    store: SQLStore, user_id: str, conversation_ids: Sequence[str]
) -> dict[str, str]:
    """The titles imported conversations had where they came from, by conversation id.

    One read of the user's ``("imports",)`` store items; conversations not imported (or
    imported without a title) are left out.
    """
    found = StoreItems(store.database).values(user_id, IMPORTS_NAMESPACE, conversation_ids)
    return {
        key: value["title"]
        for key, value in found.items()
        if isinstance(value, dict) and isinstance(value.get("title"), str)
    }


__all__ = [
    "IMPORTS_NAMESPACE",
    "HistoryReport",
    "HistorySink",
    "ImportFailure",
    "ImportProgress",
    "imported_titles",
    "owner_rule",
    "proxy_namespace",
    "store_history",
]
