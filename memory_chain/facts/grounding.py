"""Whether a fact a model proposes is grounded in what the user said: the checks, by words.

A small model asked for facts about the user also returns the assistant's suggestions, the
user's questions, details of the prompt's worked example, and things nobody said. These
checks keep only facts the user's own words support:

* **not a question**, and not a report of one ("The user asked about bakeries");
* **not a request** to the assistant: a polite imperative with no word about the speaker
  ("Also, please save this file as csv"; "Please no mushrooms, I can't stand them" is a
  fact: :func:`is_request`);
* **not a copied turn**: a "fact" of :data:`MAX_SENTENCES` sentences or more is a turn
  copied whole, greetings and thanks included ("Thanks, Mel! Your words mean a lot. I'll do
  my best."), not a fact (:func:`is_copied_turn`; a reply cut at the length limit is the
  same, checked where it is parsed);
* **not the assistant's words**: a fact that one of the assistant's turns says more of than
  any of the user's ("I can't export files, but you can save it as CSV", the assistant's
  reply, extracted with the user's "save this file as csv" as its support:
  :func:`echoes_assistant`);
* **every name and number in the fact appears in the user's words** (names: capitalized
  words after the first, possessives aside; numbers: digits, with "seven" and "7" alike);
* **most of the fact's content words** match words of the user's, by their stems ("moved" /
  "move", "painting" / "paint"): more than half of them. Measured with the embedded model,
  one matching word let through blends of the user's and the assistant's words ("A small
  one at home sounds lovely", from "a small one at home" and the reply "... sounds
  lovely"). A fact of numbers only needs one.

A fact's subject ("home city", "wife's name") decides which older fact it supersedes, so a
vague one ("user", "info", "preference") would retire unrelated facts: it is dropped. So is
one of which several can hold at once ("hobby", "pet", "friend", "food"): a second hobby is
no newer value of the first. Subjects are compared by :func:`subject_key` (case, articles,
possessives and plurals aside: "The Home Cities" and "home city" are one subject).

A request to forget names the facts holding all its content words (:func:`names`: stems
alike, "smoke" / "smoking", "member" / "membership").

Example:
    >>> said = Evidence.of(["My daughter Mia turns seven in May."])
    >>> grounded("My daughter Mia turns 7 in May.", said)
    True
    >>> grounded("My son Leo turns 7 in May.", said)
    False
    >>> clean_subject("The user's home city"), clean_subject("info"), clean_subject("Hobbies")
    ('home city', None, None)
    >>> subject_key("The Home Cities") == subject_key("home city")
    True
    >>> names("that I smoke", "I quit smoking last year."), names("my address", "I smoke.")
    (True, False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


def _listed(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*|\d+(?:[.,:/]\d+)*", re.UNICODE)
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_QUESTION_START = _listed(
    "who whom whose what when where why how which do does did is are was were am "
    "could would should shall"
)
_REPORTED_QUESTION = re.compile(
    r"\b(?:asked|asks|asking|wonders|wondered|wondering|wants to know|inquired|inquires)\b",
    re.IGNORECASE,
)
#: Sentences from which a proposed fact is a copied turn (a fact is one short sentence,
#: two at most: "I quit my job. I start at Vetra on Monday.").
MAX_SENTENCES = 3
_SENTENCE_END = re.compile(r"([.!?])[\"')\]]*\s+(?=\S)")
_REQUEST_START = re.compile(
    r"(?:(?:also|and|so|now|ok|okay)\b[,\s]+)?(?:please|pls|kindly)\b", re.IGNORECASE
)
_FIRST_PERSON = _listed("i i'm i've i'd i'll me my mine myself we we're we've our ours us")
#: The share of a fact's content words one assistant turn must hold for the fact to be its.
ECHO_SHARE = 0.75
_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
# "one" is left out: it is more often a pronoun than a number.
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(_UNITS.split()) if value >= 2} | {
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "hundred": "100",
}
# Function words, pronouns, the chat's roles and verbs too common to show that a fact comes
# from what was said ("I like music" is not supported by "I like hiking").
STOPWORDS = _listed(
    """
    a an the and or but nor so yet if then than that this these those there here of to in on
    at by for from with about into onto over under after before since until while as per via
    up down out off again also too very just only even still ever never not no yes all any
    both each every few more most other some such own same much many lot lots
    i me my mine myself we us our ours you your yours he him his she her hers it its they them
    their theirs who whom whose what which when where why how
    am is are was were be been being do does did done doing have has had having will would
    shall should can could may might must get gets got getting go goes went going gone make
    makes made like likes liked love loves loved want wants wanted need needs needed really
    thing things something anything stuff way kind sort well now today user users assistant
    i'm i've i'd i'll you're you've it's that's there's let's don't doesn't didn't can't
    won't isn't aren't wasn't weren't haven't hasn't let one
    """
)
#: Subjects that cannot tell which older fact a new one updates: they name no particular
#: thing, or a thing of which several hold at once (a second hobby is not a newer value of the
#: first). Compared by :func:`subject_key`, so the singular covers the plural.
VAGUE_SUBJECTS = _listed(
    """
    user me i myself self person people you fact facts info information detail details
    personal general misc miscellaneous other others unknown none n/a na life chat
    conversation topic topics something thing things stuff note notes preference
    preferences biography relationship relationships plan plans
    hobby pet animal friend like dislike love interest passion favourite favorite child children kid
    sibling relative family cousin colleague coworker neighbour neighbor
    food dish drink snack meal allergy sport activity skill language habit goal trip travel
    event book movie film show music song game
    """
) | frozenset({"family member"})
_SUBJECT_PREFIX = re.compile(
    r"^(?:(?:the\s+)?user['\u2019]?s?\s+|my\s+|the\s+|your\s+|their\s+|his\s+|her\s+)+"
)
_ARTICLES = _listed("a an the")
#: The longest subject kept, in words: a longer one is a sentence, not a subject.
MAX_SUBJECT_WORDS = 5


def words_of(text: str) -> list[str]:
    """The words and numbers of ``text``, in order, as written."""
    return _WORD.findall(text)


def _bare(word: str) -> str:
    return _POSSESSIVE.sub("", word.casefold().replace("\u2019", "'"))


def _number(word: str) -> str | None:
    if word[0].isdigit():
        return re.sub(r"(?<=\d)[,](?=\d{3}\b)", "", word)
    return _NUMBER_WORDS.get(word.casefold())


def same_stem(a: str, b: str) -> bool:
    """Whether two lower-case words share a stem.

    They do when they start with the same five letters, or the shorter one's whole start
    ("move" / "moved", "paint" / "painting", "run" / "running").
    """
    shorter = min(len(a), len(b))
    if shorter < 3:
        return a == b
    need = min(5, shorter)
    return a[:need] == b[:need]


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the user said, as sets of words (made with :meth:`of`).

    Attributes:
        words: Every word, lower case, possessives stripped.
        numbers: Every number, digits only (number words converted).
        content: The content words (no :data:`STOPWORDS`, three letters or more).
    """

    words: frozenset[str]
    numbers: frozenset[str]
    content: tuple[str, ...]

    @classmethod
    def of(cls, texts: Iterable[str]) -> Evidence:
        """The evidence of the user's turns."""
        words: set[str] = set()
        numbers: set[str] = set()
        for text in texts:
            for word in words_of(text):
                number = _number(word)
                if number is not None:
                    numbers.add(number)
                if not word[0].isdigit():
                    words.add(_bare(word))
        content = tuple(sorted(w for w in words if len(w) >= 3 and w not in STOPWORDS))
        return cls(frozenset(words), frozenset(numbers), content)

    def supports(self, word: str) -> bool:
        """Whether a content word of a fact matches one of the user's by its stem."""
        return word in self.words or any(same_stem(word, said) for said in self.content)


