"""The benchmarks' synthetic text and points, seeded so that every run sees the same data.

- Chat turns and questions from templates (:func:`chat_sentences`, :func:`chat_turn`,
  :func:`questions`): what a personal assistant's users say (flights, recipes, budgets), for
  the benchmarks that embed text or run the chat chain. A conversation can have a *theme*
  (:func:`make_theme`): its turns then mostly name the same city, person, food..., so that
  retrieval has something to find.
- :class:`ZipfCorpus`: sentences over a Zipf-distributed vocabulary of synthetic words, for
  keyword search, where term selectivity is what matters.
- :func:`turn_point`: a tier-3 point shaped like a stored turn (the payload tier 3 writes).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory_chain.tiers.vectors.index import TurnPayload, VectorPoint, point_id

# -- chat text ------------------------------------------------------------------------------

CITIES = ["Lisbon", "Osaka", "Denver", "Nairobi", "Oslo", "Bogotá", "Krakow", "Hanoi", "Perth"]
DAYS = ["Monday", "Tuesday", "Friday", "the weekend", "3 May", "next week", "the 14th"]
PEOPLE = ["Ana", "my sister", "Dr. Patel", "the landlord", "Tom", "my manager", "Yuki"]
FOODS = ["lentil soup", "pad thai", "sourdough", "a vegan lasagna", "shakshuka", "ramen"]
TOPICS = [
    "the quarterly budget",
    "my knee injury",
    "the Python migration",
    "our wedding playlist",
    "the tax return",
    "learning Spanish",
    "the garden irrigation",
    "the job interview",
    "my sleep schedule",
    "the SQL index",
]
THINGS = ["passport", "laptop charger", "insurance card", "spare keys", "receipt", "tent"]
#: The words a template can name, by its placeholder.
CHOICES = {
    "city": CITIES,
    "day": DAYS,
    "person": PEOPLE,
    "food": FOODS,
    "topic": TOPICS,
    "thing": THINGS,
}

USER_TEMPLATES = [
    "Can you remind me what time my flight to {city} leaves on {day}?",
    "I told {person} I'd call back about {topic}, what did we agree on?",
    "What was the recipe for {food} you suggested last time?",
    "I'm allergic to peanuts, so please keep that in mind for {food}.",
    "Let's pick up where we left off on {topic}.",
    "Where did I say I put my {thing} before the trip to {city}?",
    "Summarize what we discussed about {topic} in two sentences.",
    "Is it a good idea to move the meeting with {person} to {day}?",
    "How many hours ahead is {city} compared to here?",
    "My budget for {topic} is {n} dollars, does that still work?",
    "Please write a short message to {person} saying I'll be late on {day}.",
    "I finished {n} pages of the report on {topic} today.",
    "Do I need a visa for {city} if I stay {n} days?",
    "What should I pack for {city} besides my {thing}?",
    "Could you explain {topic} like I'm five?",
    "Remind me to buy ingredients for {food} before {day}.",
]
ASSISTANT_TEMPLATES = [
    "Your flight to {city} leaves at {hour}:{minute:02d} on {day}; check-in closes 45 minutes "
    "earlier.",
    "You agreed with {person} to revisit {topic} on {day} and to share the draft beforehand.",
    "For {food} you need about {n} minutes; I suggested doubling the garlic last time.",
    "Noted: no peanuts. I'll swap them for toasted sunflower seeds in {food}.",
    "Last time we covered the first {n} points of {topic}; the open question was the deadline.",
    "You said the {thing} was in the blue backpack, front pocket, before the {city} trip.",
    "In short: {topic} is on track, and the remaining risk is the {day} deadline.",
    "Moving the meeting with {person} to {day} works if the report is ready by then.",
    "{city} is {n} hours ahead, so a call at 9 in the morning here is late afternoon there.",
    "With {n} dollars for {topic}, you stay within the limit we set last month.",
    "Here is a draft: 'Hi {person}, I'm running late on {day}, sorry, I'll be there soon.'",
    "Nice progress: {n} pages on {topic} puts you ahead of the plan we made.",
    "For a stay of {n} days in {city}, most passports need no visa, but check the embassy site.",
    "Besides your {thing}, pack layers: {city} evenings get cold on {day}.",
    "Think of {topic} as a to-do list that someone else can read and check off.",
    "I'll remind you on {day} to buy what you need for {food}.",
]
QUESTION_TEMPLATES = [
    "When does my flight to {city} leave?",
    "What did I agree with {person} about {topic}?",
    "Which recipe for {food} did you give me?",
    "Where did I leave my {thing}?",
    "What was my budget for {topic}?",
    "Do I need a visa for {city}?",
    "What did we decide for {day}?",
    "What do I need to remember about {topic}?",
    "Can you remind me what {person} said about {day}?",
    "How long does {food} take to cook?",
]


def make_theme(rng: random.Random) -> dict[str, str]:
    """What one conversation is mostly about: a city, a day, a person, a food, a topic, a thing."""
    return {key: rng.choice(words) for key, words in CHOICES.items()}


def fill(template: str, rng: random.Random, theme: dict[str, str] | None = None) -> str:
    """A template filled with random words, or mostly (70 %) with the theme's words."""

    def pick(key: str) -> str:
        if theme is not None and rng.random() < 0.7:
            return theme[key]
        return rng.choice(CHOICES[key])

    words = {key: pick(key) for key in CHOICES}
    return template.format(
        **words,
        n=rng.randint(2, 60),
        hour=rng.randint(5, 22),
        minute=rng.choice([0, 5, 15, 20, 30, 45, 55]),
    )


