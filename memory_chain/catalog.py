"""The models of the LLM server: their names, context windows and token counters.

memory_chain talks to Ollama's API (a real Ollama, or the embedded model's server that speaks
it). The catalog asks it which models it has (``GET /api/tags``, cached for a short while)
and each model's context window (``POST /api/show``, cached for the process): a
``num_ctx`` set in the model's Modelfile, else the context length the model was trained
with, at most ``max_window`` (a larger window costs the Ollama host memory for its cache).
A window set for a model in the settings wins over both. The window is sent with every
call (``num_ctx``), so Ollama does not cut the prompt at its own default.

Tokens are counted with the model's own tokenizer where memory_chain has it (the embedded
model's GGUF, read by llama.cpp), else with an estimate that counts high
(:func:`~memory_chain.tokens.upper_bound_tokens`).

Example:
    >>> catalog = OllamaCatalog("http://localhost:11434", default_model="llama3.2")
    >>> catalog.resolve(None).window  # doctest: +SKIP
    8192
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from memory_chain.chat.models import DEFAULT_WINDOW, ModelInfo
from memory_chain.errors import LLMUnavailableError, ModelNotFoundError
from memory_chain.tokens import EstimatingCounter, TokenCount

logger = logging.getLogger(__name__)

#: How long the list of models is trusted (a model pulled meanwhile shows up after this).
TAGS_TTL_SECONDS = 30.0
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def same_model(a: str, b: str) -> bool:
    """Whether two Ollama names are the same model (``:latest`` is the default tag)."""
    return a.removesuffix(":latest") == b.removesuffix(":latest")


@dataclass(frozen=True)
class ListedModel:
    """A model as ``GET /api/tags`` lists it."""

    name: str
    modified_at: str | None = None
    size: int | None = None


def window_of(show: Mapping[str, Any], max_window: int) -> tuple[int, str] | None:
    """A model's window from ``/api/show``, and where it comes from.

    The Modelfile's ``num_ctx``, else the context length it was trained with (at most
    ``max_window``); ``None`` when it declares neither.
    """
    parameters = show.get("parameters")
    if isinstance(parameters, str):
        found = _NUM_CTX.search(parameters)
        if found:
            return int(found[1]), "modelfile"
    info = show.get("model_info") or show.get("modelinfo") or {}
    if isinstance(info, Mapping):
        for key, value in info.items():
            if str(key).endswith(".context_length") and isinstance(value, int) and value > 0:
                return min(value, max_window), "model"
    return None


class OllamaCatalog:
    """The models an Ollama API offers (see the module docstring).

    Args:
        base_url: The Ollama API.
        default_model: The model that answers when a request names none.
        windows: Context windows set by hand, by model name (win over what Ollama says).
        max_window: Largest window used for a model whose Modelfile sets none.
        default_window: Window of a model that declares nothing.
        timeout: Seconds to wait for Ollama's answers about models.
        local_counters: Token counters by model name (the embedded model's tokenizer).
        clock: Seconds, for the list's expiry.
    """

    def __init__(
        self,
        base_url: str,
        *,
        default_model: str,
        windows: Mapping[str, int] | None = None,
        max_window: int = 8192,
        default_window: int = DEFAULT_WINDOW,
        timeout: float = 5.0,
        local_counters: Mapping[str, Callable[[], TokenCount | None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.default_model = default_model
        self.windows = dict(windows or {})
        self.max_window = max_window
        self.default_window = default_window
        self.timeout = timeout
        self._local_counters = dict(local_counters or {})
        self._clock = clock
        self._lock = threading.Lock()
        self._listed: tuple[float, list[ListedModel]] | None = None
        self._infos: dict[str, ModelInfo] = {}
        self._estimate = EstimatingCounter()

    def models(self) -> list[ListedModel]:
        """The models the server has (``GET /api/tags``, cached for :data:`TAGS_TTL_SECONDS`).

        Raises:
            LLMUnavailableError: The server does not answer.
        """
        with self._lock:
            listed = self._listed
        if listed is not None and self._clock() - listed[0] < TAGS_TTL_SECONDS:
            return listed[1]
        body = self._get_json("GET", "/api/tags", None)
        raw = body.get("models") if isinstance(body, dict) else None
        models = [
            ListedModel(
                str(entry.get("name") or entry.get("model")),
                entry.get("modified_at"),
                entry.get("size"),
            )
            for entry in (raw or [])
            if isinstance(entry, dict) and (entry.get("name") or entry.get("model"))
        ]
        with self._lock:
            self._listed = (self._clock(), models)
        return models

    def find(self, name: str) -> ListedModel | None:
        """The listed model of this name, if the server has it."""
        return next((m for m in self.models() if same_model(m.name, name)), None)

    def resolve(self, name: str | None) -> ModelInfo:
        """The model named, with its window and counter (``None``: the default model).

        The default model is not looked up in the list: if it is missing, the call fails
        with Ollama's own answer, which says to pull it.

        Raises:
            ModelNotFoundError: The server has no model of that name.
            LLMUnavailableError: The server does not answer.
        """
        wanted = name or self.default_model
        with self._lock:
            cached = self._infos.get(wanted)
        if cached is not None:
            return cached
        asked_another = name is not None and not same_model(name, self.default_model)
        if asked_another and self.find(wanted) is None:
            raise ModelNotFoundError(wanted, [m.name for m in self.models()])
        window, source = self._window(wanted)
        info = ModelInfo(wanted, window, self._counter(wanted), source)
        with self._lock:
            self._infos[wanted] = info
        return info

    def _window(self, name: str) -> tuple[int, str]:
        for key, window in self.windows.items():
            if same_model(key, name):
                return window, "setting"
        try:
            show = self._get_json("POST", "/api/show", {"model": name})
        except (LLMUnavailableError, ModelNotFoundError) as exc:
            logger.info("no window of %s from /api/show (%s): %d", name, exc, self.default_window)
            return self.default_window, "default"
        found = window_of(show, self.max_window) if isinstance(show, dict) else None
        return found or (self.default_window, "default")

    def _counter(self, name: str) -> TokenCount:
        for key, load in self._local_counters.items():
            if same_model(key, name):
                counter = load()
                if counter is not None:
                    return counter
        return self._estimate

    def _get_json(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        url = f"{self.base_url}{path}"
        try:
            response = httpx.request(method, url, json=body, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise LLMUnavailableError(
                f"the LLM server at {self.base_url} cannot be reached ({type(exc).__name__}: "
                f"{exc}): check that Ollama runs there (MEMORY_CHAIN_OLLAMA_BASE_URL)"
            ) from exc
        if response.status_code == 404 and body is not None:
            raise ModelNotFoundError(str(body.get("model")))
        if response.status_code != 200:
            raise LLMUnavailableError(
                f"the LLM server at {self.base_url} answered {path} with "
                f"{response.status_code}: {response.text[:200]}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise LLMUnavailableError(f"the LLM server's {path} is not JSON") from exc