def is_question(text: str) -> bool:
    """Whether ``text`` asks something, or reports that someone asked."""
    stripped = text.strip()
    if stripped.endswith("?"):
        return True
    first = words_of(stripped[:40])
    if first and first[0].casefold() in _QUESTION_START:
        return True
    return _REPORTED_QUESTION.search(stripped) is not None


def is_copied_turn(text: str) -> bool:
    """Whether ``text`` has :data:`MAX_SENTENCES` sentences or more: a turn, not a fact.

    A sentence ends at ``.``, ``!`` or ``?`` before a space; not after a short capitalized
    word ("Mr.", "St.", "Dr."), which is an abbreviation more often than a sentence's end.
    """
    stripped = text.strip()
    ends = 0
    for end in _SENTENCE_END.finditer(stripped):
        before = words_of(stripped[: end.start()])
        if end.group(1) == "." and before and len(before[-1]) <= 3 and before[-1][0].isupper():
            continue
        ends += 1
    return ends + 1 >= MAX_SENTENCES


def is_request(text: str) -> bool:
    """Whether ``text`` asks the assistant for something and says nothing of the speaker."""
    if _REQUEST_START.match(text.strip()) is None:
        return False
    return not any(word.casefold() in _FIRST_PERSON for word in words_of(text))


def echoes_assistant(text: str, user_turns: Iterable[str], assistant_turns: Iterable[str]) -> bool:
    """Whether ``text`` is the assistant's words rather than the user's.

    It is when one assistant turn holds :data:`ECHO_SHARE` of its content words (by stem)
    and more of them than any one user turn does.
    """
    wanted = _content_words(text)
    if not wanted:
        return False

    def share(turn: str) -> float:
        have = _content_words(turn)
        return sum(any(same_stem(w, h) for h in have) for w in wanted) / len(wanted)

    theirs = max((share(turn) for turn in assistant_turns), default=0.0)
    ours = max((share(turn) for turn in user_turns), default=0.0)
    return theirs >= ECHO_SHARE and theirs > ours


