"""Where the chat core gets its model: a name resolved to a chat model, a window and a counter.

The server resolves names against the LLM server (:class:`~memory_chain.catalog.OllamaCatalog`:
its models, their context windows, the embedded model's own tokenizer); notebooks and tests
can hand the core one chat model with :class:`OneModel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel

from memory_chain.chat.request import ReplyOptions
from memory_chain.errors import ModelNotFoundError
from memory_chain.tokens import EstimatingCounter, TokenCount

#: The window assumed for a model that declares none (Ollama's default context).
DEFAULT_WINDOW = 4096


@dataclass(frozen=True)
class ModelInfo:
    """A model the core can answer with.

    Attributes:
        name: Its name (as the LLM server calls it).
        window: Tokens it reads in all, prompt and reply (its context window).
        counter: Counts tokens as its tokenizer does, or higher.
        window_source: Where ``window`` comes from (``"setting"``, ``"modelfile"``,
            ``"model"``, ``"default"``), for ``/v1/models`` and the context preview.
    """

    name: str
    window: int
    counter: TokenCount
    window_source: str = "default"


class ModelSource(Protocol):
    """Resolves model names and makes the calls' arguments (the core's one door to models)."""

    def resolve(self, name: str | None) -> ModelInfo:
        """The model named (``None``: the configured chat model).

        Raises:
            ModelNotFoundError: The LLM server has no model of that name.
            LLMUnavailableError: The LLM server cannot be asked.
        """
        ...

    def chat_model(self, info: ModelInfo) -> BaseChatModel:
        """The chat model to call for ``info``."""
        ...

    def call_options(self, info: ModelInfo, options: ReplyOptions, reserve: int) -> dict[str, Any]:
        """Keyword arguments of the model call: the window, the reply's length, sampling."""
        ...


class OneModel:
    """A :class:`ModelSource` with one chat model (any LangChain chat model).

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage
        >>> source = OneModel(GenericFakeChatModel(messages=iter([AIMessage("hi")])))
        >>> source.resolve(None).window
        4096

    Args:
        llm: The chat model.
        name: Its name; requests naming another model get :class:`ModelNotFoundError`.
        window: Its context window.
        counter: Counts its tokens (default: an estimate that counts high).
        sampling: Map the request's options to the model's call arguments (default: only
            ``stop`` is passed, which every chat model takes).
    """

    def __init__(
        self,
        llm: BaseChatModel,
        *,
        name: str = "default",
        window: int = DEFAULT_WINDOW,
        counter: TokenCount | None = None,
        sampling: Mapping[str, str] | None = None,
    ) -> None:
        self.llm = llm
        self.info = ModelInfo(name, window, counter or EstimatingCounter(), "setting")
        self.sampling = dict(sampling or {})

    def resolve(self, name: str | None) -> ModelInfo:
        """This model, if ``name`` is ``None`` or its name."""
        if name is not None and name != self.info.name:
            raise ModelNotFoundError(name, [self.info.name])
        return self.info

    def chat_model(self, info: ModelInfo) -> BaseChatModel:
        """The one chat model."""
        return self.llm

    def call_options(self, info: ModelInfo, options: ReplyOptions, reserve: int) -> dict[str, Any]:
        """``stop``, and the options named in ``sampling`` under the model's names."""
        kwargs: dict[str, Any] = {"stop": list(options.stop)} if options.stop else {}
        values = {
            "temperature": options.temperature,
            "top_p": options.top_p,
            "max_tokens": reserve,
            "seed": options.seed,
        }
        for ours, theirs in self.sampling.items():
            if values.get(ours) is not None:
                kwargs[theirs] = values[ours]
        return kwargs