def chat_turn(role: str, rng: random.Random, theme: dict[str, str] | None = None) -> str:
    """One user or assistant turn."""
    templates = USER_TEMPLATES if role == "user" else ASSISTANT_TEMPLATES
    return fill(rng.choice(templates), rng, theme)


def chat_sentences(count: int, rng: random.Random) -> list[tuple[str, str]]:
    """``count`` distinct (role, text) chat turns, alternating user and assistant."""
    seen: set[str] = set()
    turns: list[tuple[str, str]] = []
    while len(turns) < count:
        role = "user" if len(turns) % 2 == 0 else "assistant"
        text = chat_turn(role, rng)
        if text not in seen:
            seen.add(text)
            turns.append((role, text))
    return turns


def question(rng: random.Random, theme: dict[str, str] | None = None) -> str:
    """A question about something said earlier."""
    return fill(rng.choice(QUESTION_TEMPLATES), rng, theme)


def questions(count: int, rng: random.Random) -> list[str]:
    """``count`` questions on random words."""
    return [question(rng) for _ in range(count)]


# -- keyword-search text --------------------------------------------------------------------

VOCABULARY_SIZE = 5_000
ZIPF_EXPONENT = 1.0
#: Words of rank below this are "common" (stop-word-like); "content" queries avoid them.
COMMON_WORDS = 100


def make_vocabulary(size: int, seed: int) -> list[str]:
    """Distinct pronounceable words; shorter words get the more frequent (lower) ranks."""
    rng = random.Random(seed)
    onsets = [*"bcdfghjklmnprstvwz", "br", "ch", "cl", "dr", "fl", "gr", "pl", "sh", "st", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
    codas = ["", "", "", "n", "r", "l", "m", "x", "k"]
    words: list[str] = []
    seen: set[str] = set()
    syllables = 1
    attempts = 0
    while len(words) < size:
        word = "".join(
            rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syllables)
        )
        attempts += 1
        if word not in seen:
            seen.add(word)
            words.append(word)
        # Move to longer words once short ones are mostly used up.
        if attempts > 40 * (len(words) + 1) or (syllables == 1 and len(words) >= 150):
            syllables += 1
            attempts = 0
    return words


@dataclass
class ZipfCorpus:
    """Seeded sentences and queries over a Zipf-distributed vocabulary of synthetic words."""

    words: list[str]
    cum_weights: list[float]

    @classmethod
    def build(cls, seed: int) -> ZipfCorpus:
        """The corpus of ``seed`` (the same words and weights every time)."""
        words = make_vocabulary(VOCABULARY_SIZE, seed)
        weights = [1.0 / (rank**ZIPF_EXPONENT) for rank in range(1, len(words) + 1)]
        return cls(words, list(itertools.accumulate(weights)))

    def sentence(self, rng: random.Random) -> str:
        """8-30 words drawn by frequency, capitalized, with a full stop."""
        count = rng.randint(8, 30)
        chosen = rng.choices(self.words, cum_weights=self.cum_weights, k=count)
        chosen[0] = chosen[0].capitalize()
        return " ".join(chosen) + "."

    def query(self, rng: random.Random, kind: str) -> str:
        """2-3 distinct words: by frequency (``zipf``) or uniformly past the common words."""
        count = rng.randint(2, 3)
        chosen: list[str] = []
        while len(chosen) < count:
            if kind == "zipf":
                word = rng.choices(self.words, cum_weights=self.cum_weights)[0]
            else:
                word = self.words[rng.randrange(COMMON_WORDS, len(self.words))]
            if word not in chosen:
                chosen.append(word)
        return " ".join(chosen)

    def expected_share(self, rank: int) -> float:
        """Probability that one drawn word has this rank."""
        previous = self.cum_weights[rank - 2] if rank > 1 else 0.0
        return (self.cum_weights[rank - 1] - previous) / self.cum_weights[-1]


# -- tier-3 points --------------------------------------------------------------------------


def turn_point(
    conversation_id: str,
    user_id: str,
    turn_number: int,
    vector: Sequence[float],
    content: str,
    timestamp: datetime,
    *,
    role: str | None = None,
    tokens: int | None = None,
) -> VectorPoint:
    """A point as tier 3 stores a turn (its id derived from the conversation and turn).

    Args:
        conversation_id: The turn's conversation.
        user_id: Its owner.
        turn_number: Its number in the conversation.
        vector: The embedding.
        content: The text.
        timestamp: When it was said.
        role: "user" or "assistant"; by default even turn numbers are the user's.
        tokens: Its token count; by default its word count.
    """
    payload = TurnPayload(
        conversation_id=conversation_id,
        user_id=user_id,
        turn_number=turn_number,
        role=role or ("user" if turn_number % 2 == 0 else "assistant"),
        content=content,
        timestamp=timestamp,
        tokens=len(content.split()) if tokens is None else tokens,
    )
    return VectorPoint(point_id(user_id, conversation_id, turn_number), vector, payload)
