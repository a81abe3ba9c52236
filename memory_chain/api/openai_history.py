"""Which conversation an OpenAI-style request belongs to, and which of its messages are new.

Who and which conversation:
    The user is decided as on every route (:func:`~memory_chain.api.deps.resolve_user`). The
    conversation is, in order: the body's ``conversation_id`` field or an
    ``X-Conversation-Id`` header; Open WebUI's forwarded ``X-OpenWebUI-Chat-Id``; otherwise
    ``"oa-"`` and a hash of the user and the first user message, which stays the same while a
    client resends the whole history. The id used is returned in ``X-Conversation-Id``.

What is stored:
    Clients resend the whole history each turn; only the last message (the user's) is new.
    The user and assistant messages before it are compared with the stored turns
    (whitespace-insensitive):

    * the history is what is stored: the chain stores the new message and the reply;
    * the history starts with what is stored and goes on (a chat begun elsewhere, a reply
      the client kept after a dropped stream): the missing turns are stored first, then the
      chain runs;
    * the message repeats the last stored exchange (a retry, Open WebUI's *regenerate*): a
      reply is generated from memory without that exchange and nothing is stored;
    * the message is the last stored turn, unanswered (the user turn is stored before the
      model runs, and the model failed or the client left mid-stream): the chain answers that
      turn and stores only the reply;
    * otherwise the history diverged (edited messages, another branch): nothing of it is
      stored or rewritten, since memory is append-only; the chain answers with memory and
      stores the new message and the reply.

    System, developer and tool messages are not stored and do not reach the model (the chain
    has its own system message). Open WebUI's background tasks (title, tags, follow-ups,
    search queries: one user message starting with ``### Task:``) are answered by the chat
    model without memory and stored nowhere. ``temperature``, ``max_tokens`` and ``user`` are
    accepted and ignored (the server's settings apply).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from fastapi import Request

from memory_chain.api.openai_bodies import ChatCompletionRequest, ChatMessage
from memory_chain.errors import InvalidInputError
from memory_chain.schemas import ID_PATTERN, Turn, validate_id

logger = logging.getLogger(__name__)

#: Open WebUI's background-task prompts (title, tags, follow-ups, queries) start with this.
OPENWEBUI_TASK_PREFIX = "### Task:"


@dataclass(frozen=True)
class Said:
    """A user or assistant message, compared without regard to whitespace."""

    role: str
    text: str

    @property
    def key(self) -> tuple[str, str]:
        """What two messages must share to be the same."""
        return self.role, " ".join(self.text.split())

    @classmethod
    def of(cls, turn: Turn) -> Said:
        """From a stored turn."""
        return cls(turn.role, turn.content)


@dataclass(frozen=True)
class HistoryPlan:
    """What to do with a request's history.

    Attributes:
        action: ``"append"`` (in sync), ``"import"`` (store ``missing`` first), ``"repeat"``
            (answer, store nothing), ``"retry"`` (answer the stored unanswered message, store
            the reply) or ``"diverged"`` (store only the new exchange).
        missing: Turns the client has and the server lacks (for ``"import"``).
    """

    action: Literal["append", "import", "repeat", "retry", "diverged"]
    missing: tuple[Said, ...] = ()


def _keys(messages: Sequence[Said]) -> list[tuple[str, str]]:
    return [message.key for message in messages]


def plan_history(
    history: Sequence[Said], stored: Sequence[Said], stored_count: int, new_text: str
) -> HistoryPlan:
    """Compare the client's history with the stored turns (see the module docstring).

    Args:
        history: The user and assistant messages before the new one.
        stored: The stored turns: all of them when ``stored_count <= len(history)``, else at
            least the last four.
        stored_count: How many turns are stored.
        new_text: The new user message.

    Returns:
        The plan.
    """
    complete = len(stored) == stored_count
    if complete and _keys(history) == _keys(stored):
        return HistoryPlan("append")
    said = Said("user", new_text).key
    if (
        stored_count >= 2
        and stored[-2].key == said
        and stored[-1].role == "assistant"
        and _follows(history, stored[:-2], stored_count - 2)
    ):
        return HistoryPlan("repeat")
    if (
        stored_count >= 1
        and stored[-1].key == said
        and _follows(history, stored[:-1], stored_count - 1)
    ):
        return HistoryPlan("retry")
    if complete and len(history) > stored_count and _keys(history[:stored_count]) == _keys(stored):
        return HistoryPlan("import", tuple(history[stored_count:]))
    return HistoryPlan("diverged")


def _follows(history: Sequence[Said], before: Sequence[Said], before_count: int) -> bool:
    """Whether the client's history ends where the stored turns ``before`` end."""
    overlap = min(len(history), len(before), 2)
    if before_count == 0:
        return not history
    return overlap > 0 and _keys(history[-overlap:]) == _keys(before[-overlap:])


def derived_conversation_id(user_id: str, first_user_message: str) -> str:
    """The conversation of a client that names none: stable while it resends the history."""
    seed = f"{user_id}\x1f{' '.join(first_user_message.split())}"
    return "oa-" + hashlib.sha256(seed.encode()).hexdigest()[:32]


def conversation_of(
    request: Request, body: ChatCompletionRequest, user_id: str, first_user_message: str
) -> str:
    """The conversation a request belongs to (see the module docstring).

    Raises:
        InvalidInputError: If ``X-Conversation-Id`` is malformed.
    """
    if body.conversation_id:
        return body.conversation_id
    header = request.headers.get("x-conversation-id")
    if header:
        return validate_id(header, "conversation id in X-Conversation-Id")
    chat_id = request.headers.get("x-openwebui-chat-id")
    if chat_id:
        if ID_PATTERN.fullmatch(chat_id):
            return chat_id
        logger.warning("ignoring a malformed X-OpenWebUI-Chat-Id %r", chat_id[:80])
    return derived_conversation_id(user_id, first_user_message)


@dataclass(frozen=True)
class ParsedChat:
    """A request's messages, split."""

    new_text: str
    history: tuple[Said, ...]
    first_user_text: str
    is_task: bool


def parse_messages(messages: Sequence[ChatMessage]) -> ParsedChat:
    """Split the messages into the new user message and the user/assistant history.

    Raises:
        InvalidInputError: If the last message is not a user message with text, or a
            message is not valid Unicode.
    """
    for index, message in enumerate(messages):
        try:
            message.text.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800"): no store takes it
            raise InvalidInputError(
                f"messages.{index}: the text is not valid Unicode (a lone surrogate at "
                f"character {exc.start}): send UTF-8 text"
            ) from exc
    last = messages[-1]
    if last.role != "user":
        raise InvalidInputError(
            f"the last message has role {last.role!r}: end with the user's new message "
            "(role 'user'); this server does not run tools or continue assistant messages"
        )
    new_text = last.text
    if not new_text.strip():
        raise InvalidInputError("the last user message has no text: send some text")
    history = tuple(
        Said(message.role, message.text)
        for message in messages[:-1]
        if message.role in ("user", "assistant") and message.text.strip()
    )
    first_user = next((said.text for said in history if said.role == "user"), new_text)
    is_task = new_text.lstrip().startswith(OPENWEBUI_TASK_PREFIX) and not any(
        said.role == "assistant" for said in history
    )
    return ParsedChat(new_text, history, first_user, is_task)
