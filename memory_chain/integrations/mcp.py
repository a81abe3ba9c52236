"""memory_chain over the Model Context Protocol: a user's memory as MCP tools and resources.

MCP hosts (desktop assistants, IDEs, Open WebUI, agent frameworks) reach memory through
:func:`build_mcp_server`, a FastMCP server that acts for one user per request:

* **Tools.** ``search_memory`` runs the chat's own retrieval (keyword and semantic search
  over the user's conversations, fused) and adds the user's facts most relevant to the
  query; ``remember`` adds a fact, reconciled with the user's current ones like
  ``POST /v1/facts`` (the same fact again adds nothing, a newer value of the same subject
  supersedes the older); ``list_facts`` lists them (with their history on request);
  ``forget`` dismisses one like ``DELETE /v1/facts/{id}`` (it leaves every prompt, the
  history keeps it). A fact added through ``remember`` has the origin ``explicit``: it is
  what the user (or an agent on the user's behalf) asked memory to keep.
* **Resources.** ``memory://conversations`` lists the user's conversations, most recently
  active first; ``memory://conversations/{conversation_id}`` is one of them with its turns.

Two transports serve it: standard input and output for one user (``memory-chain mcp``,
:mod:`memory_chain.integrations.mcp_stdio`), and streamable HTTP at ``/mcp`` in the API
server, each request as the user its API key names (:mod:`memory_chain.integrations.mcp_http`).

FastMCP calls a plain ``def`` tool on its event loop, so every tool here is ``async`` and runs
its blocking work (SQL, the embedding model) in a worker thread.

Example:
    >>> from memory_chain.integrations.mcp_stdio import serve_stdio  # doctest: +SKIP
    >>> server = build_mcp_server(services, user="ana")  # doctest: +SKIP
    >>> anyio.run(serve_stdio, server)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.lowlevel.server import Server
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from memory_chain.errors import ConversationNotFoundError
from memory_chain.facts.model import MAX_FACT_CHARS, Fact, FactDraft, FactKind
from memory_chain.facts.rules import FactAction
from memory_chain.identity import Caller, identify
from memory_chain.manager import MemoryManager
from memory_chain.schemas import ConversationInfo, MemoryItem, Turn, validate_id
from memory_chain.services import Services
from memory_chain.storable import StorableText

#: Who the server acts for: a user id, or a function returning the current request's user.
UserSource = str | Callable[[], str]

#: Most conversations the ``memory://conversations`` resource lists.
MAX_LISTED_CONVERSATIONS = 200
#: Most turns (the latest) a ``memory://conversations/{id}`` read returns.
MAX_RESOURCE_TURNS = 1000
#: Most facts ``list_facts`` returns (as ``GET /v1/facts`` by default).
MAX_LISTED_FACTS = 200

INSTRUCTIONS = (
    "Long-term memory of the user's conversations. Call search_memory before answering "
    "anything that may depend on what the user said before; call remember when the user "
    "states something lasting about themselves (a preference, a plan, a person, a date); "
    "list_facts and forget manage what is remembered."
)


class _Out(BaseModel):
    """A tool's result, read from the stored objects' attributes."""

    model_config = ConfigDict(from_attributes=True)


class FoundMemory(_Out):
    """What ``search_memory`` found: items best first, the user's relevant facts."""

    items: list[MemoryItem] = Field(description="Turns and summaries, most relevant first.")
    facts: list[MemoryItem] = Field(description="The user's facts, most relevant first.")
    degraded: list[str] = Field(description="Memory tiers that could not answer, and why.")


class FactList(_Out):
    """The user's facts, newest first."""

    facts: list[Fact]


class Remembered(_Out):
    """What ``remember`` did."""

    action: FactAction = Field(
        description="'added'; 'superseded' (added, and `replaced`, an older value of its "
        "subject, no longer holds); 'same' (the user had this fact already: nothing stored); "
        "'filled' (the user had it already; it took the subject or kind it lacked)."
    )
    fact: Fact
    replaced: Fact | None = None


class Forgotten(_Out):
    """The fact ``forget`` dismissed (kept in the history with status 'dismissed')."""

    fact: Fact


class ConversationList(_Out):
    """The user's conversations, most recently active first."""

    conversations: list[ConversationInfo]


