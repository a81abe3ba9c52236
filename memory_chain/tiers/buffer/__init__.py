"""Tier 1: working memory, an in-process cache of each conversation's last turns.

:class:`TurnBuffer` (:mod:`.cache`) keeps the last ``max_turns`` turns of at most
``max_conversations`` conversations (least recently used evicted first), with each
conversation's metadata. It is a cache of tier 2: :class:`BufferChatMessageHistory`
(:mod:`.history`) fills it from SQL on a miss and writes every new turn through to SQL before
caching it, so losing the buffer (a restart, an eviction) loses nothing.

Reads return ready-made LangChain messages (built once, when a turn enters the buffer), which
keeps a read to a dictionary lookup and a list copy. An entry may also cache the conversation's
tier-2 summary state (:class:`CachedSummary`: the running summary and the last summarized
turn), so that a request on a cached conversation reads no SQL at all; consolidation updates it
when it stores a summary.

Example:
    >>> from memory_chain.tiers.buffer import BufferChatMessageHistory, TurnBuffer
    >>> buffer = TurnBuffer(max_turns=10, max_conversations=100)
    >>> history = BufferChatMessageHistory(buffer, "conv-1")  # no SQL: a plain buffer
    >>> history.add_user_message("hi")
    >>> [m.content for m in history.messages]
    ['hi']
"""

from memory_chain.tiers.buffer.cache import CachedSummary, TurnBuffer
from memory_chain.tiers.buffer.history import BufferChatMessageHistory, TurnSource, load_into

__all__ = ["BufferChatMessageHistory", "CachedSummary", "TurnBuffer", "TurnSource", "load_into"]
