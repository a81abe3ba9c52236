"""The ``tags`` of a tier-3 point: what kind of turn it is, by simple rules on its text.

Tags are a pure function of a turn's role and content, so they are the same whoever computes
them (the backfill when it files the point, retrieval when it filters items found in tier 2),
and a reindex reproduces them. A turn gets any of:

* ``question``: it asks something (ends with a question mark, or opens with a question word);
* ``code``: it holds code (a fenced block, or lines that read like a program);
* ``technical``: it talks about software or systems (a vocabulary of technical terms);
* ``fact``: a user asked for something to be remembered ("remember that ...":
  :func:`~memory_chain.intent.asks_to_remember`).

Example:
    >>> turn_tags("user", "How do I fix this Python ImportError?")
    ('question', 'technical')
"""

from __future__ import annotations

import re

from memory_chain.intent import asks_to_remember

#: Every tag a turn can get, in the order they are listed.
TAGS = ("question", "code", "technical", "fact")

_QUESTION_WORDS = re.compile(
    r"^\s*(who|whom|whose|what|when|where|which|why|how|is|are|am|was|were|do|does|did|can|"
    r"could|should|would|will|shall|may|might|have|has|had)\b",
    re.IGNORECASE,
)
_CODE = re.compile(
    r"```|^\s{4,}\S|^\s*(def|class|import|from \S+ import|return|function|const|let|var|"
    r"public|private|SELECT|INSERT|UPDATE|CREATE|#include)\b|[;{}]\s*$|=>|\w+\([^)]*\)\s*[:{]",
    re.MULTILINE,
)
_TECHNICAL = re.compile(
    r"\b(api|apis|http|https|url|json|yaml|sql|sqlite|postgres(ql)?|database|server|servers|"
    r"docker|kubernetes|python|javascript|typescript|java|rust|golang|linux|bash|shell|git|"
    r"github|compiler|compile|function|functions|variable|variables|library|libraries|"
    r"package|packages|install|error|errors|exception|bug|bugs|debug|deploy|deployment|"
    r"endpoint|query|queries|index|cpu|gpu|memory leak|thread|threads|async|regex|"
    r"algorithm|latency|cache|config|configuration|dependency|dependencies|framework|"
    r"importerror|stack trace|traceback|model|embedding|embeddings|vector|vectors)\b",
    re.IGNORECASE,
)


def turn_tags(role: str, content: str) -> tuple[str, ...]:
    """The tags of a turn (see the module docstring), in :data:`TAGS` order."""
    found: list[str] = []
    stripped = content.strip()
    if stripped.endswith("?") or (
        _QUESTION_WORDS.match(stripped) and len(stripped) < 300 and "\n" not in stripped
    ):
        found.append("question")
    if _CODE.search(content):
        found.append("code")
    if _TECHNICAL.search(content):
        found.append("technical")
    if asks_to_remember(role, content):
        found.append("fact")
    return tuple(found)
