"""Which of a client's messages memory lacks: the client's history against the stored turns.

OpenAI-style clients resend the whole history with each message; memory is append-only. The
user and assistant messages before the new one are compared with the stored turns, without
regard to whitespace:

* the history is what is stored (``"append"``): the new message and the reply are stored;
* the history starts with what is stored and goes on (``"import"``: a chat begun elsewhere,
  a reply the client kept after a dropped stream): the missing turns are stored first, as
  history (no "remember ..." in them is acted on: only the new message is a request);
* the message repeats the last stored exchange (``"repeat"``: a retry, Open WebUI's
  *regenerate*): a reply is generated from memory without that exchange, nothing is stored;
* the message is the last stored turn, unanswered (``"retry"``: the user turn is stored
  before the model runs, and the model failed or the client left mid-stream): that turn is
  answered and only the reply is stored;
* otherwise the history diverged (``"diverged"``: edited messages, another branch): nothing
  of it is stored or rewritten, and the new exchange is stored.

A client that sends no history (the LCEL chain, LangServe) gets the one check that needs
none: the message equal to the last stored, unanswered turn is a retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memory_chain.schemas import Turn


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


Action = Literal["append", "import", "repeat", "retry", "diverged"]


@dataclass(frozen=True)
class HistoryPlan:
    """What to do with a request's history.

    Attributes:
        action: See the module docstring.
        missing: Turns the client has and memory lacks (for ``"import"``).
    """

    action: Action
    missing: tuple[Said, ...] = ()

    @property
    def stores_message(self) -> bool:
        """Whether the new user message is stored (it is already, or must not be, otherwise)."""
        return self.action in ("append", "import", "diverged")

    @property
    def stores_reply(self) -> bool:
        """Whether the reply is stored (a regenerated reply is not)."""
        return self.action != "repeat"


def _keys(messages: Sequence[Said]) -> list[tuple[str, str]]:
    return [message.key for message in messages]


def _follows(history: Sequence[Said], before: Sequence[Said], before_count: int) -> bool:
    """Whether the client's history ends where the stored turns ``before`` end."""
    if before_count == 0:
        return not history
    overlap = min(len(history), len(before), 2)
    return overlap > 0 and _keys(history[-overlap:]) == _keys(before[-overlap:])


def plan_history(
    history: Sequence[Said] | None, stored: Sequence[Said], stored_count: int, new_text: str
) -> HistoryPlan:
    """Compare the client's history with the stored turns (see the module docstring).

    Args:
        history: The user and assistant messages before the new one; ``None`` for a client
            that sends none (only the retry of an unanswered message is recognised).
        stored: The last stored turns, oldest first: all of them, or at least the last four.
        stored_count: How many turns are stored.
        new_text: The new user message.

    Returns:
        The plan.
    """
    said = Said("user", new_text).key
    if history is None:
        retry = bool(stored_count and stored and stored[-1].key == said)
        return HistoryPlan("retry" if retry else "append")
    complete = len(stored) == stored_count
    if complete and _keys(history) == _keys(stored):
        return HistoryPlan("append")
    if (
        stored_count >= 2
        and len(stored) >= 2
        and stored[-2].key == said
        and stored[-1].role == "assistant"
        and _follows(history, stored[:-2], stored_count - 2)
    ):
        return HistoryPlan("repeat")
    if (
        stored_count >= 1
        and stored
        and stored[-1].key == said
        and _follows(history, stored[:-1], stored_count - 1)
    ):
        return HistoryPlan("retry")
    if complete and len(history) > stored_count and _keys(history[:stored_count]) == _keys(stored):
        return HistoryPlan("import", tuple(history[stored_count:]))
    return HistoryPlan("diverged")


def needs_every_turn(history: Sequence[Said] | None, stored_count: int) -> bool:
    """Whether :func:`plan_history` must see every stored turn, not only the last ones.

    Only when the client's history is at least as long as what is stored can it be that
    history, or begin with it.
    """
    return history is not None and 0 < stored_count <= len(history)
