"""The combined call, for ``bench_extraction.py --calls``: a range's summary and facts in one.

Consolidation asks the summary model twice per range: the summary
(:mod:`memory_chain.summarize`), then the facts (:class:`FactExtractor`). The combined call
asks once, for ``{"summary": ..., "facts": [...]}``: the extraction prompt with the earlier
summary before the chat, the summary's instructions added to the system prompt, the worked
example's reply given a summary, and the schema a ``summary`` string before the facts. What
the call returns goes through the extractor's own steps (known facts, requests, grounding,
trust, filing) unchanged: only the model call differs (:meth:`CombinedExtractor._call`).

Rejected in the product when measured with the 0.5B (3 parse failures in 20 ranges, fewer
facts); this measures it again with any model. The running summary is carried from call to
call (``summaries``: one per call, ``None`` where the reply gave none).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from memory_chain.extraction import FactExtractor
from memory_chain.extraction.extractor import DEFAULT_REPLY_TOKENS
from memory_chain.summarize import NO_SUMMARY

#: Tokens the summary adds to the reply.
SUMMARY_TOKENS = 320
SUMMARY_RULE = (
    " First, in summary, write a short third-person summary of the chat, carrying on the "
    "earlier summary: keep every name, date, number, amount and place exactly as written, "
    "add nothing that was not said, at most 150 words."
)
# The worked example's summary, in the shape of the summarization chain's own example
# (:data:`memory_chain.summarize.EXAMPLE_SUMMARY`).
EXAMPLE_RANGE_SUMMARY = (
    "The user moved to York last month with their kids; their neighbour Farid plays the "
    "cello. They asked for a bakery and are allergic to nuts; the assistant suggested the "
    "one on Gillygate."
)


class CombinedExtractor(FactExtractor):
    """A :class:`FactExtractor` whose one call per part also writes the running summary."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("reply_tokens", DEFAULT_REPLY_TOKENS + SUMMARY_TOKENS)
        super().__init__(*args, **kwargs)
        self.summary: str | None = None
        self.summaries: list[str | None] = []

    def _call(self, messages: list[BaseMessage], schema: dict[str, Any], window: int) -> str:
        system, example, example_reply, chat = messages
        earlier = f"Earlier summary: {self.summary or NO_SUMMARY}\n\n"
        facts = json.loads(str(example_reply.content))["facts"]
        combined = [
            SystemMessage(str(system.content) + SUMMARY_RULE),
            HumanMessage(f"Earlier summary: {NO_SUMMARY}\n\n{example.content}"),
            AIMessage(json.dumps({"summary": EXAMPLE_RANGE_SUMMARY, "facts": facts})),
            HumanMessage(earlier + str(chat.content)),
        ]
        wanted = dict(schema)
        wanted["properties"] = {
            # No maxLength: llama.cpp's grammar refuses one this long (a rule repeated 1,200
            # times); the prompt asks for 150 words and the reply's token limit bounds it.
            "summary": {"type": "string"},
            **schema["properties"],
        }
        wanted["required"] = ["summary", *schema["required"]]
        reply = super()._call(combined, wanted, window)
        summary = _summary_of(reply)
        self.summaries.append(summary)
        if summary:
            self.summary = summary
        return reply  # the facts are parsed from the same JSON ("summary" is ignored there)


def _summary_of(reply: str) -> str | None:
    """The reply's summary, or ``None`` when it is not JSON with a non-empty summary."""
    try:
        data = json.loads(reply.strip())
    except ValueError:
        return None
    summary = data.get("summary") if isinstance(data, dict) else None
    return summary.strip() if isinstance(summary, str) and summary.strip() else None


__all__ = ["CombinedExtractor"]
