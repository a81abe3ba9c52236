"""Marks for the tests of the doors langchain-core deprecated and memory_chain keeps.

The test run turns every ``LangChainDeprecationWarning`` into an error (pyproject.toml), so
that no code path of memory_chain's own raises one unnoticed; the modules that test the chat
histories, which warn on purpose (:mod:`memory_chain.deprecation`), say so with this mark.
"""

from __future__ import annotations

import pytest

#: For a module that builds the chat histories (or ``RunnableWithMessageHistory``) on purpose.
USES_DEPRECATED_HISTORIES = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)