class ConversationTurns(_Out):
    """One conversation and its turns, oldest first."""

    conversation: ConversationInfo
    turns: list[Turn]
    omitted_turns: int = Field(description="Earlier turns left out (only the latest are read).")


class MemoryTools:
    """What the MCP tools and resources do, as blocking calls for a given user.

    Args:
        manager: The memory manager of the opened services.
    """

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager

    def search(
        self, user_id: str, query: str, conversation_id: str | None, limit: int
    ) -> FoundMemory:
        """The chat's retrieval for ``query``, and the user's facts most relevant to it.

        Raises:
            ConversationNotFoundError: When ``conversation_id`` names none of the user's.
        """
        if (
            conversation_id is not None
            and self.manager.conversation(validate_id(conversation_id), user_id) is None
        ):
            raise ConversationNotFoundError(conversation_id)
        found = self.manager.find(
            query, user_id=user_id, conversation_id=conversation_id, limit=limit
        )
        facts = self.manager.profile(user_id, found.vector)[:limit]
        return FoundMemory(items=found.items, facts=list(facts), degraded=found.degraded)

    def remember(self, user_id: str, text: str, kind: FactKind, subject: str | None) -> Remembered:
        """Add a fact the user asked to keep, reconciled with their current ones."""
        draft = FactDraft(text, kind=kind, origin="explicit", subject=subject)
        return Remembered.model_validate(self.manager.add_fact(user_id, draft))

    def facts(self, user_id: str, include_history: bool) -> FactList:
        """The user's current facts, and the superseded and dismissed ones on request."""
        include = ("superseded", "dismissed") if include_history else ()
        found = self.manager.facts(user_id, include=include, limit=MAX_LISTED_FACTS)
        return FactList(facts=found)

    def forget(self, user_id: str, fact_id: str) -> Forgotten:
        """Dismiss one of the user's facts (dismissing twice is not an error).

        Raises:
            ToolError: When the user has no fact of that id.
        """
        dismissed = self.manager.dismiss_fact(user_id, fact_id)
        if dismissed is None:
            raise ToolError(
                f"fact {fact_id!r} not found: call list_facts (include_history=true for past "
                "ones) for the ids of this user's facts"
            )
        return Forgotten(fact=dismissed)

    def conversations(self, user_id: str) -> ConversationList:
        """The user's conversations, most recently active first."""
        found = self.manager.conversations(user_id, limit=MAX_LISTED_CONVERSATIONS)
        return ConversationList(conversations=found)

    def conversation(self, user_id: str, conversation_id: str) -> ConversationTurns:
        """One of the user's conversations with its latest turns.

        Raises:
            ConversationNotFoundError: When the user has no conversation of that id.
        """
        info = self.manager.conversation(validate_id(conversation_id), user_id)
        if info is None:
            raise ConversationNotFoundError(conversation_id)
        omitted = max(info.turn_count - MAX_RESOURCE_TURNS, 0)
        turns = self.manager.turns(conversation_id, user_id, after=omitted)
        return ConversationTurns(conversation=info, turns=turns, omitted_turns=omitted)


