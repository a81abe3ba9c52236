"""Upstream's deprecations, made visible where memory_chain implements what they deprecate.

langchain-core deprecated ``BaseChatMessageHistory`` (since 1.6.4, removal in 2.0) and
``RunnableWithMessageHistory`` (since 1.3.3) in favour of LangGraph's persistence. Its
decorator warns on the base class only, so memory_chain's three histories, which stay (the
design asks for them, and they work on every langchain-core 1.x), warn themselves when built:
a user sees upstream's warning and the door to take instead.
"""

from __future__ import annotations

import warnings

from langchain_core._api import LangChainDeprecationWarning

#: Where a LangChain 1.x agent gets memory instead of a chat history.
ALTERNATIVE = (
    "memory_chain.integrations.middleware.MemoryMiddleware with a LangGraph checkpointer "
    "(and memory_chain.integrations.store.MemoryStore for long-term memory)"
)


def warn_history_deprecated(name: str, *, stacklevel: int = 3) -> None:
    """Warn that a chat history class was built, and say what to use instead.

    Args:
        name: The class (``"SQLChatMessageHistory"``).
        stacklevel: The frame the warning names (the default: the caller of ``__init__``).
    """
    warnings.warn(
        LangChainDeprecationWarning(
            f"{name} is a BaseChatMessageHistory, which langchain-core deprecated in 1.6.4 and "
            "will remove in 2.0; memory_chain keeps it working on langchain-core 1.x. For "
            f"LangChain agents use {ALTERNATIVE}."
        ),
        stacklevel=stacklevel,
    )
