"""One GGUF chat model in process (llama.cpp), generating for one request at a time.

The Ollama-compatible server (:mod:`memory_chain.local_llm.ollama_api`) is a thin HTTP shell
around :class:`LlamaEngine`. Importing this module does not import ``llama_cpp``: that happens
in :meth:`LlamaEngine.load`, after ``OMP_WAIT_POLICY=PASSIVE`` is set: OpenMP threads that spin
while waiting made llama.cpp two to five times slower on a busy two-core machine.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memory_chain.errors import InvalidInputError
from memory_chain.local_llm.model import INSTALL_LLAMA_CPP_COMMAND, LocalModelNotInstalledError

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_grammar import LlamaGrammar
    from llama_cpp.llama_types import CreateCompletionStreamResponse

logger = logging.getLogger(__name__)

#: Context window in tokens: a 10-turn summary prompt is about 700.
DEFAULT_N_CTX = 4096
#: llama.cpp threads. On a 2-core machine a second thread sped up prompt processing (~1.35x,
#: the cores were partly busy) and did not speed up generation (~25 tokens/s either way).
DEFAULT_N_THREADS = 2

#: Ollama's defaults for the sampling options a request leaves out.
_OLLAMA_DEFAULTS: dict[str, float] = {
    "temperature": 0.8,
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.0,
    "repeat_penalty": 1.1,
}
_INT_OPTIONS = ("top_k", "num_predict", "seed")


@dataclass(frozen=True)
class GenerationOptions:
    """Sampling settings of one request, read from Ollama's ``options`` and ``format``.

    Attributes:
        temperature: 0 picks the most likely token each time (greedy, deterministic).
        top_k: Sample among the k most likely tokens.
        top_p: Nucleus sampling threshold.
        min_p: Drop tokens less likely than ``min_p`` times the most likely one.
        repeat_penalty: Penalty on recently generated tokens (1.0 turns it off).
        num_predict: Most tokens to generate; None (Ollama's -1, -2 or 0) runs until the
            model stops or the context is full.
        seed: Sampler seed; None picks a new one per request, as Ollama does.
        stop: Strings that end the answer (not included in it).
        json_schema: Constrain the answer to JSON (``{}``: any JSON object) or to this schema.
    """

    temperature: float = _OLLAMA_DEFAULTS["temperature"]
    top_k: int = int(_OLLAMA_DEFAULTS["top_k"])
    top_p: float = _OLLAMA_DEFAULTS["top_p"]
    min_p: float = _OLLAMA_DEFAULTS["min_p"]
    repeat_penalty: float = _OLLAMA_DEFAULTS["repeat_penalty"]
    num_predict: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    json_schema: Mapping[str, Any] | None = None

    @classmethod
    def from_ollama(
        cls, options: Mapping[str, Any] | None, response_format: Any = None
    ) -> GenerationOptions:
        """Read an Ollama request's ``options`` and ``format``; unknown options are ignored.

        Args:
            options: The request's ``options`` object (``num_ctx``, ``num_thread`` and other
                load-time options are ignored: they are fixed when the server starts).
            response_format: ``"json"``, a JSON schema object, or ``""``/None for free text.

        Returns:
            The options.

        Raises:
            InvalidInputError: An option has the wrong type or ``format`` is not understood.
        """
        options = options or {}
        if not isinstance(options, Mapping):
            raise InvalidInputError("options must be a JSON object")
        values: dict[str, Any] = {}
        for name in (*_OLLAMA_DEFAULTS, "num_predict", "seed"):
            value = options.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidInputError(f"options.{name} must be a number, got {value!r}")
            values[name] = int(value) if name in _INT_OPTIONS else float(value)
        if values.get("num_predict", 0) < 0:
            values["num_predict"] = None  # Ollama's -1 and -2: until the context is full
        stop = options.get("stop") or ()
        if isinstance(stop, str):
            stop = (stop,)
        if not isinstance(stop, Sequence) or not all(isinstance(s, str) and s for s in stop):
            raise InvalidInputError("options.stop must be a list of non-empty strings")
        schema: Mapping[str, Any] | None
        if response_format in (None, ""):
            schema = None
        elif response_format == "json":
            schema = {}
        elif isinstance(response_format, Mapping):
            schema = response_format
        else:
            raise InvalidInputError('format must be "json" or a JSON schema object')
        return cls(**values, stop=tuple(stop), json_schema=schema)


@dataclass
class GenerationStats:
    """Counts and timings of one generation, in Ollama's units (tokens, nanoseconds)."""

    prompt_eval_count: int = 0
    eval_count: int = 0
    done_reason: str = "stop"
    prompt_eval_duration: int = 0
    eval_duration: int = 0
    total_duration: int = 0


@dataclass(frozen=True)
class Piece:
    """A piece of generated text; the last piece has ``stats`` (and may have empty text)."""

    text: str
    stats: GenerationStats | None = field(default=None)


