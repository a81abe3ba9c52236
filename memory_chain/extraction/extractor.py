"""The fact extractor: one call of the summary model per range (or part of one), filed.

See :mod:`memory_chain.extraction` for the design.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_ollama import ChatOllama

from memory_chain.chat.models import DEFAULT_WINDOW, ModelInfo
from memory_chain.errors import MemoryChainError
from memory_chain.extraction.prompt import build_messages, extraction_schema, split_parts
from memory_chain.extraction.reply import ExtractedFact, ExtractionError, parse_extraction
from memory_chain.facts.grounding import names
from memory_chain.facts.model import Fact, FactDraft
from memory_chain.facts.reconcile import REPLACES_COSINE, SAME_COSINE, normalized
from memory_chain.facts.rules import FactChange
from memory_chain.intent import parse_intent
from memory_chain.messages import message_text
from memory_chain.schemas import Turn
from memory_chain.tiers.sql.facts import FactStore
from memory_chain.tokens import EstimatingCounter, TokenCount

logger = logging.getLogger(__name__)

#: Known facts shown to the model (F1 … F8), the most relevant to the range first.
KNOWN_FACTS = 8
#: Tokens the reply may take (about six facts of 200 characters with their fields).
DEFAULT_REPLY_TOKENS = 640
#: Tokens a chat template adds around each message.
_MESSAGE_TOKENS = 8
#: Fewest tokens of turns worth a call.
_MIN_PART_TOKENS = 64


class FactExtractor:
    """Learns facts about users from consolidated ranges of turns (see the module docstring).

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> reply = '{"facts": [{"text": "I live in Porto.", "kind": "biography", '
        >>> reply += '"subject": "home city", "turn": 1, "replaces": ""}]}'
        >>> llm = GenericFakeChatModel(messages=iter([AIMessage(reply)]))
        >>> extractor = FactExtractor(llm, facts)  # doctest: +SKIP
        >>> [f.text for f in extractor.extract("ana", turns)]  # doctest: +SKIP
        ['I live in Porto.']

    Args:
        llm: The summary model. A ``ChatOllama`` gets the schema as ``format`` and the
            options below; another chat model gets the same prompt, unconstrained.
        facts: The users' facts (their profile, and where new facts go).
        model: The summary model's window and counter (``None``: a 4,096-token window and
            a counter that counts high).
        reply_tokens: Most tokens of a reply (``num_predict``).
    """

    def __init__(
        self,
        llm: BaseChatModel,
        facts: FactStore,
        *,
        model: Callable[[], ModelInfo | None] | None = None,
        reply_tokens: int = DEFAULT_REPLY_TOKENS,
    ) -> None:
        if reply_tokens < 64:
            raise ValueError("reply_tokens must be at least 64: a fact takes about 60 tokens")
        self.llm = llm
        self.facts = facts
        self.model = model or (lambda: None)
        self.reply_tokens = reply_tokens

    def learn(self, user_id: str, conversation_id: str, turns: Sequence[Turn]) -> list[FactChange]:
        """Extract the facts of ``turns`` and file them (:meth:`extract`, then :meth:`file`)."""
        return self.file(user_id, conversation_id, self.extract(user_id, turns))

    def extract(self, user_id: str, turns: Sequence[Turn]) -> list[ExtractedFact]:
        """The facts about ``user_id`` in ``turns`` (one model call per part of them).

        Requests to forget, and what they name, are left out (see
        :mod:`memory_chain.extraction`).

        Raises:
            ExtractionError: The model could not be called, or a reply was not facts.
        """
        requests = _requests(turns)
        said = _range_of(turns)
        turns = [turn for turn in turns if turn.turn_number not in requests.unread]
        user_text = "\n".join(turn.content for turn in turns if turn.role == "user")
        if not user_text.strip():
            return []
        info = self._model_info()
        window = info.window if info else DEFAULT_WINDOW
        counter: TokenCount = info.counter if info else EstimatingCounter()
        known = self._known(user_id, user_text, said)
        labels = [f"F{number}" for number in range(1, len(known) + 1)]
        fixed = sum(counter.count(message_text(m)) for m in build_messages(known, []))
        room = window - self.reply_tokens - fixed - 4 * _MESSAGE_TOKENS
        if room < _MIN_PART_TOKENS:
            raise ExtractionError(
                f"the model's window of {window} tokens leaves no room for the turns: give "
                "the summary model a larger window (llm_context_windows)"
            )
        schema = extraction_schema(labels)
        found: list[ExtractedFact] = []
        seen: set[str] = set()
        for part in split_parts(turns, room, counter):
            reply = self._call(build_messages(known, part), schema, window)
            shown = [turn for turn, _ in part]
            for parsed in parse_extraction(reply, shown, labels):
                fact = requests.unechoed(parsed)
                if fact is None:
                    logger.debug("not learnt, the request to remember echoed: %r", parsed.text)
                elif requests.name(fact):
                    logger.debug("not learnt, asked to forget later: %r", fact.text)
                elif normalized(fact.text) not in seen:
                    seen.add(normalized(fact.text))
                    found.append(fact)
        return self._trusted(found, dict(zip(labels, known, strict=True)))

    def file(
        self,
        user_id: str,
        conversation_id: str,
        found: Sequence[ExtractedFact],
        *,
        stored_only: bool = True,
    ) -> list[FactChange]:
        """Add the facts, origin ``"extracted"``, each pointing to its turn and valid from it.

        Each is decided by the one rulebook (:mod:`memory_chain.facts.rules`): a trusted
        ``replaces`` that is no longer current (superseded meanwhile) leaves the decision to
        the subject rule there. Facts of one call never supersede one another by subject:
        said together, they hold together; a correction within the range is the model's to
        label (``replaces``). All are filed in one transaction with the check that the
        conversation still exists (:meth:`FactStore.add_said
        <memory_chain.tiers.sql.facts.FactStore.add_said>`): a conversation purged, or a
        user erased, while the model was reading the range gets none of them (nor does a
        conversation that was never stored, unless ``stored_only`` is ``False``).
        """
        said = [
            (
                FactDraft(
                    fact.text,
                    kind=fact.kind,
                    origin="extracted",
                    subject=fact.subject,
                    conversation_id=conversation_id,
                    turns=(fact.turn, fact.turn),
                    valid_from=fact.said_at,
                ),
                fact.replaces.id if fact.replaces is not None else None,
            )
            for fact in found
        ]
        changes = (
            self.facts.add_said(user_id, conversation_id, said, stored_only=stored_only)
            if said
            else []
        )
        if changes is None:
            logger.info("%s is not stored (purged?): its facts are not filed", conversation_id)
            return []
        if changes:
            counts = Counter(change.action for change in changes)
            logger.info(
                "facts of %s: %s",
                conversation_id,
                ", ".join(f"{count} {action}" for action, count in sorted(counts.items())),
            )
        return changes

    # -- steps -----------------------------------------------------------------------------

    def _model_info(self) -> ModelInfo | None:
        try:
            return self.model()
        except MemoryChainError as exc:
            logger.info("the summary model's window is unknown (%s): assuming %d", exc, 4096)
            return None

    def _known(self, user_id: str, user_text: str, said: _Range | None) -> list[Fact]:
        """The user's current facts most relevant to what they said in the range.

        As memory held them before the range: a fact filed from the range's own turns (a
        "remember that ..." saved as it was said) is not shown. Shown, it is the one the
        model's restatement of the request names as replaced (the same turn: it corrects
        nothing), and the older value the request corrects goes unnamed.
        """
        vector = self._embed([user_text[:4_000]])
        query = vector[0] if vector is not None else None
        ranked = self.facts.profile(user_id, query, limit=2 * KNOWN_FACTS)
        before = [r.fact for r in ranked if said is None or not said.holds(r.fact)]
        return before[:KNOWN_FACTS]

    def _embed(self, texts: list[str]) -> np.ndarray | None:
        """Unit vectors of ``texts`` (rows), or ``None`` without an embedding model."""
        if self.facts.embed is None or not texts:
            return None
        try:
            matrix = np.asarray(self.facts.embed(texts), dtype=np.float32)
        except MemoryChainError as exc:
            logger.info("facts not embedded for extraction: %s", exc)
            return None
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1, norms)

    def _call(self, messages: list[BaseMessage], schema: dict[str, Any], window: int) -> str:
        kwargs: dict[str, Any] = {}
        if isinstance(self.llm, ChatOllama):
            options = {"temperature": 0, "num_ctx": window, "num_predict": self.reply_tokens}
            kwargs = {"format": schema, "options": options}
        try:
            reply = self.llm.invoke(messages, **kwargs)
        except Exception as exc:  # any model or transport failure
            raise ExtractionError(
                f"the summary model did not answer ({type(exc).__name__}: {exc})"
            ) from exc
        return message_text(reply)

    def _trusted(
        self, found: list[ExtractedFact], by_label: dict[str, Fact]
    ) -> list[ExtractedFact]:
        """``found``, with ``replaces`` set where the model's label is trusted."""
        claims = [
            (i, by_label[f.label])
            for i, f in enumerate(found)
            if f.label is not None and f.label in by_label
        ]
        if not claims:
            return found
        vectors = self._embed([found[i].text for i, _ in claims] + [f.text for _, f in claims])
        if vectors is None:
            return found  # no similarity to check the claim with: the store's rule decides
        taken: set[str] = set()
        for position, (index, old) in enumerate(claims):
            cosine = float(vectors[position] @ vectors[len(claims) + position])
            # Below the threshold the facts are about different things; at SAME_COSINE the
            # new one says the same as the old, and the store keeps the old as it is.
            if REPLACES_COSINE <= cosine < SAME_COSINE and old.id not in taken:
                taken.add(old.id)
                found[index] = replace(found[index], replaces=old)
            else:
                logger.debug(
                    "not trusted: %r replaces %r (%.2f)", found[index].text, old.text, cosine
                )
        return found


