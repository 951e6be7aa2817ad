"""Alembic's script directory for the history store (run by `nodegate.history.store`)."""
