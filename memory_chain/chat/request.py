"""What a client asks of one chat turn, checked once, whatever door it came through.

The OpenAI-compatible route, the LangServe route and the LCEL chain each map their own input
to one :class:`ChatRequest`; :class:`~memory_chain.chat.core.ChatCore` takes it from there.

Example:
    >>> request = ChatRequest.checked(
    ...     conversation_id="trip", user_id="ana", message="When do we fly?",
    ...     system="Answer in French.", options=ReplyOptions(temperature=0.3, max_tokens=64))
    >>> request.options.max_tokens
    64
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_chain.chat.reconcile import Said
from memory_chain.errors import InvalidInputError
from memory_chain.schemas import NewTurn, validate_id, validate_new_turns
from memory_chain.storable import check_text

#: Most stop sequences a request may give (OpenAI's limit).
MAX_STOP = 4
#: The largest sampler seed. 0 to 2**31 - 1 fits a signed and an unsigned 32-bit integer,
#: so every backend takes it as it is: llama.cpp's sampler seed is 32-bit (the embedded
#: engine silently cuts a larger one to its low 32 bits), and Ollama cannot read a 30-digit
#: one as an integer at all (the call fails after the user's message was stored).
MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class ReplyOptions:
    """How the model should answer; ``None`` leaves a setting to the server's configuration.

    Attributes:
        temperature: Sampling temperature, 0 to 2 (0: the most likely token each time).
        top_p: Nucleus sampling threshold, over 0 and at most 1.
        max_tokens: Longest reply, in tokens; also the room kept for the reply in the prompt.
        stop: Strings that end the reply (at most four, none empty).
        seed: Sampler seed, for replies that repeat: 0 to :data:`MAX_SEED`.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise InvalidInputError(
                f"temperature {self.temperature} is out of range: use a number from 0 to 2"
            )
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise InvalidInputError(f"top_p {self.top_p} is out of range: use (0, 1]")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise InvalidInputError(f"max_tokens {self.max_tokens} must be at least 1")
        if len(self.stop) > MAX_STOP or not all(isinstance(s, str) and s for s in self.stop):
            raise InvalidInputError(f"stop takes at most {MAX_STOP} non-empty strings")
        if self.seed is not None and (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not 0 <= self.seed <= MAX_SEED
        ):
            raise InvalidInputError(
                f"seed {self.seed!r} is out of range: use a whole number from 0 to {MAX_SEED}"
            )

    @classmethod
    def of(
        cls,
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
    ) -> ReplyOptions:
        """From a client's fields (``stop`` may be one string, as in OpenAI's API)."""
        stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
        return cls(temperature, top_p, max_tokens, stops, seed)


@dataclass(frozen=True)
class ChatRequest:
    """One chat turn as the core takes it (build it with :meth:`checked`).

    Attributes:
        conversation_id: The conversation (the user's own: ids are per user).
        user_id: Who is talking.
        message: The user's new message.
        system: The client's instructions (its system and developer messages), put first in
            the prompt, beside memory's own.
        history: The user and assistant messages the client sent before ``message``, or
            ``None`` for a client that sends none (:mod:`memory_chain.chat.reconcile`).
        model: The model to answer with (``None``: the configured chat model).
        options: Sampling and length of the reply.
        memory: Read and store memory (``False``: the model alone, for a client's background
            tasks such as titles; nothing is stored).
    """

    conversation_id: str
    user_id: str
    message: str
    system: str = ""
    history: tuple[Said, ...] | None = None
    model: str | None = None
    options: ReplyOptions = field(default_factory=ReplyOptions)
    memory: bool = True

    @classmethod
    def checked(
        cls,
        *,
        conversation_id: str,
        user_id: str,
        message: str,
        system: str = "",
        history: Sequence[Said] | None = None,
        model: str | None = None,
        options: ReplyOptions | None = None,
        memory: bool = True,
        max_chars: int | None = None,
    ) -> ChatRequest:
        """A request whose ids and text are checked, as the store would check them.

        Raises:
            InvalidInputError: An id is malformed, the message is empty or too long, or the
                message, the system text or a message of the history holds text no store
                keeps (a NUL character, an unpaired surrogate), before anything is stored.
        """
        validate_id(conversation_id)
        validate_id(user_id, "user id")
        validate_new_turns([NewTurn("user", message)], max_chars=max_chars or 10**9)
        check_text(system, "the system prompt")
        for index, said in enumerate(history or ()):
            check_text(said.text, f"history message {index} ({said.role})")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise InvalidInputError("model is empty: name a model from GET /v1/models, or omit it")
        return cls(
            conversation_id=conversation_id,
            user_id=user_id,
            message=message,
            system=system.strip(),
            history=tuple(history) if history is not None else None,
            model=model,
            options=options or ReplyOptions(),
            memory=memory,
        )
