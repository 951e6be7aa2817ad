"""The history schema's revisions, oldest first."""
