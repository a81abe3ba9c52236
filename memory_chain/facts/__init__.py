"""What memory knows about each user: facts, with their history.

* :mod:`.model`: a fact (text, kind, origin, validity) and a draft of one;
* :mod:`.reconcile`: whether a new fact is one memory has, replaces one, or is new;
* :mod:`.outdated`: recalled turns that stated a fact since retired, noted or left out.

They are stored in tier 2 (:mod:`memory_chain.tiers.sql.facts`: add, edit, dismiss, list,
rank for a prompt); this package is what they are, below every tier.

The memory manager files a user's explicit requests ("remember that ...", "forget that
...": :mod:`memory_chain.intent`) as they are stored, and puts the user's current facts in
every prompt (:mod:`memory_chain.chat.budget`); ``/v1/facts`` lists, adds, edits and
dismisses them.
"""
