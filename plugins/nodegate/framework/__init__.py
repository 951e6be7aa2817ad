"""The stage framework: the passive stage base, the active-stage skeleton, the progress protocol."""