class LlamaEngine:
    """A chat GGUF model run by llama.cpp on the CPU, one generation at a time.

    Example:
        >>> engine = LlamaEngine(Path("models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
        >>> engine.load()  # doctest: +SKIP
        >>> prompt = engine.render_chat([{"role": "user", "content": "Hi"}])  # doctest: +SKIP
        >>> "".join(p.text for p in engine.generate(prompt, GenerationOptions()))  # doctest: +SKIP

    Args:
        model_path: The GGUF file.
        n_ctx: Context window in tokens (prompt and answer together).
        n_threads: CPU threads for generation and prompt processing.
        n_batch: Prompt tokens evaluated per batch.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int = DEFAULT_N_THREADS,
        n_batch: int = 512,
    ) -> None:
        if n_ctx < 256 or n_threads < 1 or n_batch < 1:
            raise ValueError("n_ctx must be at least 256, n_threads and n_batch at least 1")
        self.model_path = model_path
        self.n_ctx, self.n_threads, self.n_batch = n_ctx, n_threads, n_batch
        self._llama: Llama | None = None
        self._formatter: Jinja2ChatFormatter | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()

    @property
    def metadata(self) -> dict[str, str]:
        """The GGUF's metadata (empty before :meth:`load`)."""
        return dict(self._llama.metadata) if self._llama else {}

    def load(self) -> None:
        """Load the model (reads the file; about a second for 0.5B).

        Raises:
            LocalModelNotInstalledError: ``llama-cpp-python`` is not installed.
            FileNotFoundError: ``model_path`` does not exist.
            ValueError: The GGUF has no chat template.
        """
        if self._llama is not None:
            return
        if not self.model_path.is_file():
            raise FileNotFoundError(f"model file {self.model_path} does not exist")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise LocalModelNotInstalledError(
                f"llama-cpp-python is not installed: run `{INSTALL_LLAMA_CPP_COMMAND}` (it "
                "compiles llama.cpp, several minutes)",
                name="llama_cpp",
            ) from exc
        # rope_freq_base=0.0 (llama_cpp.Llama's default, unlike ChatLlamaCpp's 10000) keeps the
        # GGUF's own RoPE settings, which Qwen needs (base 1e6).
        llama = Llama(
            model_path=str(self.model_path),
            n_ctx=self.n_ctx,
            n_batch=self.n_batch,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            rope_freq_base=0.0,
            verbose=False,
        )
        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            llama.close()
            raise ValueError(f"{self.model_path} has no chat template: use a chat/instruct GGUF")
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=llama.detokenize([llama.token_eos()], special=True).decode(errors="ignore"),
            bos_token=llama.detokenize([llama.token_bos()], special=True).decode(errors="ignore"),
        )
        self._closing.clear()
        self._llama = llama
        logger.info("loaded %s (n_ctx=%d, threads=%d)", self.model_path, self.n_ctx, self.n_threads)

    def close(self) -> None:
        """Free the model's memory; a running generation ends at its next token."""
        self._closing.set()
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        """Render chat messages with the model's own chat template, ready for the answer.

        Args:
            messages: ``{"role": ..., "content": ...}`` items (system, user, assistant, tool).

        Returns:
            The prompt text.
        """
        if self._formatter is None:
            raise RuntimeError("the model is not loaded: call load() first")
        chat: Any = [{"role": m["role"], "content": m["content"]} for m in messages]
        return self._formatter(messages=chat).prompt

    def generate(self, prompt: str, options: GenerationOptions) -> Generator[Piece, None, None]:
        """Generate an answer to ``prompt``, piece by piece (one token each, roughly).

        Generations are serialized: a second call waits until the first generator is finished
        or closed, so close a generator you abandon (``contextlib.closing``).

        Args:
            prompt: Text to continue, e.g. from :meth:`render_chat`; special tokens are parsed.
            options: Sampling settings.

        Yields:
            Text pieces; the last one carries the :class:`GenerationStats`.

        Raises:
            InvalidInputError: The prompt does not fit in the context window.
        """
        with self._lock:
            llama = self._llama
            if llama is None:
                raise RuntimeError("the model is not loaded: call load() first")
            started = time.perf_counter_ns()
            tokens = llama.tokenize(prompt.encode(), add_bos=False, special=True)
            if len(tokens) >= self.n_ctx:
                raise InvalidInputError(
                    f"the prompt has {len(tokens)} tokens, more than the context window of "
                    f"{self.n_ctx}: send fewer or shorter messages"
                )
            stream = cast(
                "Generator[CreateCompletionStreamResponse, None, None]",
                llama.create_completion(
                    tokens,
                    max_tokens=options.num_predict or None,
                    temperature=options.temperature,
                    top_k=options.top_k,
                    top_p=options.top_p,
                    min_p=options.min_p,
                    repeat_penalty=options.repeat_penalty,
                    seed=options.seed if options.seed is not None else random.getrandbits(31),
                    stop=list(options.stop),
                    grammar=_grammar(options.json_schema),
                    stream=True,
                ),
            )
            stats = GenerationStats(prompt_eval_count=len(tokens))
            first = 0
            with contextlib.closing(stream):  # stop llama.cpp when our caller stops early
                for chunk in stream:
                    choice = chunk["choices"][0]
                    if self._closing.is_set():
                        break
                    if choice["finish_reason"] is not None:
                        stats.done_reason = choice["finish_reason"]
                        break
                    first = first or time.perf_counter_ns()
                    stats.eval_count += 1
                    if choice["text"]:
                        yield Piece(choice["text"])
            ended = time.perf_counter_ns()
            first = first or ended
            stats.prompt_eval_duration = first - started
            stats.eval_duration = ended - first
            stats.total_duration = ended - started
            yield Piece("", stats)


def _grammar(schema: Mapping[str, Any] | None) -> LlamaGrammar | None:
    if schema is None:
        return None
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    if not schema:
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)
    try:
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    except (ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"format: unsupported JSON schema ({exc})") from exc
