"""Which conversation an OpenAI-style request belongs to, and which of its messages are new.

Who and which conversation:
    The user is decided as on every route (:func:`~memory_chain.api.deps.resolve_user`). The
    conversation is, in order: the body's ``conversation_id`` field or an
    ``X-Conversation-Id`` header; Open WebUI's forwarded ``X-OpenWebUI-Chat-Id``; otherwise
    ``"oa-"`` and a hash of the user and the first user message, which stays the same while a
    client resends the whole history. The id used is returned in ``X-Conversation-Id``.

What is stored:
    Clients resend the whole history each turn; only the last message (the user's) is new.
    The core compares the user and assistant messages before it with the stored turns
    (:mod:`memory_chain.chat.reconcile`): turns memory lacks are stored, a regenerated reply
    stores nothing, an edited history stores only the new exchange.

    System and developer messages are the client's instructions: they go first in the
    prompt, beside memory's own, and are not stored. Tool messages are not stored and do
    not reach the model. Open WebUI's background tasks (title, tags, follow-ups, search
    queries: one user message starting with ``### Task:``) are answered by the model without
    memory and stored nowhere.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import Request

from memory_chain.api.openai_bodies import ChatCompletionRequest, ChatMessage
from memory_chain.chat.reconcile import Said
from memory_chain.errors import InvalidInputError
from memory_chain.schemas import ID_PATTERN, validate_id

logger = logging.getLogger(__name__)

#: Open WebUI's background-task prompts (title, tags, follow-ups, queries) start with this.
OPENWEBUI_TASK_PREFIX = "### Task:"


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
    system: str = ""


def parse_messages(messages: Sequence[ChatMessage]) -> ParsedChat:
    """Split the messages: the new user message, the user/assistant history, the instructions.

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
    system = "\n\n".join(
        message.text.strip()
        for message in messages
        if message.role in ("system", "developer") and message.text.strip()
    )
    first_user = next((said.text for said in history if said.role == "user"), new_text)
    is_task = new_text.lstrip().startswith(OPENWEBUI_TASK_PREFIX) and not any(
        said.role == "assistant" for said in history
    )
    return ParsedChat(new_text, history, first_user, is_task, system)
