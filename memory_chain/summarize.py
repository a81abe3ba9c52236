"""The summarization chain: ``prompt | chat model | StrOutputParser``, progressive.

The chain takes the running summary and new turns and returns an updated summary. The prompt
asks the model to keep what people come back for (names, dates, numbers, amounts, places) and
shows one worked example: measured with the embedded 0.5B model, a bare instruction made it
copy the chat line by line, and the example made it write a summary that kept the facts.

Example:
    >>> from langchain_core.language_models import GenericFakeChatModel
    >>> from langchain_core.messages import AIMessage
    >>> chain = build_summarization_chain(GenericFakeChatModel(messages=iter([AIMessage("S")])))
    >>> chain.invoke({"summary": "(none)", "turns": "User: hi"})
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
    "You write short third-person summaries of chats between a user and an assistant. Keep "
    "every name, date, number, amount and place exactly as written. Do not add anything that "
    "was not said. At most {max_words} words."
)
# One worked example: small local models otherwise tend to copy the chat line by line.
EXAMPLE_CHAT = (
    "Earlier summary: (none)\n\nChat:\n"
    "User: I need a laptop for video editing under 1500 dollars.\n"
    "Assistant: Look at models with 32 GB of RAM.\n"
    "User: My colleague Priya recommended Lenovo.\n\nSummary:"
)
# The example names a third person, not the user: with "The user, Tom, ..." the 0.5B model
# called every user Tom.
EXAMPLE_SUMMARY = (
    "The user wants a laptop for video editing for under 1500 dollars; their colleague Priya "
    "recommended Lenovo. The assistant suggested 32 GB of RAM."
)
SUMMARY_HUMAN = "Earlier summary: {summary}\n\nChat:\n{turns}\n\nSummary:"
NO_SUMMARY = "(none)"
_SPEAKER = {"user": "User", "assistant": "Assistant", "system": "System"}


def format_turns(turns: Sequence[Turn]) -> str:
    """Turns as ``User: ...`` / ``Assistant: ...`` lines, the form the prompt expects."""
    return "\n".join(f"{_SPEAKER.get(turn.role, turn.role)}: {turn.content}" for turn in turns)


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
        [
            ("system", SUMMARY_SYSTEM),
            ("human", EXAMPLE_CHAT),
            ("ai", EXAMPLE_SUMMARY),
            ("human", SUMMARY_HUMAN),
        ]
    ).partial(max_words=str(max_words))
    return (prompt | llm | StrOutputParser()).with_config(run_name="summarize_conversation")


def summary_inputs(previous: str | None, turns: Sequence[Turn]) -> dict[str, str]:
    """The chain's input for a running summary and the turns that follow it."""
    return {"summary": previous.strip() if previous else NO_SUMMARY, "turns": format_turns(turns)}
