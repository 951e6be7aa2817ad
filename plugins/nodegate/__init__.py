"""nodegate: GPU cluster node qualification and admission gating over plain SSH."""

__version__ = "0.1.0"
