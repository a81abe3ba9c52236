"""A fake chat model for tests: it keeps every prompt and answers from a script.

``Scripted(replies=[...], otherwise=...)`` answers each call with its next reply, then, once
they are used up, with ``otherwise``. A reply is a text, an ``AIMessage`` (to report usage
metadata, say), an exception (raised, as a failing model server would) or a function of the
prompt returning a text or a message (a model that answers from what its prompt holds)::

    llm = Scripted(replies=['{"facts": []}', TimeoutError("slow")], otherwise="ok")
    llm.invoke("hi")  # '{"facts": []}', then TimeoutError, then "ok" from then on
    llm.prompts[0]  # [HumanMessage("hi")]; llm.prompt_text(0) == "hi"

``ScriptedFacts`` answers :data:`NO_FACTS` once its replies are used up (a fact extractor's
model); ``reply(fact("I live in Porto.", 1, subject="home"))`` writes such a model's reply.

It answers through ``_generate`` only (a stream is one chunk). For a model that must stream
word by word, use LangChain's ``GenericFakeChatModel``; ``RecordingModel`` is one that also
keeps its prompts and binds tools (an agent's model).

``ScriptedSummarizer`` stands in for a summarization chain: it fails a set number of times,
then answers, and counts its calls.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

#: A fact extractor's reply that finds nothing.
NO_FACTS = '{"facts": []}'
#: What a scripted reply may be.
Reply = str | AIMessage | Exception | Callable[[list[BaseMessage]], str | AIMessage]


class Scripted(BaseChatModel):
    """Answers with the scripted replies in order, then with ``otherwise``; keeps the prompts.

    Attributes:
        replies: The next replies, used up in order.
        otherwise: The reply once ``replies`` is empty.
        prompts: Every prompt the model was given, in order.
    """

    replies: list[Any] = Field(default_factory=list)
    otherwise: Any = ""
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def prompt_text(self, index: int = -1) -> str:
        """A prompt it was given (the last by default) as one text, a line per message."""
        return "\n".join(str(message.content) for message in self.prompts[index])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(messages)
        reply: Reply = self.replies.pop(0) if self.replies else self.otherwise
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            reply = reply(messages)
        # A copy: LangChain sets the returned message's id and metadata in place.
        message = reply.model_copy() if isinstance(reply, AIMessage) else AIMessage(reply)
        return ChatResult(generations=[ChatGeneration(message=message)])


class ScriptedFacts(Scripted):
    """A model that fact extraction asks: the scripted replies, then no facts."""

    otherwise: Any = NO_FACTS


def fact(
    text: str, turn: object = 1, *, subject: str = "x", kind: str = "other", replaces: str = ""
) -> dict[str, Any]:
    """One fact as an extractor's reply gives it."""
    return {"text": text, "kind": kind, "subject": subject, "turn": turn, "replaces": replaces}


def reply(*facts: dict[str, Any]) -> str:
    """An extractor's reply holding ``facts``."""
    return json.dumps({"facts": list(facts)})


class RecordingModel(GenericFakeChatModel):
    """Answers from a script and keeps every prompt it was sent."""

    prompts: list[list[BaseMessage]] = []  # one list per instance (set in __init__)

    def __init__(self, answers: Sequence[AIMessage | str]) -> None:
        super().__init__(messages=iter(answers), prompts=[])

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingModel:
        return self


class ScriptedSummarizer:
    """A summarization chain stand-in: fails ``failures`` times, then answers; counts calls."""

    def __init__(self, failures: int = 0, delay: float = 0.0) -> None:
        self.failures = failures
        self.delay = delay
        self.calls: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def invoke(self, inputs: dict[str, str], *_: Any, **__: Any) -> str:
        with self.lock:
            self.calls.append(inputs)
            if self.failures > 0:
                self.failures -= 1
                raise ConnectionError("model down")
        time.sleep(self.delay)
        return f"summary #{len(self.calls)} of {inputs['turns'].count(chr(10)) + 1} lines"
