"""Conversion between LangChain messages and stored turns.

Human, AI and system messages map to the stored roles ``user``, ``assistant`` and ``system``;
a :class:`~langchain_core.messages.ChatMessage` keeps its role when it is one of those. Any
other message (tool calls, function results) is rejected with a clear error rather than
silently stored under a wrong role.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
)

from memory_chain.errors import InvalidInputError
from memory_chain.schemas import ROLES, NewTurn, Role, TokenUsage, Turn
from memory_chain.tokens import TokenCounter

_ROLE_OF_TYPE: dict[str, Role] = {"human": "user", "ai": "assistant", "system": "system"}
_ROLE_ALIASES: dict[str, Role] = {"human": "user", "ai": "assistant"}


def message_text(message: BaseMessage) -> str:
    """The text of a message; for multi-part content, its text parts joined by newlines."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text":
            parts.append(str(part.get("text", "")))
    return "\n".join(parts)


def message_role(message: BaseMessage) -> Role:
    """The stored role of a message.

    Raises:
        InvalidInputError: If the message has no role memory_chain stores.
    """
    if isinstance(message, ChatMessage):
        role = _ROLE_ALIASES.get(message.role, message.role)
        if role in ROLES:
            return role  # type: ignore[return-value]
        raise InvalidInputError(f"unknown role {message.role!r}: use one of {sorted(ROLES)}")
    role_of_type = _ROLE_OF_TYPE.get(message.type)
    if role_of_type is None:
        raise InvalidInputError(
            f"cannot store a {message.type!r} message: memory keeps user, assistant and "
            "system messages only"
        )
    return role_of_type


def to_new_turns(
    messages: Sequence[BaseMessage], counter: TokenCounter | None = None
) -> list[NewTurn]:
    """Convert messages to turns to store.

    Token counts come from an AI message's ``usage_metadata`` when the model reported them
    (prompt and completion counts), otherwise from ``counter``.

    Args:
        messages: The messages, in order.
        counter: Counts tokens where the model reported none; ``None`` leaves them unknown.

    Returns:
        One :class:`NewTurn` per message.

    Raises:
        InvalidInputError: If a message has an unsupported type or role.
    """
    turns: list[NewTurn] = []
    texts = [message_text(message) for message in messages]
    counts = counter.count_many(texts) if counter is not None and texts else None
    for index, (message, text) in enumerate(zip(messages, texts, strict=True)):
        role = message_role(message)
        tokens: TokenUsage | None = None
        usage = getattr(message, "usage_metadata", None)
        if usage:
            tokens = TokenUsage(
                total=int(usage.get("total_tokens", 0)),
                prompt=int(usage.get("input_tokens", 0)),
                completion=int(usage.get("output_tokens", 0)),
            )
        elif counts is not None:
            tokens = TokenUsage(total=counts[index])
        turns.append(NewTurn(role=role, content=text, tokens=tokens))
    return turns


def to_message(turn: Turn) -> BaseMessage:
    """Convert a stored turn to a LangChain message.

    The message id is ``"<conversation_id>:<turn_number>"``; the turn number and timestamp
    are in ``additional_kwargs`` so that prompts and callers can cite them.
    """
    kwargs = {"turn_number": turn.turn_number, "timestamp": turn.timestamp.isoformat()}
    message_id = f"{turn.conversation_id}:{turn.turn_number}"
    if turn.role == "user":
        return HumanMessage(content=turn.content, id=message_id, additional_kwargs=kwargs)
    if turn.role == "system":
        return SystemMessage(content=turn.content, id=message_id, additional_kwargs=kwargs)
    message = AIMessage(content=turn.content, id=message_id, additional_kwargs=kwargs)
    if turn.tokens is not None and turn.tokens.prompt is not None:
        message.usage_metadata = {
            "input_tokens": turn.tokens.prompt,
            "output_tokens": turn.tokens.completion or 0,
            "total_tokens": turn.tokens.total,
        }
    return message