def build_mcp_server(services: Services, *, user: UserSource) -> FastMCP[Any]:
    """A FastMCP server over the opened services' memory (see the module docstring).

    Building it does no I/O beyond FastMCP's own settings (``FASTMCP_*`` variables); it leaves
    the application's logging alone.

    Args:
        services: The opened services (:func:`~memory_chain.services.open_services`; no LLM
            is needed).
        user: The user the server acts for (checked as every door checks a user,
            :func:`~memory_chain.identity.identify`), or a function returning the user of the
            request being served, decided by the transport's own door (called once per tool
            call or resource read).

    Returns:
        The server: run it with :func:`~memory_chain.integrations.mcp_stdio.serve_stdio`, or
        serve it over HTTP
        (:class:`~memory_chain.integrations.mcp_http.StreamableHTTPDoor`).

    Raises:
        InvalidInputError: If ``user`` is a malformed user id.
    """
    if callable(user):
        who = user
    else:
        who = _constant(identify(services.settings, Caller.in_process(user)))
    tools = MemoryTools(services.manager)
    with _logging_left_alone():
        server: FastMCP[Any] = FastMCP("memory_chain", instructions=INSTRUCTIONS)

    @server.tool()
    async def search_memory(
        query: Annotated[str, Field(min_length=1, max_length=2000)],
        conversation_id: str | None = None,
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> Annotated[CallToolResult, FoundMemory]:
        """Search the user's memory: what they said in past conversations, and their facts.

        Args:
            query: What to look for, in words (a question works well).
            conversation_id: Search only this conversation (default: all of the user's).
            limit: Most items, and most facts, returned.
        """
        return await _in_thread(tools.search, who(), query, conversation_id, limit)

    @server.tool()
    async def remember(
        text: Annotated[StorableText, Field(min_length=1, max_length=MAX_FACT_CHARS)],
        kind: FactKind = "other",
        subject: Annotated[StorableText | None, Field(max_length=200)] = None,
    ) -> Annotated[CallToolResult, Remembered]:
        """Remember a fact about the user, a sentence or two ("Prefers window seats.").

        Args:
            text: The fact.
            kind: preference, biography, relationship, plan or other.
            subject: What it is about ("home city"): a newer fact about the same subject
                replaces the older one.
        """
        return await _in_thread(tools.remember, who(), text, kind, subject)

    @server.tool()
    async def list_facts(include_history: bool = False) -> Annotated[CallToolResult, FactList]:
        """List what memory knows about the user, newest first, with each fact's id.

        Args:
            include_history: Also the facts that no longer hold (superseded or forgotten).
        """
        return await _in_thread(tools.facts, who(), include_history)

    @server.tool()
    async def forget(
        fact_id: Annotated[str, Field(pattern="^[0-9a-f]{32}$")],
    ) -> Annotated[CallToolResult, Forgotten]:
        """Forget a fact: it no longer reaches any prompt (its history keeps it).

        Args:
            fact_id: The fact's id, from list_facts.
        """
        return await _in_thread(tools.forget, who(), fact_id)

    @server.resource(
        "memory://conversations",
        name="conversations",
        description="The user's conversations, most recently active first (read one at "
        "memory://conversations/{conversation_id}).",
        mime_type="application/json",
    )
    async def conversations() -> str:
        """The user's conversations."""
        listed = await asyncio.to_thread(tools.conversations, who())
        return listed.model_dump_json()

    @server.resource(
        "memory://conversations/{conversation_id}",
        name="conversation",
        description=f"One of the user's conversations with its turns, oldest first (the "
        f"latest {MAX_RESOURCE_TURNS}).",
        mime_type="application/json",
    )
    async def conversation(conversation_id: str) -> str:
        """One of the user's conversations with its turns."""
        found = await asyncio.to_thread(tools.conversation, who(), conversation_id)
        return found.model_dump_json()

    return server


async def _in_thread(work: Callable[..., BaseModel], *args: Any) -> CallToolResult:
    """``work(*args)`` in a worker thread, as a tool's result: its JSON, as text and structured.

    The tools are annotated ``Annotated[CallToolResult, Model]``: FastMCP publishes the
    model's schema and checks the result with pydantic, and the low-level server passes a
    ready result on as it is. A plain model result would be checked again with
    ``jsonschema.validate``, which checks the schema itself on every call (some 15 ms per call
    with these schemas).
    """
    out = await asyncio.to_thread(work, *args)
    structured = out.model_dump(mode="json")
    text = json.dumps(structured, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structuredContent=structured
    )


def _constant(user_id: str) -> Callable[[], str]:
    return lambda: user_id


def protocol_server(server: FastMCP[Any]) -> Server[Any, Any]:
    """The low-level MCP server under a FastMCP one, for transports FastMCP does not run.

    FastMCP 1.x keeps it private; this is the one place that reads it.
    """
    lowlevel: Server[Any, Any] = server._mcp_server
    return lowlevel


@contextmanager
def _logging_left_alone() -> Iterator[None]:
    """Keep FastMCP's constructor from configuring the application's logging.

    It calls ``logging.basicConfig`` (a stderr handler on the root logger, level INFO), which
    does nothing while the root logger has a handler: a placeholder is put there meanwhile.
    """
    root = logging.getLogger()
    placeholder = logging.NullHandler() if not root.handlers else None
    if placeholder is not None:
        root.addHandler(placeholder)
    try:
        yield
    finally:
        if placeholder is not None:
            root.removeHandler(placeholder)
