"""Parser for `/sys/module/<module>/initstate`: the kernel's state of a loaded module.

The kernel prints one word (kernel/module/sysfs.c `show_initstate`): `live`, `coming`,
`going` or `unformed`. A module that is not loaded has no directory, so reading the file fails
(the caller records that as absent); only `live` means the module is usable.

>>> parse_module_initstate("live\\n")
True
"""

from __future__ import annotations

from nodegate.core.errors import ParseError

_TOOL = "initstate"
MODULE_STATES = ("live", "coming", "going", "unformed")


def parse_module_initstate(text: str) -> bool:
    """initstate text -> whether the module is loaded and live."""
    state = text.strip()
    if state not in MODULE_STATES:
        raise ParseError(_TOOL, f"unknown module state {state[:40]!r}")
    return state == "live"
