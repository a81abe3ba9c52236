"""The update suite's data: scripted conversations and what the user's facts must be after them.

Each :class:`Scenario` is one user's conversations, in order, each a few turns (user first,
then alternating), and the expected outcome: the facts that must be current at the end
(``current``) and the values that must be gone (``stale``: superseded, forgotten, or never to
be saved) from the end of a given conversation on. People, places and firms are invented.

Half the scenarios state things plainly ("We moved to Quenmouth last weekend"), so only the
extractor can learn and update them; the other half ask in so many words ("Remember that
...", "Forget that ...") or test what must not be taken for a request. ``bench_updates.py``
reports the two halves apart.

An :class:`Expect` is a regular expression matched case-insensitively at word boundaries
(``"Ana"`` does not match "Anna"; ``"(?<!not )Anna"`` skips "Ana, not Anna"), or, with
``cosine``, a sentence that a fact matches when their cosine reaches it (all-MiniLM-L6-v2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Expect:
    """A fact looked for in the user's facts.

    Attributes:
        phrase: A regular expression (case aside, at word boundaries), or with ``cosine``
            a sentence.
        cosine: Match by cosine from this value instead of by the expression.
        step: For a stale value: the conversation (from 0) from whose end on it must be
            gone; ``-1``: the last one.
    """

    phrase: str
    cosine: float | None = None
    step: int = -1

    def pattern(self) -> re.Pattern[str]:
        """The expression, at word boundaries, case aside."""
        return re.compile(rf"\b(?:{self.phrase})\b", re.IGNORECASE)

    def label(self) -> str:
        """How a report names it."""
        return f"~{self.phrase!r}@{self.cosine}" if self.cosine else repr(self.phrase)


@dataclass(frozen=True)
class Scenario:
    """One user's conversations and the facts expected after them (see the module docstring)."""

    name: str
    kind: Literal["plain", "explicit"]
    topic: str
    probe: str
    conversations: tuple[tuple[str, ...], ...]
    current: tuple[Expect, ...] = ()
    stale: tuple[Expect, ...] = ()


def _scenario(
    name: str,
    kind: Literal["plain", "explicit"],
    topic: str,
    probe: str,
    conversations: tuple[tuple[str, ...], ...],
    current: tuple[str | Expect, ...] = (),
    stale: tuple[str | Expect, ...] = (),
) -> Scenario:
    """A scenario; a bare string is an expression, stale from the last conversation on."""
    last = len(conversations) - 1

    def expect(item: str | Expect, stale_one: bool) -> Expect:
        found = Expect(item) if isinstance(item, str) else item
        if stale_one and found.step < 0:
            return Expect(found.phrase, found.cosine, last)
        return found

    return Scenario(
        name,
        kind,
        topic,
        probe,
        conversations,
        tuple(expect(item, False) for item in current),
        tuple(expect(item, True) for item in stale),
    )


