"""The conversation itself as a prompt's context: what a chat app without memory sends.

Two baselines of the answers benchmark put the stored conversation in the chat's prompt as
its recent turns, in place of what memory finds: the whole conversation as far as it fits
the model's window, and the last turns that fit a smaller budget. Both are built here:

- :func:`dated_turns`: the turns with the date written before the first turn of every
  session (a turn more than :data:`SESSION_GAP` after the one before): a chat app shows
  when each session took place, and without dates no reader could answer "when" questions
  from the history (memory's recalled lines carry their dates too);
- :func:`turns_that_fit`: the newest turns that fit the budget with the instructions and a
  question of up to :data:`QUESTION_ROOM` tokens, chosen once for every question so that the
  prompts of consecutive questions share everything before the question: llama.cpp then
  reuses the cached prefix and reads only the question;
- :func:`history_context`: those turns as a :class:`MemoryContext` for
  :func:`~memory_chain.chat.budget.build_prompt`, which keeps them all.

Example:
    >>> kept = turns_that_fit(dated_turns(turns), budget, counter)  # doctest: +SKIP
    >>> context = history_context("conv-26", "locomo-conv-26", kept)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from memory_chain.chat.budget import PROMPT_OVERHEAD, Budget, instructions
from memory_chain.chat.sections import MESSAGE_OVERHEAD
from memory_chain.schemas import MemoryContext, Turn
from memory_chain.tokens import TokenCount

#: A turn this long after the previous one starts a new session.
SESSION_GAP = timedelta(hours=1)
#: Tokens kept for the question when the turns are chosen (LoCoMo's longest question with
#: the answer hint is under 50).
QUESTION_ROOM = 64


def session_label(turn: Turn) -> str:
    """What goes before the first turn of a session: ``(YYYY-MM-DD HH:MM) ``."""
    return f"({turn.timestamp:%Y-%m-%d %H:%M}) "


def dated_turns(turns: Sequence[Turn], gap: timedelta = SESSION_GAP) -> list[Turn]:
    """``turns``, the first of each session (and the first of all) with its date before it."""
    dated: list[Turn] = []
    for index, turn in enumerate(turns):
        starts = index == 0 or turn.timestamp - turns[index - 1].timestamp > gap
        dated.append(replace(turn, content=session_label(turn) + turn.content) if starts else turn)
    return dated


def turns_that_fit(
    turns: Sequence[Turn],
    budget: Budget,
    counter: TokenCount,
    *,
    system: str = "",
    question_room: int = QUESTION_ROOM,
) -> list[Turn]:
    """The newest of ``turns`` that fit ``budget`` beside the instructions and a question.

    Args:
        turns: The conversation, oldest first.
        budget: The window and the reply's room.
        counter: Counts tokens as the model does, or higher.
        system: The client's instructions ('' for the default persona).
        question_room: Tokens kept for the question.

    Returns:
        The last turns, oldest first, whose messages fit what the budget leaves (all of them
        when the conversation fits; none when not even the newest does).
    """
    fixed = counter.count(instructions(system)) + question_room
    room = budget.prompt - fixed - 2 * MESSAGE_OVERHEAD - PROMPT_OVERHEAD
    costs = counter.count_many([turn.content for turn in turns])
    kept = 0
    for cost in reversed(costs):
        if cost + MESSAGE_OVERHEAD > room:
            break
        room -= cost + MESSAGE_OVERHEAD
        kept += 1
    return list(turns[len(turns) - kept :])


def history_context(conversation_id: str, user_id: str, turns: Sequence[Turn]) -> MemoryContext:
    """A context of ``turns`` alone: no summary, no facts, nothing recalled."""
    return MemoryContext(
        conversation_id=conversation_id,
        user_id=user_id,
        summary=None,
        recent=tuple(turns),
        items=(),
    )