def grounded(text: str, said: Evidence) -> bool:
    """Whether the user's words support ``text`` (see the module docstring)."""
    numbers = 0
    content = 0
    supported = 0
    for position, word in enumerate(words_of(text)):
        number = _number(word)
        if number is not None:
            if number not in said.numbers:
                return False
            numbers += 1
            continue
        bare = _bare(word)
        if bare in STOPWORDS or len(bare) < 2:
            continue
        if word[0].isupper() and position > 0:
            if bare not in said.words:  # a name is said as it is, or not at all
                return False
            content += 1
            supported += 1
            continue
        if len(bare) < 3:
            continue
        content += 1
        if said.supports(bare):
            supported += 1
        elif position == 0 and word[0].isupper():
            return False  # a name at the start ("Farid plays the cello") must be said too
    if not content:
        return numbers > 0
    return 2 * supported > content


def _trimmed_subject(subject: str) -> str:
    cleaned = " ".join(subject.casefold().replace("_", " ").split()).strip(" .,:;!?\"'")
    return _SUBJECT_PREFIX.sub("", cleaned).strip()


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"  # hobbies, cities
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def subject_key(subject: object) -> str | None:
    """A subject as compared with another: ``None`` when there is none, or it is vague.

    Lower case, without "the user's"/"my", articles, possessives and plural "s"
    ("The user's Children" and "child" are one subject), then :data:`VAGUE_SUBJECTS` out.
    """
    if not isinstance(subject, str):
        return None
    trimmed = _trimmed_subject(subject)
    words = [_bare(word) for word in words_of(trimmed)]
    key = " ".join(_singular(word) for word in words if word not in _ARTICLES)
    if not key or key in VAGUE_SUBJECTS or trimmed in VAGUE_SUBJECTS:
        return None
    return key


def clean_subject(subject: object) -> str | None:
    """A fact's subject, lower case, without "the user's"/"my"; ``None`` when vague."""
    if not isinstance(subject, str):
        return None
    cleaned = _trimmed_subject(subject)
    if not cleaned or subject_key(cleaned) is None:
        return None
    if len(cleaned.split()) > MAX_SUBJECT_WORDS or not any(c.isalpha() for c in cleaned):
        return None
    return cleaned


def _root(word: str) -> str:
    """``word`` without a common ending ("smoking", "smoked", "smokes" give "smok")."""
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3 and not word.endswith("ss"):
            word = word[: -len(ending)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def _content_words(text: str) -> list[str]:
    """The content words and numbers of ``text`` (lower case, no :data:`STOPWORDS`)."""
    found: list[str] = []
    for word in words_of(text):
        number = _number(word)
        if number is not None:
            found.append(number)
            continue
        bare = _bare(word)
        if len(bare) >= 3 and bare not in STOPWORDS:
            found.append(bare)
    return found


def names(request: str, text: str) -> bool:
    """Whether a request ("my address", "that I smoke") names the fact ``text``.

    It does when every content word of the request (numbers included) is in the fact, by
    its stem (:func:`same_stem`, or the same root: "smoke" / "smoking"). A request of
    stop words only names nothing.
    """
    wanted = _content_words(request)
    if not wanted:
        return False
    have = _content_words(text)
    return all(
        any(word == own or same_stem(word, own) or _root(word) == _root(own) for own in have)
        if not word[0].isdigit()
        else word in have
        for word in wanted
    )
