"""The first history schema: runs, interned names, decisions, verdicts, measurements, actions.

Revision ID: 0001_initial
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def _run_fk() -> sa.Column[int]:
    return sa.Column(
        "run", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
    )


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), nullable=False, unique=True),
        sa.Column("started_at", sa.DateTime, nullable=True),
        sa.Column("finished_at", sa.DateTime, nullable=True),
        sa.Column("inventory", sa.Text, nullable=True),
        sa.Column("profiles", sa.Text, nullable=False),
        sa.Column("nodegate_version", sa.String(40), nullable=False),
        sa.Column("transport", sa.String(40), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("interrupted_during", sa.String(80), nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("stages", sa.Text, nullable=False),
        sa.Column("checks", sa.Text, nullable=False),
        sa.Column("nodes", sa.Integer, nullable=False),
        sa.Column("admitted", sa.Integer, nullable=False),
        sa.Column("rejected", sa.Integer, nullable=False),
        sa.Column("not_qualified", sa.Integer, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
    )
    for name, width in (("nodes", sa.String(255)), ("checks", sa.String(255)),
                        ("components", sa.Text)):  # fmt: skip
        op.create_table(
            name,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("name", width, nullable=False, unique=True),
        )
    op.create_table(
        "decisions",
        sa.Column("run", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("node", sa.Integer, sa.ForeignKey("nodes.id"), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("profile", sa.String(255), nullable=True),
        sa.Column("remediation", sa.String(80), nullable=True),
        sa.Column("reason_check", sa.String(255), nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("reasons", sa.Integer, nullable=False),
        sa.Column("waived", sa.Integer, nullable=False),
        sa.Column("checks_passed", sa.Integer, nullable=False),
        sa.Column("checks_total", sa.Integer, nullable=False),
    )  # fmt: skip
    op.create_index("ix_decisions_node_run", "decisions", ["node", "run"])
    op.create_table(
        "verdicts",
        sa.Column("run", sa.Integer, nullable=False),  # no foreign key: see schema.py
        sa.Column("node", sa.Integer, nullable=False),
        sa.Column("check", sa.Integer, nullable=False),
        sa.Column("component", sa.Integer, nullable=False),
        sa.Column("status", sa.String(5), nullable=False),
        sa.Column("observed", sa.Text, nullable=True),
        sa.Column("unit", sa.String(40), nullable=True),
        sa.Column("remediation_class", sa.String(20), nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("job", sa.Text, nullable=True),
    )
    op.create_index("ix_verdicts_run", "verdicts", ["run"])
    op.create_table(
        "measurements",
        sa.Column("run", sa.Integer, nullable=False),
        sa.Column("node", sa.Integer, nullable=False),
        sa.Column("check", sa.Integer, nullable=False),
        sa.Column("component", sa.Integer, nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("unit", sa.String(40), nullable=True),
        sa.Column("status", sa.String(5), nullable=False),
        sa.Column("ref_direction", sa.String(8), nullable=True),
        sa.Column("ref_value", sa.Float, nullable=True),
    )
    op.create_index("ix_measurements_series", "measurements", ["node", "check", "component", "run"])
    op.create_index("ix_measurements_run", "measurements", ["run"])
    op.create_table(
        "actions",
        _run_fk(),
        sa.Column("node", sa.Integer, nullable=False),
        sa.Column("target", sa.String(40), nullable=False),
        sa.Column("mode", sa.String(10), nullable=False),
        sa.Column("decision", sa.String(16), nullable=True),
        sa.Column("action", sa.String(40), nullable=True),
        sa.Column("result", sa.String(20), nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("ix_actions_run", "actions", ["run"])


def downgrade() -> None:
    for name in ("actions", "measurements", "verdicts", "decisions", "components", "checks",
                 "nodes", "runs"):  # fmt: skip
        op.drop_table(name)
