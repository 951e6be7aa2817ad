"""Node-controlled text made safe to show: what a node prints (os-release, a tool's stderr, a
GPU serial) must not drive the terminal (erase lines, set the title, write the clipboard with
OSC 52) nor break out of an HTML report. Every report that shows node text goes through here:
the terminal summary, the pytest/JUnit failure text, and HTML (`html_text`).

>>> printable("Ubuntu\\x1b]52;c;ZWNobyBwd25lZA==\\x07 22.04\\u202e")
'Ubuntu\\\\x1b]52;c;ZWNobyBwd25lZA==\\\\x07 22.04\\\\u202e'
"""

from __future__ import annotations

import html
import unicodedata

# Control (C0, DEL, C1), format (bidi overrides, zero-width), surrogate (undecodable bytes
# kept by surrogateescape), line and paragraph separators.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    code = ord(c)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: object) -> str:
    """`text` as one line with every control character escaped (`\\x1b`, `\\n`, `\\u202e`)."""
    s = str(text)
    if s.isprintable():  # the common case: nothing to escape (isprintable is stricter)
        return s
    return "".join(_escape(c) if unicodedata.category(c) in _ESCAPED_CATEGORIES else c for c in s)


def printable_lines(text: object) -> str:
    """`text` with its line breaks kept and every other control character escaped."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


def html_text(text: object) -> str:
    """`text` for an HTML page: control characters escaped, then `<>&"'` as entities."""
    return html.escape(printable(text), quote=True)
