"""The update benchmark's answers: the chat model asked a scenario's probe, facts dated or not.

``bench_updates.py`` runs each scenario; with answers on, :func:`answers` asks the probe
through the chat's own prompt twice, the facts as shipped (dated) and as they read before
they were dated (:func:`undated`), and judges each reply by the scenario's expectations.
"""

from __future__ import annotations

import re
from typing import Any

from harness import Run, alternated, timed
from langchain_core.messages import BaseMessage, SystemMessage
from update_scenarios import Scenario

from memory_chain.chat.budget import FACTS_HEADING
from memory_chain.chat.request import ChatRequest, ReplyOptions
from memory_chain.messages import message_text
from memory_chain.services import Services

#: Each scenario has its own data folder, so one user id will do.
USER = "bench-user"
#: The start of a fact's line in a prompt (``- (2026-03-01 09:30) ``, or with the dates its
#: relative times name: ``- (2026-03-01 09:30; "last month" = February 2026) ``).
FACT_LABEL = re.compile(r"^- \(\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?:; [^)\n]*)?\) ", re.MULTILINE)
#: Longest answer to a probe, in tokens (the answer names a value early, or not at all).
ANSWER_TOKENS = 200
#: The facts' heading before facts were dated.
UNDATED_HEADING = "What you know about the user:"


def undated(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The prompt with its facts as they read before they were dated (the answers' ablation)."""
    system = str(messages[0].content).replace(FACTS_HEADING, UNDATED_HEADING)
    system = FACT_LABEL.sub("- ", system)
    return [SystemMessage(system), *messages[1:]]


def answers(services: Services, scenario: Scenario, run: Run, order: int) -> dict[str, Any]:
    """The chat model's reply to the probe, its facts dated (as shipped) and undated.

    Greedy, at most :data:`ANSWER_TOKENS` tokens, the same prompt but for the facts' dates;
    the two in turn, which first alternating from scenario to scenario. A reply is right
    when it names every current value given as an expression and no stale one (a reply that
    names the old value to say it changed counts as wrong: the rule is strict).
    """
    core = services.core
    if core is None:
        raise SystemExit("the chat core is not open (open_services(..., llm=True))")
    request = ChatRequest.checked(
        conversation_id="probe",
        user_id=USER,
        message=scenario.probe,
        options=ReplyOptions(temperature=0.0, seed=0, max_tokens=ANSWER_TOKENS),
    )
    prepared = core.preview(request)
    info = core.models.resolve(prepared.model)
    kwargs = core.models.call_options(info, request.options, prepared.prompt.budget.reserve)
    llm = core.models.chat_model(info)
    prompts = {"dated": prepared.messages, "undated": undated(prepared.messages)}
    current = [e for e in scenario.current if e.cosine is None]
    result: dict[str, Any] = {}
    for name in alternated(list(prompts), order):
        nanoseconds, answer = timed(llm.invoke, prompts[name], **kwargs)
        reply = message_text(answer)
        named = [e.label() for e in current if e.pattern().search(reply)]
        stale = [
            e.label() for e in scenario.stale if e.cosine is None and e.pattern().search(reply)
        ]
        result[name] = {
            "reply": reply,
            "current_named": named,
            "stale_named": stale,
            "right": len(named) == len(current) and not stale,
            "seconds": nanoseconds / 1e9,
        }
    run.progress(
        f"{scenario.name} answer: "
        + ", ".join(f"{n} {'right' if result[n]['right'] else 'wrong'}" for n in prompts)
    )
    return result
