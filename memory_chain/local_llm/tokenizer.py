"""The embedded model's own tokenizer, for budgets counted exactly.

A vocabulary-only llama.cpp load of the GGUF (no weights, well under a second) gives the
tokenizer the model itself uses, so a prompt built for the embedded model is counted as the
model will count it. Importing this module does not import ``llama_cpp``.

A count asks llama.cpp for the number of tokens only (no token buffer is filled: ~35 µs for
a line of text) and is cached by text: the recent turns and the recalled items of one
conversation recur from one turn to the next, and a budget counts each of them (see
``benchmarks/bench_chat.py``, step "the budgeted prompt").

Example:
    >>> counter = embedded_model_counter()  # doctest: +SKIP
    >>> counter.count("Hello there")  # doctest: +SKIP
    2
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_chain.local_llm.model import DEFAULT_MODEL, EmbeddedModel, default_models_dir

if TYPE_CHECKING:
    from llama_cpp import Llama

logger = logging.getLogger(__name__)


class GGUFTokenCounter:
    """Counts tokens with a GGUF model's tokenizer (llama.cpp, vocabulary only).

    Args:
        model_path: The GGUF file.
        cache_size: Texts whose counts are kept (least recently used go first).
    """

    def __init__(self, model_path: Path, *, cache_size: int = 8192) -> None:
        self.model_path = model_path
        self._llama: Llama | None = None
        self._vocab_pointer: Any = None
        self._lock = threading.Lock()
        self._cached_count = functools.lru_cache(maxsize=cache_size)(self._count)

    def _vocab(self) -> Llama:
        with self._lock:
            if self._llama is None:
                import llama_cpp

                self._llama = llama_cpp.Llama(
                    model_path=str(self.model_path), vocab_only=True, verbose=False
                )
                self._vocab_pointer = llama_cpp.llama_model_get_vocab(self._llama.model)
                # Freed before the interpreter tears llama.cpp's bindings down.
                atexit.register(self.close)
            return self._llama

    def close(self) -> None:
        """Free the vocabulary (it is loaded again on the next count)."""
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None
                self._vocab_pointer = None
        self.clear_cache()

    def clear_cache(self) -> None:
        """Forget the cached counts (the benchmark's cold case)."""
        self._cached_count.cache_clear()

    def _count(self, text: str) -> int:
        import llama_cpp

        self._vocab()
        data = text.encode("utf-8")
        # With no room for tokens, llama.cpp answers minus the number it needs.
        needed = int(
            llama_cpp.llama_tokenize(self._vocab_pointer, data, len(data), None, 0, False, False)
        )
        return -needed if needed < 0 else needed

    def count(self, text: str) -> int:
        """Tokens of ``text`` (special-token text counted as plain text, as a message is)."""
        if not text:
            return 0
        return self._cached_count(text)

    def count_many(self, texts: list[str]) -> list[int]:
        """Tokens of each text."""
        return [self.count(text) for text in texts]

    def render_and_count(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Tokens of a chat rendered with the model's template, as the model reads it.

        For checks of a budget against the real prompt (tests, the budget benchmark).

        Args:
            messages: Chat messages (``role``, ``content``; an assistant's ``tool_calls``).
            tools: Tools in the OpenAI format, written into the prompt as the template does.
        """
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llama = self._vocab()
        template = llama.metadata["tokenizer.chat_template"]
        formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=llama.detokenize([llama.token_eos()], special=True).decode(errors="ignore"),
            bos_token=llama.detokenize([llama.token_bos()], special=True).decode(errors="ignore"),
        )
        prompt = formatter(messages=messages, tools=tools).prompt  # type: ignore[arg-type]
        return len(llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))


def embedded_model_counter(
    models_dir: Path | None = None, model: EmbeddedModel = DEFAULT_MODEL
) -> GGUFTokenCounter | None:
    """An embedded model's counter, if llama.cpp is installed and the model assembled.

    Looks for the assembled file only (assembling it is the server's job); ``None`` when it
    or llama.cpp is missing. One counter per file, shared.

    Args:
        models_dir: Where the models are assembled (default: the user's cache).
        model: The model (default the 0.5B; a user's GGUF is counted from its path).
    """
    path = model.file_in(models_dir or default_models_dir())
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    if not path.is_file() or (model.size is not None and path.stat().st_size != model.size):
        return None
    return _counter_of(path)


@functools.cache
def _counter_of(path: Path) -> GGUFTokenCounter:
    return GGUFTokenCounter(path)
