"""The bodies of the OpenAI-compatible API: requests, responses and errors, as OpenAI's.

Unknown fields of messages are accepted (clients send more than this server reads); the
fields this server ignores say so in their description.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memory_chain.chat.request import MAX_SEED
from memory_chain.schemas import ID_PATTERN


class ErrorDetail(BaseModel):
    """What went wrong."""

    message: str
    type: str
    param: str | None = None
    code: int | str


class ErrorBody(BaseModel):
    """An error response."""

    error: ErrorDetail
    detail: str


class ContentPart(BaseModel):
    """A part of a message's content; only text parts are read."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    """One message of the history."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        """The message's text (text parts joined by newlines)."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        return "\n".join(part.text or "" for part in self.content if part.type == "text")


class StreamOptions(BaseModel):
    """Streaming options."""

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat completion request, plus ``conversation_id``."""

    model: str | None = Field(
        default=None,
        description="A model of GET /v1/models (default: the configured chat model); its "
        "context window bounds the prompt.",
    )
    messages: list[ChatMessage] = Field(min_length=1, description="The history; the last is new.")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, description="0 to 2.")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling.")
    max_tokens: int | None = Field(
        default=None, ge=1, description="Longest reply; the prompt keeps this much room."
    )
    max_completion_tokens: int | None = Field(
        default=None, ge=1, description="As max_tokens (wins over it)."
    )
    stop: str | list[str] | None = Field(
        default=None, description="Up to four strings that end the reply."
    )
    seed: int | None = Field(
        default=None,
        description=f"Sampler seed, for replies that repeat: a whole number from 0 to {MAX_SEED}.",
        json_schema_extra={"minimum": 0, "maximum": MAX_SEED},
    )
    n: int | None = Field(default=None, ge=1, le=1, description="Only one choice.")
    user: str | dict[str, Any] | None = Field(
        default=None, description="Ignored: the user comes from the API key or X-User-Id."
    )
    conversation_id: str | None = Field(
        default=None,
        pattern=f"^{ID_PATTERN.pattern}$",
        description="The conversation (else X-Conversation-Id, X-OpenWebUI-Chat-Id, derived).",
    )

    @field_validator("seed")
    @classmethod
    def _seed_in_range(cls, seed: int | None) -> int | None:
        # Checked with the body, before anything is stored: a seed the model cannot take
        # would otherwise fail the call after the user's message was stored.
        if seed is not None and not 0 <= seed <= MAX_SEED:
            raise ValueError(
                f"seed {seed} is out of range: use a whole number from 0 to {MAX_SEED}"
            )
        return seed


class ModelCard(BaseModel):
    """A model, as OpenAI lists it."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "memory_chain"


class ModelList(BaseModel):
    """The models a request may name (the LLM server's)."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


class Usage(BaseModel):
    """Token counts as the model reported them."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ReplyMessage(BaseModel):
    """The assistant's reply."""

    role: Literal["assistant"] = "assistant"
    content: str
    refusal: str | None = None


class Choice(BaseModel):
    """The one choice of a completion."""

    index: int = 0
    message: ReplyMessage
    logprobs: None = None
    finish_reason: Literal["stop", "length"]


class ChatCompletion(BaseModel):
    """A ``chat.completion`` object."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[Choice]
    usage: Usage
