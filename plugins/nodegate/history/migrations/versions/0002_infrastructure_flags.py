"""Infrastructure findings (admission.json `infrastructure`, the fabric stage's) and the
history rules' flags.

Revision ID: 0002_infrastructure_flags
Revises: 0001_initial
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_infrastructure_flags"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def _run_fk() -> sa.Column[int]:
    return sa.Column(
        "run", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
    )


def upgrade() -> None:
    op.create_table(
        "infrastructure",
        _run_fk(),
        sa.Column("component", sa.Text, nullable=False),
        sa.Column("check", sa.String(255), nullable=True),
        sa.Column("status", sa.String(16), nullable=True),
        sa.Column("observed", sa.Text, nullable=True),
        sa.Column("expected", sa.Text, nullable=True),
        sa.Column("remediation", sa.Text, nullable=True),
        sa.Column("doc", sa.Text, nullable=False),
    )
    op.create_index("ix_infrastructure_run", "infrastructure", ["run"])
    op.create_table(
        "flags",
        _run_fk(),
        sa.Column("node", sa.Integer, nullable=False),
        sa.Column("rule", sa.String(20), nullable=False),
        sa.Column("check", sa.String(255), nullable=True),
        sa.Column("component", sa.Text, nullable=True),
        sa.Column("blocks_admission", sa.Boolean, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("based_on", sa.Text, nullable=False),
    )
    op.create_index("ix_flags_run", "flags", ["run"])


def downgrade() -> None:
    op.drop_table("flags")
    op.drop_table("infrastructure")