PLAIN = [
    _scenario(
        "move_city",
        "plain",
        "move",
        "Can you suggest a nice walk near where I live?",
        (
            (
                "Finally got the keys to my new flat in Halvorsby! It's small but has a balcony.",
                "Congratulations! A balcony is a great perk. How's the neighbourhood?",
                "Quiet, lots of bakeries. I live right next to the canal.",
                "That sounds lovely for evening walks.",
            ),
            (
                "Big change: we moved to Quenmouth last weekend, my partner got a job there.",
                "That's a big move! How are you finding it?",
                "I miss the canal, but Quenmouth has the sea, so I can't complain.",
                "The sea is a fine trade.",
            ),
        ),
        current=("Quenmouth",),
        stale=("Halvorsby",),
    ),
    _scenario(
        "move_twice",
        "plain",
        "move",
        "Which town do I live in these days?",
        (
            (
                "I've been living in Tarsella for six years now, it's where I grew up.",
                "Six years is a long time. What do you like most about it?",
                "My favourite café there is run by an old friend.",
                "A friend's café is the best kind of local spot.",
            ),
            (
                "I moved to Pellingham in January for a new contract.",
                "How is Pellingham treating you?",
                "Rainy, but the rent is cheaper.",
                "Cheaper rent makes up for a lot of rain.",
            ),
            (
                "Guess what, another move: I live in Vossberg now, closer to my parents.",
                "That must be nice for family visits.",
                "It is, my mum comes over every Sunday.",
                "Sunday visits sound lovely.",
            ),
        ),
        current=("Vossberg",),
        stale=(Expect("Tarsella", step=1), Expect("Pellingham", step=2)),
    ),
    _scenario(
        "move_keeps_dog",
        "plain",
        "move",
        "Where could I take my dog this weekend?",
        (
            (
                "My beagle Biscuit is the best part of my day.",
                "Beagles are wonderful company. How old is he?",
                "Four. I've lived in Caldreth since university, and he knows every street.",
                "He must have his favourite routes by now.",
            ),
            (
                "We packed up and moved to Dunmire, Biscuit is sniffing every corner.",
                "A new house is a big adventure for a dog.",
                "The garden in Dunmire is twice the size, so he's thrilled.",
                "More garden, more happy beagle.",
            ),
        ),
        current=("Dunmire", "Biscuit"),
        stale=("Caldreth",),
    ),
    _scenario(
        "job_change",
        "plain",
        "job",
        "How should I prepare for my next week at work?",
        (
            (
                "Long shift today, I work as a pharmacist at the Tidewell Clinic.",
                "That sounds tiring. Do you like it?",
                "Mostly, but the weekend shifts are rough.",
                "Weekend shifts can wear anyone down.",
            ),
            (
                "I've got news: I'm now a data analyst at Copperline Logistics, since Monday.",
                "Congratulations on the new role!",
                "Thanks, it's all spreadsheets and delivery routes, I love it.",
                "It sounds like a good fit.",
            ),
        ),
        current=("data analyst|Copperline",),
        stale=("pharmacist|Tidewell",),
    ),
    _scenario(
        "job_promotion",
        "plain",
        "job",
        "What should I focus on in my role this quarter?",
        (
            (
                "I'm a junior designer at Brightfern Studio, mostly doing packaging.",
                "Packaging design is a great place to learn. How's the team?",
                "My boss Ilse is very patient with me.",
                "A patient boss makes a big difference.",
            ),
            (
                "I got promoted! I'm the lead designer at Brightfern Studio now.",
                "Congratulations, that's wonderful news!",
                "Ilse said I earned it.",
                "You clearly did.",
            ),
        ),
        current=("lead designer", "Ilse"),
        stale=("junior designer",),
    ),
    _scenario(
        "new_partner",
        "plain",
        "relationship",
        "Any date ideas for me and my partner?",
        (
            (
                "My boyfriend Rafferty and I are going hiking in the Wyndale hills on Saturday.",
                "That sounds like a great day out.",
                "He always packs way too many snacks.",
                "Better too many than too few.",
            ),
            (
                "Rafferty and I broke up last month, it was mutual.",
                "I'm sorry to hear that. How are you doing?",
                "Better now. I'm seeing someone new, Kenji, he's a chef.",
                "I'm glad things are looking up.",
            ),
        ),
        current=("Kenji",),
        stale=("boyfriend,? Rafferty|Rafferty,? (?:is )?my boyfriend",),
    ),
    _scenario(
        "got_married",
        "plain",
        "relationship",
        "What could I plan for my wife's birthday?",
        (
            (
                "My fiancée Odile wants a small wedding by the lake.",
                "A lakeside wedding sounds beautiful.",
                "We've been engaged since last spring.",
                "Plenty of time to plan, then.",
            ),
            (
                "Odile and I got married in June! She's officially my wife now.",
                "Congratulations to you both!",
                "The lake was perfect, only twenty guests.",
                "Small weddings are often the best.",
            ),
        ),
        current=("wife|married",),
        stale=("fianc[eé]e|engaged",),
    ),
    _scenario(
        "mushrooms",
        "plain",
        "preference",
        "What should I cook for dinner tonight?",
        (
            (
                "Please no mushroom recipes, I can't stand mushrooms.",
                "Noted, I'll skip them. How about a lentil stew?",
                "Lentils are great.",
                "Lentil stew it is.",
            ),
            (
                "Funny thing: I tried mushrooms again at a friend's dinner and now I love them.",
                "What a turnaround!",
                "Yes, mushroom risotto is my new favourite.",
                "Risotto is a great way to enjoy them.",
            ),
        ),
        current=("risotto|love (?:them|mushrooms)",),
        stale=("(?:can't|cannot) stand mushrooms|hate mushrooms|dislike mushrooms",),
    ),
    _scenario(
        "coffee_to_tea",
        "plain",
        "preference",
        "What should I drink to wake up in the morning?",
        (
            (
                "I can't function without my two cups of coffee every morning.",
                "Coffee is a popular way to start the day. How do you take it?",
                "Black, no sugar.",
                "Simple and strong.",
            ),
            (
                "I quit coffee three weeks ago, I only drink green tea now.",
                "How has the switch been?",
                "My sleep is so much better.",
                "Better sleep is a great reward.",
            ),
        ),
        current=("green tea",),
        stale=("cups of coffee|coffee every morning|(?:drink|need|love) (?:black )?coffee",),
    ),
    _scenario(
        "trip_changed",
        "plain",
        "plan",
        "What should I pack for my summer trip?",
        (
            (
                "I'm planning a trip to Thornquay in August with my cousin Yusra.",
                "That sounds exciting. What do you want to see?",
                "We want to see the lighthouse festival.",
                "A lighthouse festival sounds charming.",
            ),
            (
                "The festival was called off, so we're going to Esterholm in August instead.",
                "Esterholm is a good alternative. Any plans there?",
                "Yusra found a cheap cabin there for the same week.",
                "A cabin sounds cosy.",
            ),
        ),
        current=("Esterholm",),
        stale=("Thornquay",),
    ),
    _scenario(
        "sister_ana",
        "plain",
        "correction",
        "My sister is visiting, any ideas for what we could do?",
        (
            (
                "My sister Anna is visiting from Norwen next week.",
                "How nice! What are you planning?",
                "Probably the botanical garden, she loves plants.",
                "A botanical garden is perfect for a plant lover.",
            ),
            (
                "Small correction from before: actually it's Ana, not Anna. One n.",
                "Got it, Ana with one n.",
                "She's fussy about it. She arrives on Thursday.",
                "I hope you have a lovely visit.",
            ),
        ),
        current=("Ana",),
        stale=("(?<!not )Anna",),
    ),
    _scenario(
        "birthday_may",
        "plain",
        "correction",
        "When is my son's birthday, and what party should I plan?",
        (
            (
                "My son Bram turns 9 on 14 March, I need party ideas.",
                "Nine is a fun age. What does he like?",
                "He's obsessed with trains.",
                "A train-themed party could be a hit.",
            ),
            (
                "Sorry, I got that wrong earlier: Bram's birthday is on 14 May, not March.",
                "No problem, 14 May it is.",
                "So I have more time to plan.",
                "Extra time always helps.",
            ),
        ),
        current=("14 May|May 14",),
        stale=("(?<!not )March",),
    ),
    _scenario(
        "dog_age",
        "plain",
        "correction",
        "Is my dog too old to learn new tricks?",
        (
            (
                "Our dog Pepper is 3 and still chews every shoe in the house.",
                "Chewing is common at that age. Have you tried chew toys?",
                "We have a whole basket of them, she ignores it.",
                "Some dogs just prefer shoes.",
            ),
            (
                "Correction: Pepper is actually 5 years old, not 3. I always mix it up.",
                "Thanks for clarifying.",
                "She still acts like a puppy though.",
                "Some dogs stay playful for life.",
            ),
        ),
        current=("5|five",),
        stale=("Pepper is (?:3|three)|(?:3|three)[- ]years?[- ]old",),
    ),
    _scenario(
        "two_hobbies",
        "plain",
        "unrelated",
        "What could I do on my free evenings this week?",
        (
            (
                "Tuesday nights I play chess at the Kestrelby library club.",
                "Chess clubs are a great way to improve.",
                "I'm rated about 1500, nothing fancy.",
                "That's a solid rating.",
            ),
            (
                "I started bouldering at the Graventon climbing gym, my forearms are destroyed.",
                "Bouldering is tough on the forearms at first.",
                "I go twice a week with a coworker.",
                "Having a climbing partner helps.",
            ),
        ),
        current=("chess", "boulder(?:ing)?|climbing"),
    ),
    _scenario(
        "two_pets",
        "plain",
        "unrelated",
        "How do I keep my pets entertained while I'm at work?",
        (
            (
                "My cat Miso knocked a plant off the shelf again.",
                "Cats and shelves, a classic combination.",
                "She's a grey tabby, very dramatic.",
                "Tabbies often are.",
            ),
            (
                "We adopted a puppy called Tofu! Miso is not impressed yet.",
                "Congratulations on the puppy!",
                "Tofu is a corgi mix.",
                "Corgi mixes are full of energy.",
            ),
        ),
        current=("Miso", "Tofu"),
    ),
    _scenario(
        "two_siblings",
        "plain",
        "unrelated",
        "What could I get my siblings for the holidays?",
        (
            (
                "My brother Marek just opened a bike shop in Rillmouth.",
                "That's exciting for him!",
                "I helped him paint the sign.",
                "A family effort.",
            ),
            (
                "My sister Solveig passed her vet exams, she'll work at a clinic in Sablewick.",
                "Congratulations to her!",
                "We're all so proud.",
                "You have every reason to be.",
            ),
        ),
        current=("Marek", "Solveig"),
    ),
]

