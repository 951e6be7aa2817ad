"""Parse the kernel log of a window as `journalctl -k --since -<N>h -o short-iso` prints it.

journalctl prints `-- No entries --` instead of lines when the window holds no kernel message:
that is an empty window (no events), not output nodegate does not understand.

>>> parse_kernel_window("-- No entries --\\n").xids
()
"""

from __future__ import annotations

from nodegate.parsers.kernel_log import KernelLogEvents, parse_kernel_log

TOOL = "journalctl"
NO_ENTRIES = "-- No entries --"


def parse_kernel_window(text: str) -> KernelLogEvents:
    """The kernel log of the window; an empty window is no events, not an unknown output."""
    body = text.strip()
    if not body or body == NO_ENTRIES:
        return KernelLogEvents((), (), (), (), (), (), 0)
    return parse_kernel_log(text)
