"""Doors for the frameworks LangChain users build with today, one module per host framework.

* :mod:`.middleware`: :class:`~memory_chain.integrations.middleware.MemoryMiddleware`, a
  LangChain 1.x ``AgentMiddleware`` for ``langchain.agents.create_agent``: memory's budgeted
  context before each model call, the exchange stored after the run.

Each module imports its framework; importing this package imports none of them.
"""
