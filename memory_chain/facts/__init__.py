"""What memory knows about each user: facts, with their history.

* :mod:`.model`: a fact (text, kind, origin, validity, store key, the conversations it was
  said in) and a draft of one;
* :mod:`.checks`: what a fact's text, kind and store key must be, at every door;
* :mod:`.rules`: the one rulebook: what a new fact does to the user's facts (same, filled,
  added, superseded, corrected, history, past), what a "forget ..." request names, and how
  the facts a deleted fact superseded are re-linked;
* :mod:`.reconcile`: the similarity tests it applies (the same fact; two values of a subject);
* :mod:`.outdated`: recalled turns that stated a fact since retired, noted or left out.

They are stored in tier 2 (:mod:`memory_chain.tiers.sql.facts`: add, edit, dismiss, list,
rank for a prompt), which carries the rulebook's decisions out; this package is what they
are and how they change, below every tier.

The memory manager files a user's explicit requests ("remember that ...", "forget that
...": :mod:`memory_chain.intent`) as they are stored, and puts the user's current facts in
every prompt (:mod:`memory_chain.chat.budget`); ``/v1/facts`` lists, adds, edits and
dismisses them.
"""
