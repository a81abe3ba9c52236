"""``conversations.total_tokens`` counts the turns' own text, not the model's bills.

A reply's ``tokens_total`` is what the model reported for the call: its prompt (with the
memory context, often hundreds of tokens) plus its completion. Summed into
``conversations.total_tokens`` that made a conversation look several times longer than it is.
The column now sums each turn's own tokens: ``tokens_completion`` where the model reported one
(the reply's text), else ``tokens_total`` (a turn's text counted). This recomputes it for the
stored conversations; the turns' own columns are unchanged (they stay the billing record).
Downgrading restores the old sums.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _recount(per_turn: str) -> None:
    op.execute(
        "UPDATE conversations SET total_tokens = COALESCE((SELECT SUM("
        f"{per_turn}) FROM conversation_turns t "
        "WHERE t.conversation_id = conversations.conversation_id), 0)"
    )


def upgrade() -> None:
    _recount("COALESCE(t.tokens_completion, t.tokens_total, 0)")


def downgrade() -> None:
    _recount("COALESCE(t.tokens_total, 0)")