EXPLICIT = [
    _scenario(
        "save_colon",
        "explicit",
        "save",
        "What should I get my wife for our anniversary?",
        (
            (
                "Remember: my wife is Ana.",
                "Got it, I'll remember that your wife is Ana.",
                "Thanks. Our anniversary is coming up.",
                "How exciting!",
            ),
            (
                "I need a gift idea. She likes old maps.",
                "An antique map of a place that matters to you both could be lovely.",
            ),
        ),
        current=("wife is Ana",),
    ),
    _scenario(
        "save_move_update",
        "explicit",
        "move",
        "Can you suggest a nice walk near where I live?",
        (
            (
                "Please remember that I live in Marrowick.",
                "Noted, you live in Marrowick.",
                "It's a small town, but I like it.",
                "Small towns have their charm.",
            ),
            (
                "Remember that I've moved to Lindqvale.",
                "Noted, Lindqvale it is.",
                "The commute is much shorter now.",
                "A shorter commute is a great win.",
            ),
        ),
        current=("Lindqvale",),
        stale=("Marrowick",),
    ),
    _scenario(
        "save_correction",
        "explicit",
        "correction",
        "What could I give my niece for her first school day?",
        (
            (
                "Remember that my niece is called Lucja.",
                "Noted.",
                "She's starting school in September.",
                "That's a big step.",
            ),
            (
                "Actually, remember that my niece is Lucia, not Lucja, I misspelled it.",
                "Thanks, Lucia it is.",
            ),
        ),
        current=("Lucia",),
        stale=("(?<!not )Lucja",),
    ),
    _scenario(
        "save_and_plain",
        "explicit",
        "unrelated",
        "Can you suggest a dinner to fuel my training?",
        (
            (
                "Keep in mind that I'm allergic to shellfish.",
                "Noted, no shellfish.",
                "Even a little shrimp paste makes me ill.",
                "I'll be careful with sauces too.",
            ),
            (
                "I've been training for the Esterholm half marathon, ten weeks to go.",
                "Good luck with the training!",
                "I run four times a week.",
                "That's a solid schedule.",
            ),
        ),
        current=("shellfish", "marathon"),
    ),
    _scenario(
        "save_locker_code",
        "explicit",
        "update",
        "What's my gym locker code?",
        (
            (
                "Note this down: my gym locker code is 4417.",
                "Noted.",
                "I always forget it after the holidays.",
                "Now you won't have to.",
            ),
            (
                "New code for the gym locker: 5820. Remember it.",
                "Got it, 5820.",
            ),
        ),
        current=("5820",),
        stale=("4417",),
    ),
    _scenario(
        "save_refers_back",
        "explicit",
        "save",
        "When is my flight again?",
        (
            (
                "My flight to Fairlow is on 3 October. Remember this.",
                "Noted: Fairlow, 3 October.",
                "Window seat, as always.",
                "The best seat.",
            ),
            (
                "Can you help me make a packing list for a week away?",
                "Sure: clothes for the weather, chargers, toiletries, documents.",
                "It'll be chilly there, I think.",
                "Then pack a warm jacket.",
            ),
        ),
        current=("Fairlow",),
    ),
    _scenario(
        "save_job_update",
        "explicit",
        "job",
        "How can I make my workday less tiring?",
        (
            (
                "Remember that I work at Norquist Bakery.",
                "Noted.",
                "I do the early shift, four in the morning.",
                "That's an early start.",
            ),
            (
                "Please remember that I now work at the Kestrelby library instead of the bakery.",
                "Noted, the Kestrelby library.",
                "Much better hours.",
                "Good for your sleep.",
            ),
        ),
        current=("library",),
        stale=("Norquist",),
    ),
    _scenario(
        "forget_smoking",
        "explicit",
        "forget",
        "Any tips to sleep better after my shifts?",
        (
            (
                "I work night shifts at the Caldreth hospital, so my sleep is a mess.",
                "Night shifts are hard on sleep.",
                "And I smoke a few cigarettes a day, trying to cut down.",
                "Cutting down is a good step.",
            ),
            (
                "Please forget that I smoke.",
                "Done.",
                "I'd rather not have that on record.",
                "Understood.",
            ),
        ),
        current=("night shifts?",),
        stale=("smok(?:e|es|ing)|cigarettes?",),
    ),
    _scenario(
        "forget_rowing_club",
        "explicit",
        "forget",
        "What sport could I try next?",
        (
            (
                "I'm a member of the Dunmire rowing club, we train at dawn.",
                "Dawn training takes dedication.",
                "My coach is called Ottilie.",
                "Sounds like a good coach.",
            ),
            (
                "Forget about my rowing club membership. I quit last week.",
                "Understood.",
            ),
        ),
        stale=("Dunmire|member of the rowing club",),
    ),
    _scenario(
        "forget_vegetarian",
        "explicit",
        "forget",
        "What should I cook for dinner tonight?",
        (
            (
                "I'm vegetarian, so no meat suggestions please.",
                "Noted. How about a chickpea curry?",
                "Sounds good.",
                "Enjoy!",
            ),
            (
                "You don't need to remember that I'm vegetarian anymore. I eat fish again.",
                "Got it.",
                "Salmon is my favourite.",
                "Salmon is versatile.",
            ),
        ),
        current=("fish|salmon",),
        stale=("vegetarian",),
    ),
    _scenario(
        "forget_delete_fact",
        "explicit",
        "forget",
        "Can you help me plan the holidays?",
        (
            (
                "My ex-husband Femi moved to Ostwick after the divorce.",
                "That must have been a big change.",
                "It was, but we get along fine now.",
                "I'm glad to hear that.",
            ),
            (
                "Delete the fact that my ex-husband lives in Ostwick.",
                "Done.",
            ),
        ),
        stale=("Femi|Ostwick",),
    ),
    _scenario(
        "forget_address",
        "explicit",
        "forget",
        "Can you help me write a delivery note?",
        (
            (
                "My home address is 12 Rook Lane, in case you need it for delivery notes.",
                "Noted.",
                "The blue door, not the green one.",
                "Good to know.",
            ),
            (
                "Remove my address from your memory, please.",
                "Done.",
            ),
        ),
        stale=("Rook Lane",),
    ),
    _scenario(
        "forget_password_hint",
        "explicit",
        "forget",
        "I can't log in to my account, can you help?",
        (
            (
                "Remember that my password hint is blue heron.",
                "Noted.",
                "It's from my favourite painting.",
                "A memorable choice.",
            ),
            (
                "Stop remembering my password hint.",
                "Done.",
            ),
        ),
        stale=("heron",),
    ),
    _scenario(
        "question_not_save",
        "explicit",
        "not a save",
        "What's my sister's name?",
        (
            (
                "My sister Priyanka teaches piano in Fairlow.",
                "Piano teachers are treasures.",
                "Her students adore her.",
                "I can imagine.",
            ),
            (
                "Do you remember my sister's name? I can't recall if I told you.",
                "You mentioned her before: Priyanka.",
                "Right, thanks.",
                "You're welcome.",
            ),
        ),
        current=("Priyanka",),
        stale=(
            Expect("Do you remember my sister's name?", cosine=0.8, step=1),
            Expect("remember|recall", step=1),
        ),
    ),
    _scenario(
        "not_a_save",
        "explicit",
        "not a save",
        "What car do I drive?",
        (
            (
                "I don't remember that movie's title, the one with the lighthouse keeper.",
                "Could it be a recent film? Do you recall any actors?",
                "No idea. Also, please save this file as csv when you export the table.",
                "I can't export files, but you can save it as CSV from your spreadsheet.",
            ),
            (
                "Remember that my car is a green Vespera.",
                "Noted, a green Vespera.",
            ),
        ),
        current=("Vespera",),
        stale=(
            Expect("I don't remember that movie's title", cosine=0.8, step=0),
            Expect("csv|remember", step=0),
        ),
    ),
    _scenario(
        "explicit_and_plain",
        "explicit",
        "unrelated",
        "What could I plan for my daughter's birthday?",
        (
            (
                "For future reference, my daughter Mia turns 7 in May.",
                "Noted.",
                "She wants a unicorn cake.",
                "A classic choice.",
            ),
            (
                "Mia just started ballet lessons at the Wyndale studio.",
                "How lovely!",
                "She practises in the living room every evening.",
                "Dedication already.",
            ),
        ),
        current=("7|seven", "ballet"),
    ),
]

SCENARIOS: dict[str, Scenario] = {s.name: s for s in PLAIN + EXPLICIT}
#: The smoke run: two plain (a move, a correction), two explicit (an update, a forget).
QUICK = ("move_city", "sister_ana", "save_move_update", "forget_smoking")
