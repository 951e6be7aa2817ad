"""The history tables (SQLAlchemy Core). Alembic's revisions (`migrations/versions/`) build
exactly these; a change here is a new revision there.

Names repeated on every row (node, check id, component) are interned in small dictionary
tables, so a verdict row is four integers and a status: a 1,024-node run holds ~270,000.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

METADATA = MetaData()
HEAD = "0002_infrastructure_flags"  # the newest revision this nodegate writes

# A run's state: what it can prove. Only complete runs count as clean for the rules.
COMPLETE, INCOMPLETE, INTERRUPTED = "complete", "incomplete", "interrupted"

runs = Table(
    "runs",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(200), nullable=False, unique=True),
    Column("started_at", DateTime, nullable=True),
    Column("finished_at", DateTime, nullable=True),
    Column("inventory", Text, nullable=True),
    Column("profiles", Text, nullable=False),  # sorted, comma-separated
    Column("nodegate_version", String(40), nullable=False),
    Column("transport", String(40), nullable=True),
    Column("state", String(16), nullable=False),  # complete | incomplete | interrupted
    Column("interrupted_during", String(80), nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("stages", Text, nullable=False),
    Column("checks", Text, nullable=False),  # the check ids the run selected (JSON list)
    Column("nodes", Integer, nullable=False),
    Column("admitted", Integer, nullable=False),
    Column("rejected", Integer, nullable=False),
    Column("not_qualified", Integer, nullable=False),
    Column("source", String(16), nullable=False),  # run (written by the run) | import
)

nodes = Table(
    "nodes",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False, unique=True),
)
checks = Table(
    "checks",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False, unique=True),
)
components = Table(
    "components",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
)

decisions = Table(
    "decisions",
    METADATA,
    Column("run", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("node", Integer, ForeignKey("nodes.id"), primary_key=True),
    Column("state", String(16), nullable=False),  # admitted | rejected | not_qualified
    Column("profile", String(255), nullable=True),
    Column("remediation", String(80), nullable=True),  # the causes' classes, worst first
    Column("reason_check", String(255), nullable=True),  # the first cause's check id
    Column("reason", Text, nullable=True),  # the first cause, as one line
    Column("reasons", Integer, nullable=False),
    Column("waived", Integer, nullable=False),
    Column("checks_passed", Integer, nullable=False),
    Column("checks_total", Integer, nullable=False),
    Index("ix_decisions_node_run", "node", "run"),
)

verdicts = Table(
    "verdicts",
    METADATA,
    # No foreign key on the two big tables: its check per row was half of PostgreSQL's ingest
    # (a run's rows are deleted with it by `ingest`, in one transaction).
    Column("run", Integer, nullable=False),
    Column("node", Integer, nullable=False),
    Column("check", Integer, nullable=False),
    Column("component", Integer, nullable=False),
    Column("status", String(5), nullable=False),
    Column("observed", Text, nullable=True),  # JSON; None when nothing was observed
    Column("unit", String(40), nullable=True),
    Column("remediation_class", String(20), nullable=True),  # a pass has none
    Column("message", Text, nullable=True),  # kept for what did not pass
    Column("job", Text, nullable=True),  # the job a job-level number is of (Verdict.job)
    Index("ix_verdicts_run", "run"),
)

measurements = Table(
    "measurements",
    METADATA,
    # No foreign key on the two big tables: its check per row was half of PostgreSQL's ingest
    # (a run's rows are deleted with it by `ingest`, in one transaction).
    Column("run", Integer, nullable=False),
    Column("node", Integer, nullable=False),
    Column("check", Integer, nullable=False),  # the metric is the check's observed number
    Column("component", Integer, nullable=False),  # its key: a part's serial left out
    Column("value", Float, nullable=False),
    Column("unit", String(40), nullable=True),
    Column("status", String(5), nullable=False),
    # The threshold it was judged against (a verdict's `reference`), when one judged it.
    Column("ref_direction", String(8), nullable=True),
    Column("ref_value", Float, nullable=True),
    Index("ix_measurements_series", "node", "check", "component", "run"),
    Index("ix_measurements_run", "run"),
)

actions = Table(
    "actions",
    METADATA,
    Column("run", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("node", Integer, nullable=False),
    Column("target", String(40), nullable=False),  # slurm | kubernetes | a plugin's
    Column("mode", String(10), nullable=False),  # dry-run | apply
    Column("decision", String(16), nullable=True),
    Column("action", String(40), nullable=True),
    Column("result", String(20), nullable=True),
    Column("reason", Text, nullable=True),
    Column("error", Text, nullable=True),
    Index("ix_actions_run", "run"),
)

# Revision 0002: the fabric stage's findings (admission.json `infrastructure`) and the
# history rules' flags.
infrastructure = Table(
    "infrastructure",
    METADATA,
    Column("run", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("component", Text, nullable=False),
    Column("check", String(255), nullable=True),
    Column("status", String(16), nullable=True),
    Column("observed", Text, nullable=True),
    Column("expected", Text, nullable=True),
    Column("remediation", Text, nullable=True),
    Column("doc", Text, nullable=False),  # the finding as admission.json has it (JSON)
    Index("ix_infrastructure_run", "run"),
)

flags = Table(
    "flags",
    METADATA,
    Column("run", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("node", Integer, nullable=False),
    Column("rule", String(20), nullable=False),  # repeat_offender | drift | flapping
    Column("check", String(255), nullable=True),
    Column("component", Text, nullable=True),
    Column("blocks_admission", Boolean, nullable=False),
    Column("message", Text, nullable=False),
    Column("based_on", Text, nullable=False),  # JSON list of the run ids the flag rests on
    Index("ix_flags_run", "run"),
)

CHILDREN = (decisions, verdicts, measurements, actions, infrastructure, flags)