@dataclass(frozen=True, slots=True)
class _Range:
    """The turns of one conversation a range spans (to tell the facts filed from it)."""

    conversation_id: str
    first: int
    last: int

    def holds(self, fact: Fact) -> bool:
        """Whether ``fact`` was first filed from a turn of this range."""
        return (
            fact.conversation_id == self.conversation_id
            and fact.turns is not None
            and self.first <= fact.turns[0] <= self.last
        )


def _range_of(turns: Sequence[Turn]) -> _Range | None:
    """The range ``turns`` span, if they are of one conversation."""
    if not turns or len({turn.conversation_id for turn in turns}) > 1:
        return None
    numbers = [turn.turn_number for turn in turns]
    return _Range(turns[0].conversation_id, min(numbers), max(numbers))


#: A model's restatement of a request to remember, in the first person ("I remember that
#: ...", "I'll keep in mind that ..."): what follows is the fact.
_ECHO = re.compile(
    r"(?:i|i'll|i\s+will|i'm\s+going\s+to)\s+"
    r"(?:remember|memori[sz]e|keep\s+in\s+mind|bear\s+in\s+mind|note|make\s+a\s+note\s+of"
    r"|(?:not|never)\s+forget|won't\s+forget)"
    r"(?:\s+that)?[\s,:]+",
    re.I,
)
#: What remains of a restatement that names no fact ("I remember it.").
_NOTHING = re.compile(r"(?:it|this|that|these|those|them)?\W*", re.I)


