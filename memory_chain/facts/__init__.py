"""What memory knows about each user: facts, kept in tier 2 with their history.

* :mod:`.model`: a fact (text, kind, origin, validity) and a draft of one;
* :mod:`.intent`: whether a message asks memory to remember or to forget something;
* :mod:`.reconcile`: whether a new fact is one memory has, replaces one, or is new;
* :mod:`.store`: the facts in SQL (add, edit, dismiss, list, rank for a prompt).

The memory manager files a user's explicit requests ("remember that ...", "forget that
...") as they are stored, and puts the user's current facts in every prompt
(:mod:`memory_chain.chat.budget`); ``/v1/facts`` lists, adds, edits and deletes them.
"""
