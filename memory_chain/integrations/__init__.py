"""Doors for the frameworks LangChain users build with today, one module per host framework.

* :mod:`.middleware`: :class:`~memory_chain.integrations.middleware.MemoryMiddleware`, a
  LangChain 1.x ``AgentMiddleware`` for ``langchain.agents.create_agent``: memory's budgeted
  context before each model call (within the room the call leaves in the model's window:
  :mod:`.middleware_window`), the exchange stored after the run.
* :mod:`.store`: :class:`~memory_chain.integrations.store.MemoryStore`, a LangGraph
  ``BaseStore``: the users' facts, their conversations (searched by memory's retrieval) and
  the agent's own items, for ``create_agent(store=...)`` and ``runtime.store`` in tools.
* :mod:`.mcp`: an MCP server (the ``mcp`` SDK) with tools to search memory, remember, list
  facts and forget, and the user's conversations as resources; over stdio
  (``memory-chain mcp``, :mod:`.mcp_stdio`) and as streamable HTTP at ``/mcp`` in the server
  (:mod:`.mcp_http`).

Each module imports its framework; importing this package imports none of them.
"""
