"""Reading LoCoMo-format files: conversations, sessions, questions and their evidence.

LoCoMo (Maharana et al., 2024) is a list of samples, each with a ``conversation`` of
``session_<n>`` turn lists (``{speaker, dia_id, text}``, some with a ``blip_caption`` of a
shared photo) and their ``session_<n>_date_time``, and ``qa`` items
(``{question, answer, evidence: [dia_id, ...], category}``). A few evidence ids in the
published files are malformed (``"D8:6; D9:17"``, ``"D:11:26"``, ``"D30:05"``): they are
repaired when the turn they name exists, and skipped (and counted) when it does not.

Example:
    >>> samples, repairs = load_locomo("locomo.json")  # doctest: +SKIP
    >>> samples[0].turns[0].content
    'Caroline: Hey Mel! Good to see you! How have you been?'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_chain.errors import InvalidInputError

#: LoCoMo's question categories (5, adversarial, has no evidence to find and is left out).
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
EVALUATED_CATEGORIES = (4, 1, 2, 3)

_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"^D:?(\d+):0*(\d+)$")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%d %B, %Y", "%Y-%m-%d")
#: Turns of a session are this far apart (the file dates sessions, not turns).
TURN_SPACING = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    """One turn of a LoCoMo conversation.

    Attributes:
        dia_id: Its id in the file (``"D<session>:<turn>"``).
        speaker: Who said it.
        text: What was said.
        caption: The caption of a photo shared with it, if any.
        timestamp: The session's date plus :data:`TURN_SPACING` per earlier turn.
    """

    dia_id: str
    speaker: str
    text: str
    caption: str | None
    timestamp: datetime

    @property
    def said(self) -> str:
        """What the speaker said: the text, and the photo's caption."""
        shared = f" [shares a photo: {self.caption}]" if self.caption else ""
        return f"{self.text}{shared}"

    @property
    def content(self) -> str:
        """The turn as stored: ``"<speaker>: <text>"``, and the photo's caption."""
        return f"{self.speaker}: {self.said}"


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    """A question with the turns that answer it, and its reference answer."""

    question: str
    category: int
    evidence: tuple[str, ...]
    answer: str = ""


@dataclass(slots=True)
class LocomoSample:
    """One conversation and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: list[LocomoTurn]
    questions: list[LocomoQuestion]


@dataclass(slots=True)
class EvidenceRepairs:
    """What was done to malformed evidence ids.

    Attributes:
        repaired: Ids rewritten to a turn that exists (``"D:11:26"`` → ``"D11:26"``).
        skipped: Ids naming no turn of the conversation, left out.
        questions_without_evidence: Evaluated-category questions left with no evidence
            (not asked).
        examples: A few of the rewrites and skips, for the report.
    """

    repaired: int = 0
    skipped: int = 0
    questions_without_evidence: int = 0
    examples: list[str] = field(default_factory=list)


def parse_session_date(value: str) -> datetime:
    """A LoCoMo session date (``"1:56 pm on 8 May, 2023"``) as an aware UTC datetime.

    Raises:
        InvalidInputError: If the date has none of the known forms.
    """
    cleaned = " ".join(value.split())
    for form in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, form).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise InvalidInputError(
        f"unrecognized session date {value!r}: expected e.g. '1:56 pm on 8 May, 2023'"
    )


def _sessions(conversation: dict[str, Any]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    numbers = sorted(
        int(match.group(1))
        for key in conversation
        if (match := _SESSION.match(key)) and isinstance(conversation[key], list)
    )
    for number in numbers:
        yield number, conversation[f"session_{number}"]


def _turns(sample_id: str, conversation: dict[str, Any]) -> list[LocomoTurn]:
    turns: list[LocomoTurn] = []
    for number, session in _sessions(conversation):
        raw_date = conversation.get(f"session_{number}_date_time")
        if not isinstance(raw_date, str):
            raise InvalidInputError(
                f"{sample_id}: session_{number} has no session_{number}_date_time"
            )
        start = parse_session_date(raw_date)
        for position, item in enumerate(session):
            try:
                speaker, dia_id = str(item["speaker"]), str(item["dia_id"])
                text = str(item.get("text") or "")
            except (KeyError, TypeError) as exc:
                raise InvalidInputError(
                    f"{sample_id}: session_{number} turn {position + 1} needs 'speaker', "
                    "'dia_id' and 'text'"
                ) from exc
            caption = item.get("blip_caption")
            turns.append(
                LocomoTurn(
                    dia_id=dia_id,
                    speaker=speaker,
                    text=text,
                    caption=str(caption) if caption else None,
                    timestamp=start + position * TURN_SPACING,
                )
            )
    return turns


def repair_evidence(raw: list[Any], known: set[str], repairs: EvidenceRepairs) -> tuple[str, ...]:
    """Evidence ids that name a turn of the conversation, repaired where possible."""
    found: list[str] = []
    for value in raw:
        for part in re.split(r"[;,\s]+", str(value).strip()):
            if not part:
                continue
            match = _EVIDENCE.match(part)
            fixed = f"D{int(match.group(1))}:{int(match.group(2))}" if match else part
            if fixed not in known:
                repairs.skipped += 1
                repairs.examples.append(f"skipped {value!r}")
                continue
            if fixed != str(value):
                repairs.repaired += 1
                repairs.examples.append(f"{value!r} -> {fixed!r}")
            if fixed not in found:
                found.append(fixed)
    return tuple(found)


def load_locomo(path: str | Path) -> tuple[list[LocomoSample], EvidenceRepairs]:
    """Read a LoCoMo-format file.

    Args:
        path: The JSON file (a list of samples, as ``locomo10.json``).

    Returns:
        The samples (adversarial questions and questions without evidence left out) and
        what was done to malformed evidence ids.

    Raises:
        InvalidInputError: If the file is not LoCoMo-format JSON.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path} as JSON: {exc}") from exc
    if not isinstance(data, list):
        raise InvalidInputError(f"{path}: expected a JSON list of LoCoMo samples")
    repairs = EvidenceRepairs()
    samples: list[LocomoSample] = []
    for position, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("conversation"), dict):
            raise InvalidInputError(f"{path}: sample {position + 1} has no 'conversation' object")
        conversation = item["conversation"]
        sample_id = str(item.get("sample_id") or f"sample-{position + 1}")
        turns = _turns(sample_id, conversation)
        known = {turn.dia_id for turn in turns}
        questions: list[LocomoQuestion] = []
        for qa in item.get("qa") or []:
            category = int(qa.get("category", 0))
            if category not in EVALUATED_CATEGORIES:
                continue
            evidence = repair_evidence(list(qa.get("evidence") or []), known, repairs)
            if not evidence:
                repairs.questions_without_evidence += 1
                continue
            answer = str(qa.get("answer", ""))
            questions.append(LocomoQuestion(str(qa["question"]), category, evidence, answer))
        speakers = (
            str(conversation.get("speaker_a", "speaker A")),
            str(conversation.get("speaker_b", "speaker B")),
        )
        samples.append(LocomoSample(sample_id, speakers, turns, questions))
    return samples, repairs
