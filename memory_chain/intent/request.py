"""What an explicit memory request is: its action (save or forget) and its text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal["save", "forget"]


@dataclass(frozen=True, slots=True)
class Intent:
    """A request to remember or to forget something.

    Attributes:
        action: ``"save"`` (remember) or ``"forget"``.
        text: What to save or forget, trimmed, without the request phrase; empty when the
            request refers back.
        refers_back: The message names no content ("remember this", "forget that"): the
            previous message is meant.
    """

    action: Action
    text: str
    refers_back: bool
