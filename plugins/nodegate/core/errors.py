"""Error types shared across nodegate."""

from __future__ import annotations


class NodegateError(Exception):
    """Base class of nodegate's own errors."""


class ConfigError(NodegateError):
    """Bad operator input (inventory, profile, ssh_config, option): names what and where."""


class ParseError(NodegateError):
    """A tool's output could not be understood; becomes an ERROR verdict, never a pass.

    >>> raise ParseError("ibstat", "no 'CA ' header found")
    """

    def __init__(self, tool: str, reason: str) -> None:
        super().__init__(f"{tool}: {reason}")
        self.tool = tool
        self.reason = reason
