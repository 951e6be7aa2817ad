"""Names and nodeset expressions, checked the same way everywhere (inventories, the simulated
fleet, run ids): a name ends up in test ids, file names, ssh_config lines and command lines.

>>> is_name("gpu001"), is_name("gpu001\\n"), is_name("../x"), is_name("gpu\uff10\uff10\uff11")
(True, False, False, False)
"""

from __future__ import annotations

import re

from nodegate.core.errors import ConfigError

NAME_RULE = "ASCII letters, digits, '_', '.', '-'; not starting with '.' or '-'"
# fullmatch only: `$` would also match before a trailing newline ("gpu001\n").
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# Hostlist expressions (gpu[001-064], @rack1!gpu3, Ansible's gpu[01:32]): printable ASCII
# without whitespace. ClusterShell reads any Unicode digit as a digit (`gpu００１` -> gpu1).
_EXPRESSION = re.compile(r"[!-~]+")
MAX_NODES = 100_000  # one inventory, one selection, one simulated fleet


def is_name(name: object) -> bool:
    """Whether `name` is a valid node, group, label, profile or run name."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_name(where: str, what: str, name: object) -> str:
    """`name` if valid, else a ConfigError naming `where`, the kind of name and the rule."""
    if not is_name(name):
        raise ConfigError(f"{where}: invalid {what} name {name!r} ({NAME_RULE})")
    assert isinstance(name, str)
    return name


def check_expression(where: str, expr: str) -> str:
    """`expr` if it is printable ASCII without whitespace, else a ConfigError naming `where`."""
    if _EXPRESSION.fullmatch(expr) is None:
        bad = next((c for c in expr if _EXPRESSION.fullmatch(c) is None), "")
        what = f"character {bad!r}" if bad else "nothing"
        raise ConfigError(
            f"{where}: {what} in {expr!r} (a node expression is printable ASCII without spaces)"
        )
    return expr


def too_many(count: int, limit: int, what: str = "nodes") -> str:
    """Why an expression of `count` names is refused (before expanding it) under `limit`."""
    left = f" (the {MAX_NODES:,} of one inventory, less those above)" if limit < MAX_NODES else ""
    return f"expands to {count:,} {what}, more than {limit:,}{left}: refused before expanding"
