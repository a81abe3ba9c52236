"""Users' facts as their own table, the source of truth for what memory knows about a user.

Until now a "fact" was a user turn matched by a regular expression and filed word for word in
a tier-3 collection; ``dismissed_facts`` named those the user deleted. ``facts`` holds each
fact with its kind, origin, source turns, validity and vector (see
:mod:`memory_chain.tiers.sql.facts`).

The turns filed before are carried over: each user turn the old expression matched is read
again with :func:`memory_chain.intent.parse_intent`; a request to remember becomes a
fact (origin ``explicit``; its text is what was asked to be kept, the previous user message
for a bare "remember this"), current, or dismissed if it was. Turns the old expression
matched wrongly ("I don't remember that movie") are not carried over. Vectors are computed
when the facts are first ranked. ``dismissed_facts`` and queued ``forget_fact`` tasks go.
The old tier-3 ``user_facts`` collection is no longer read (``memory-chain reindex`` does not
touch it; drop it by hand if you want the space back).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

import re
import uuid
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

#: The expression facts were filed by until this revision.
_OLD_SAVE = re.compile(
    r"\b(remember (this|that)|please remember|don'?t forget|do not forget|keep in mind|"
    r"note (this|that) down|save this)\b",
    re.IGNORECASE,
)


def upgrade() -> None:
    op.create_table(
        "facts",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("subject", sa.Text),
        sa.Column("origin", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("conversation_id", sa.Text),
        sa.Column("first_turn", sa.Integer),
        sa.Column("last_turn", sa.Integer),
        sa.Column("confidence", sa.Float),
        sa.Column("created_at", sa.TIMESTAMP, nullable=False),
        sa.Column("valid_from", sa.TIMESTAMP, nullable=False),
        sa.Column("invalidated_at", sa.TIMESTAMP),
        sa.Column("superseded_by", sa.Text),
        sa.Column("embedding", sa.LargeBinary),
    )
    op.create_index("idx_facts_user_status", "facts", ["user_id", "status"])
    _carry_over_turn_facts()
    op.execute("DELETE FROM vector_tasks WHERE kind = 'forget_fact'")
    op.drop_table("dismissed_facts")


def _carry_over_turn_facts() -> None:
    from memory_chain.intent import parse_intent

    conn = op.get_bind()
    # Only the turns the old expression could have matched are read (its words, any case).
    words = ("remember", "forget", "keep in mind", "note th", "save this")
    like = " OR ".join(f"lower(t.content) LIKE '%{word}%'" for word in words)
    rows = conn.execute(
        sa.text(
            "SELECT t.conversation_id AS stored, c.user_id AS owner, t.turn_number, "
            "t.content, t.timestamp, d.turn_number AS dismissed "
            "FROM conversation_turns t "
            "JOIN conversations c ON c.conversation_id = t.conversation_id "
            "LEFT JOIN dismissed_facts d ON d.conversation_id = t.conversation_id "
            f"AND d.turn_number = t.turn_number WHERE t.role = 'user' AND ({like})"
        )
    ).all()
    before = sa.text(
        "SELECT content FROM conversation_turns WHERE conversation_id = :stored "
        "AND turn_number < :number AND role = 'user' ORDER BY turn_number DESC LIMIT 1"
    )
    facts = sa.table(
        "facts",
        *(
            sa.column(name)
            for name in (
                "id",
                "user_id",
                "text",
                "kind",
                "origin",
                "status",
                "conversation_id",
                "first_turn",
                "last_turn",
                "created_at",
                "valid_from",
                "invalidated_at",
            )
        ),
    )
    now = datetime.now(UTC).replace(tzinfo=None)
    carried = []
    for row in rows:
        if not _OLD_SAVE.search(row.content):
            continue
        intent = parse_intent(row.content)
        if intent is None or intent.action != "save":
            continue
        text: str | None = intent.text
        if not text and intent.refers_back:
            text = conn.execute(before, {"stored": row.stored, "number": row.turn_number}).scalar()
        if not text:
            continue
        owner = row.owner or ""
        client = row.stored.split("/", 1)[1] if "/" in row.stored else row.stored
        when = row.timestamp or now
        carried.append(
            {
                "id": uuid.uuid4().hex,
                "user_id": owner,
                "text": text.strip()[:2000],
                "kind": "other",
                "origin": "explicit",
                "status": "dismissed" if row.dismissed is not None else "current",
                "conversation_id": client,
                "first_turn": row.turn_number,
                "last_turn": row.turn_number,
                "created_at": when,
                "valid_from": when,
                "invalidated_at": now if row.dismissed is not None else None,
            }
        )
    if carried:
        op.bulk_insert(facts, carried)


def downgrade() -> None:
    op.create_table(
        "dismissed_facts",
        sa.Column("conversation_id", sa.Text, primary_key=True),
        sa.Column("turn_number", sa.Integer, primary_key=True),
        sa.Column("dismissed_at", sa.TIMESTAMP, server_default=sa.func.current_timestamp()),
    )
    op.drop_index("idx_facts_user_status", "facts")
    op.drop_table("facts")
