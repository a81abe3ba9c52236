"""Explicit memory requests: whether a user message asks to remember or to forget, and what.

This is a deterministic first pass, run on every stored user message: it catches the requests
a user addresses to the assistant in so many words ("remember that my wife is Ana", "forget my
old address"). Facts a user merely states ("I'm vegan") are the LLM extractor's job.

Rules:

* **A request is an imperative addressed to the assistant**, at the start of a sentence after
  optional fillers ("please", "hey", "also", "and", "by the way", a name and a comma), or
  introduced by a request frame: "can/could/would/will you …", "I want/need you to …",
  "make sure to …", "you can …". Save verbs: "remember", "memorize", "don't/never forget",
  "keep/bear in mind", "make/take a note (of)", "note/jot/write … down", "save/store/add/commit
  … to (your) memory", "for future reference". Forget verbs: "forget (about)", "stop
  remembering", "don't remember", "no need to remember", and "delete/remove/erase/…" only with
  a memory object ("the fact that …", "what you know about …", "… from your memory"). So
  "I remember …", "I don't remember …", "do you remember …", "he told me to remember that",
  "I forgot …" and "save this file as csv" are not requests: their verb is not imperative, or
  not about memory.
* **A request may follow what it is about** in the same sentence ("My seat is 14C, remember
  that."), or a leading clause ("If I mention Bob, remember that he's my brother." saves "If I
  mention Bob, he's my brother."); a leading clause that reports speech ("she said, remember
  …") or quotes is not the user's request, and a single word before it is an interjection
  ("Important: remember that …").
* **Imperatives are not questions**: "Remember when we …?", "Remember this?" are not requests.
  A request phrased as a question ("Can you remember that I'm vegan?") is one when its content
  is a statement; for "remember"/"forget", which can also ask about recall ("Can you remember
  my birthday?", "Can you remember that?"), the content must be a clause, and "this/that" needs
  "please"/"for me" or something said before it in the message.
* **Not a fact about the user, so not a save**: "remember to buy milk" (a task: the assistant
  schedules nothing; the extractor may keep it as a plan), "remember what/when/how …" and
  "remember the time we …" (recalling, not telling), "remember me".
* **"forget it" is refers-back only on its own**: "Forget it, I'll do it myself" means "never
  mind" and is not a request; "forget that, …" likewise (a colon makes what follows the
  content).
* **The text** is what the request names, in the user's words: without the request phrase, a
  complementizer "that" (kept when it is a determiner: "remember that restaurant"), "about",
  surrounding quotes, and trailing "please"/"for me"/", ok?" (for forgets also "anymore").
  The end punctuation belongs to whatever it ends: kept when the content ends the sentence
  ("my wife is Ana."), dropped with a request phrase that ends it ("My seat is 14C, remember
  that." gives "My seat is 14C"); a final "?" is always the request's.
* **When the request names no content** ("Remember this.", "Don't forget!", "Forget that."):
  the sentences before it in the message (greetings, thanks and questions aside), else those
  after it, are the content. With none, ``refers_back`` is set and the caller uses the
  previous message; a bare "remember"/"don't forget" with nothing around it is not a request.
* The first sentence holding a request decides; a message holding two requests yields the
  first.
* **Speed**: a message without a trigger word (remember, forget, memory, note, mind,
  reference, delete, remove, erase, …) returns at once; otherwise a few anchored matches per
  sentence, linear in the message's length.

The rules, by what they recognise: :mod:`.remember` (save verbs, what is no fact),
:mod:`.forget` (forget verbs, "never mind"), :mod:`.references` (a request that points back),
:mod:`.verbs` (where a request starts: fillers, frames, verbs), :mod:`.sentences` (the sentence
tools they share), :mod:`.phrases` (the pattern pieces they share); :mod:`.parser` puts them
together.

Example:
    >>> parse_intent("My seat is 14C. Remember this.")
    Intent(action='save', text='My seat is 14C.', refers_back=False)
    >>> parse_intent("Please forget that.")
    Intent(action='forget', text='', refers_back=True)
    >>> parse_intent("I don't remember that movie") is None
    True
"""

from memory_chain.intent.parser import asks_to_remember, parse_intent
from memory_chain.intent.request import Action, Intent

__all__ = ["Action", "Intent", "asks_to_remember", "parse_intent"]
