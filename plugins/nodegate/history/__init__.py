"""Run history: every run's decisions, verdicts and numbers in a database (SQLAlchemy Core,
Alembic migrations; SQLite by default, PostgreSQL by URL), the questions asked of it, and the
rules over it (repeat offenders, drift, flapping).

Reads what a run leaves (`nodegate.core.results`, admission.json); admission never imports it:
the rules' results reach the gate as data (`nodegate.history.rules`).
"""
