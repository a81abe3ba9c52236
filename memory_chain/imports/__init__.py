"""Importing people's chat history: Open WebUI, ChatGPT, and a plain JSON Lines / CSV.

:func:`import_history` reads an export (the format told by its content, :mod:`.detect`;
one module per format: :mod:`.openwebui`, :mod:`.chatgpt`, :mod:`.plain`) and stores its
conversations as history (:mod:`.loader`): dated, idempotent, with no "remember ..." in an
old message acted on; facts come from consolidating the imported ranges.
:func:`history_progress` says what is still to embed and to consolidate.
``memory-chain import`` and :meth:`MemoryManager.import_history
<memory_chain.manager.MemoryManager.import_history>` both call :func:`import_history`.

Example:
    >>> report = import_history(manager, Path("conversations.json"), user="ana")  # doctest: +SKIP
    >>> print(report.describe())  # doctest: +SKIP
    imported 412 turns in 18 conversations (chatgpt, 1 users); ...
"""

from __future__ import annotations

from pathlib import Path

from memory_chain.config import DEFAULT_USER_ID
from memory_chain.imports.detect import detect_format, read_history
from memory_chain.imports.loader import (
    IMPORTS_NAMESPACE,
    HistoryReport,
    HistorySink,
    ImportFailure,
    ImportProgress,
    owner_rule,
    proxy_namespace,
    store_history,
)
from memory_chain.imports.model import (
    FORMATS,
    HistoryConversation,
    HistoryFormat,
    HistoryTurn,
)
from memory_chain.imports.progress import HistoryProgress, history_progress


def import_history(
    sink: HistorySink,
    path: Path,
    *,
    format: HistoryFormat | None = None,
    user: str | None = None,
    namespace: str | None = None,
    default_user: str = DEFAULT_USER_ID,
    dry_run: bool = False,
    progress: ImportProgress | None = None,
) -> HistoryReport:
    """Import a chat export file as dated history (see the package docstring).

    Args:
        sink: The memory manager.
        path: Open WebUI's export, ChatGPT's ``conversations.json``, or a plain JSON Lines /
            CSV file (memory-chain's own export goes through
            :func:`memory_chain.transfer.import_jsonl`).
        format: The file's format; ``None`` tells it by its content.
        user: Whose every conversation is; ``None``: an Open WebUI chat's account, as the
            proxy names it (:func:`owner_rule`), other exports ``default_user``'s.
        namespace: The proxy namespace of Open WebUI's accounts (``None``: their ids).
        default_user: The user of exports that name none.
        dry_run: Store nothing; the report says what would be stored.
        progress: Told ``(conversations done, total)``.

    Returns:
        What was stored, left out, unchanged, and what failed (and why).

    Raises:
        InvalidInputError: If the file is not in the format (nothing is stored), or a user
            id is malformed.
    """
    found, conversations = read_history(path, format=format)
    return store_history(
        sink,
        conversations,
        format=found,
        owner=owner_rule(user=user, namespace=namespace, default_user=default_user),
        dry_run=dry_run,
        progress=progress,
    )


__all__ = [
    "FORMATS",
    "IMPORTS_NAMESPACE",
    "HistoryConversation",
    "HistoryFormat",
    "HistoryProgress",
    "HistoryReport",
    "HistorySink",
    "HistoryTurn",
    "ImportFailure",
    "ImportProgress",
    "detect_format",
    "history_progress",
    "import_history",
    "owner_rule",
    "proxy_namespace",
    "read_history",
    "store_history",
]