@dataclass(frozen=True, slots=True)
class _Requests:
    """The requests in a range.

    Attributes:
        unread: The turns not to learn from: the requests to forget, and the message a
            bare "forget that" points back to.
        named: Each request to forget's turn and what it names.
        saves: The turns that ask to remember.
    """

    unread: frozenset[int]
    named: tuple[tuple[int, str], ...]
    saves: frozenset[int]

    def name(self, fact: ExtractedFact) -> bool:
        """Whether a later request of the range asks to forget ``fact``."""
        return any(turn > fact.turn and names(text, fact.text) for turn, text in self.named)

    def unechoed(self, fact: ExtractedFact) -> ExtractedFact | None:
        """``fact`` as the fact a request to remember states.

        From "Remember that my car is a green Vespera" a model gives "I remember that my
        car is a green Vespera." or the request again ("Remember: my car is ..."): the fact
        is what the request names (the same words as the saved fact, which it then gives
        its subject and kind); "I remember it." names none (``None``). A fact of another
        turn is as given.
        """
        if fact.turn not in self.saves:
            return fact
        text = fact.text.strip()
        intent = parse_intent(text)
        if intent is not None and intent.action == "save" and intent.text:
            rest = intent.text.strip()
        elif (echo := _ECHO.match(text)) is not None:
            rest = text[echo.end() :]
        else:
            return fact
        if _NOTHING.fullmatch(rest):
            return None
        return replace(fact, text=rest[0].upper() + rest[1:])


def _requests(turns: Sequence[Turn]) -> _Requests:
    """The requests among ``turns`` (:func:`~memory_chain.intent.parse_intent`)."""
    unread: set[int] = set()
    named: list[tuple[int, str]] = []
    saves: set[int] = set()
    previous: Turn | None = None
    for turn in turns:
        if turn.role != "user":
            continue
        intent = parse_intent(turn.content)
        if intent is not None and intent.action == "forget":
            unread.add(turn.turn_number)
            if intent.text:
                named.append((turn.turn_number, intent.text))
            elif intent.refers_back and previous is not None:
                unread.add(previous.turn_number)
        elif intent is not None:
            saves.add(turn.turn_number)
        previous = turn
    return _Requests(frozenset(unread), tuple(named), frozenset(saves))
