"""Facts learnt at consolidation: one call of the summary model per range, in JSON.

After a range of turns is summarized, :class:`FactExtractor` asks the summary model for the
lasting facts about the user in it ("My daughter Mia turns 7 in May."), each with its kind,
its subject when it is one of the things a person has one of at a time (:data:`SUBJECTS`:
"home", "job", "partner", ...; a newer fact of that subject supersedes the older), the turn
it comes from and, when it updates one of the user's known facts (shown to the model as
F1 … F8, the most relevant first), that fact's label.

Small local models are the case this is built for:

* **Structured output**: the reply is constrained by a JSON schema (:func:`extraction_schema`)
  sent as Ollama's ``format``; the embedded llama.cpp server turns it into a grammar, so the
  reply is JSON even from a 0.5B model. A reply cut short by its token limit still gives
  the facts it completed (:func:`parse_extraction` salvages them).
* **Within the model's window**: the prompt is counted with the model's counter and sent
  with ``num_ctx`` (Ollama's default context would cut it silently); a range too long for
  one call is read in parts, and an over-long turn as an excerpt.
* **Only what the user said**: questions, duplicates and facts whose names, numbers or
  words are not in the user's turns are dropped (:mod:`memory_chain.facts.grounding`); a
  vague subject is dropped.
* **Not what the user asked to forget**: a user turn that is a request to forget
  (:func:`memory_chain.intent.parse_intent`: "Please forget that I smoke") is no source of
  facts, nor is the message a bare "forget that" points back to, and a fact of the range
  that a later request in it names is dropped; so nothing the request dismissed (or would
  have) comes back from the range. The whole turn is left out, a statement beside the
  request too ("... anymore. I eat fish again."): the request decides what the turn is.
  A request to *remember* stays a source: the manager filed its text, without a subject
  or kind, as it was stored; the same fact extracted again adds no row but gives the saved
  one its subject and kind (:meth:`FactStore.add
  <memory_chain.tiers.sql.facts.FactStore.add>`), so that a later value of the subject
  ("I've moved to Porto") supersedes it. A model restates the request ("I remember that
  my car is ...") or copies it ("Remember: my car is ..."): from a request's turn, the fact
  is what the request names, and a restatement naming none ("I remember it.") is dropped.
  The known facts shown are those memory held before the range: not the facts the
  range's requests saved, which the model would name as replaced by their own
  restatement (a request to remember a correction, "my niece is Lucia, not Lucja", then
  names the old value).
* **Reconciliation**: the model's "replaces F2" is trusted only when the two facts are
  similar (:data:`REPLACES_COSINE`); otherwise :meth:`FactStore.add
  <memory_chain.tiers.sql.facts.FactStore.add>` decides by its deterministic rule.

One separate call rather than one returning the summary and the facts together: measured with
the embedded 0.5B on 20 ranges, the combined call failed to parse 3 times and recalled
fewer facts; with the 1.5B on 24 LoCoMo ranges (``bench_extraction.py --calls both``) it
parsed every time and took 0.52x the two calls' time, but its facts scored F1 0.25 against
0.44. A failure costs the range its facts, never its summary.

Example:
    >>> extractor = FactExtractor(models.summary, facts, model=lambda: None)  # doctest: +SKIP
    >>> found = extractor.extract("ana", turns)  # doctest: +SKIP
    >>> extractor.file("ana", "trip", found)  # doctest: +SKIP
"""

from memory_chain.extraction.extractor import DEFAULT_REPLY_TOKENS, KNOWN_FACTS, FactExtractor
from memory_chain.extraction.prompt import (
    EXTRACTION_SYSTEM,
    MAX_FACT_TEXT,
    MAX_FACTS,
    SUBJECTS,
    build_messages,
    extraction_schema,
    split_parts,
)
from memory_chain.extraction.reply import ExtractedFact, ExtractionError, parse_extraction
from memory_chain.facts.reconcile import REPLACES_COSINE

__all__ = [
    "DEFAULT_REPLY_TOKENS",
    "EXTRACTION_SYSTEM",
    "KNOWN_FACTS",
    "MAX_FACTS",
    "MAX_FACT_TEXT",
    "REPLACES_COSINE",
    "SUBJECTS",
    "ExtractedFact",
    "ExtractionError",
    "FactExtractor",
    "build_messages",
    "extraction_schema",
    "parse_extraction",
    "split_parts",
]
