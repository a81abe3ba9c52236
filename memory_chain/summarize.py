"""The summarization chain: ``prompt | chat model | StrOutputParser``, progressive.

The chain takes the running summary and new turns and returns an updated summary. The prompt
asks the model to keep what people come back for (names, dates, numbers, places, decisions,
preferences), which small local models otherwise drop.

Example:
    >>> from langchain_core.language_models import GenericFakeChatModel
    >>> from langchain_core.messages import AIMessage
    >>> chain = build_summarization_chain(GenericFakeChatModel(messages=iter([AIMessage("S")])))
    >>> chain.invoke({"summary": "", "turns": "[1] user: hi"})
    'S'
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable

from memory_chain.schemas import Turn

SUMMARY_SYSTEM = (
    "You keep the memory of a conversation between a user and an assistant. Write a short "
    "summary in plain prose, in the third person. Keep every name, date, time, number, "
    "amount, place, decision and preference exactly as written. Do not invent anything, do "
    "not add advice, do not start with a preamble. At most {max_words} words."
)
SUMMARY_HUMAN = (
    "Summary so far:\n{summary}\n\nNew part of the conversation:\n{turns}\n\n"
    "Write the updated summary of the whole conversation."
)
NO_SUMMARY = "(nothing yet)"


def format_turns(turns: Sequence[Turn]) -> str:
    """Turns as numbered ``[n] role: text`` lines, the form the prompt expects."""
    return "\n".join(f"[{turn.turn_number}] {turn.role}: {turn.content}" for turn in turns)


def build_summarization_chain(
    llm: BaseChatModel, *, max_words: int = 150
) -> Runnable[dict[str, str], str]:
    """The LCEL summarization chain.

    Args:
        llm: The chat model (``ChatOllama`` in production, a fake one in unit tests).
        max_words: Length the summary is asked to stay under.

    Returns:
        A runnable taking ``{"summary": str, "turns": str}`` and returning the new summary.
    """
    prompt = ChatPromptTemplate.from_messages(
        [("system", SUMMARY_SYSTEM), ("human", SUMMARY_HUMAN)]
    ).partial(max_words=str(max_words))
    return (prompt | llm | StrOutputParser()).with_config(run_name="summarize_conversation")


def summary_inputs(previous: str | None, turns: Sequence[Turn]) -> dict[str, str]:
    """The chain's input for a running summary and the turns that follow it."""
    return {"summary": previous.strip() if previous else NO_SUMMARY, "turns": format_turns(turns)}
