"""A chat turn with memory, whatever door it came through.

- :mod:`~memory_chain.chat.request`: what a client asks (:class:`ChatRequest`), checked once.
- :mod:`~memory_chain.chat.reconcile`: the client's history against the stored turns.
- :mod:`~memory_chain.chat.budget`: a prompt that fits the model's context window.
- :mod:`~memory_chain.chat.sections`: each part of that prompt filled within its room.
- :mod:`~memory_chain.chat.lines`: the prompt's words: instructions, headings, memory's lines.
- :mod:`~memory_chain.chat.excerpt`: long texts cut around what matched.
- :mod:`~memory_chain.chat.models`: the model a request names, its window and counter.
- :mod:`~memory_chain.chat.core`: :class:`ChatCore`, the one place a chat turn is answered.

The OpenAI-compatible route, the LCEL chain (:mod:`memory_chain.chain`, served by LangServe)
and the context preview map their input to a :class:`ChatRequest` and call the core.
"""
