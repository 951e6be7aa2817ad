"""Parser for `grep -H . FILE...` over one-value kernel files (sysfs, procfs, configfs):
`/proc/sys/net/ipv4/conf/all/rp_filter:0` -> {path: value}.

Paths are as named on the command line (absolute); the value is the rest of the line after the
first `:` that follows the path (kernel paths of these files hold no `:`). A file grep could not
read is simply absent (its message went to stderr): the caller names what is missing.

>>> parse_file_values("/proc/sys/net/ipv4/conf/all/arp_ignore:1\\n")
{'/proc/sys/net/ipv4/conf/all/arp_ignore': '1'}
"""

from __future__ import annotations

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines


def parse_file_values(text: str) -> dict[str, str]:
    """path -> value (stripped); a file with several lines keeps the first one only once."""
    out: dict[str, str] = {}
    for lineno, raw in enumerate(clean_lines(text), 1):
        if not raw:
            continue
        path, sep, value = raw.partition(":")
        if not sep or not path.startswith("/") or " " in path:
            raise ParseError("grep", f"line {lineno}: not 'path:value': {raw[:60]!r}")
        if path in out:
            raise ParseError("grep", f"line {lineno}: {path} holds several lines")
        out[path] = value.strip()
    return out
