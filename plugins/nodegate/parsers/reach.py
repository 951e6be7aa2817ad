"""Parsers of the `reach` stage: os-release, uname -r, the NVIDIA driver version, ofed_info -s."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from nodegate.core.errors import ParseError


@dataclass(frozen=True, slots=True)
class OsRelease:
    id: str
    version_id: str | None
    pretty_name: str | None
    id_like: tuple[str, ...]


def parse_os_release(text: str) -> OsRelease:
    """/etc/os-release (KEY=value lines, shell-quoted values); ID is required.

    >>> parse_os_release('ID=ubuntu\\nVERSION_ID="22.04"\\n').version_id
    '22.04'
    """
    fields: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, eq, raw = line.partition("=")
        if not eq or not re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
            raise ParseError("os-release", f"line {n} is not KEY=value: {line[:60]!r}")
        try:
            parts = shlex.split(raw, posix=True)
        except ValueError as exc:
            raise ParseError("os-release", f"line {n}: {exc}") from None
        fields[key] = " ".join(parts)
    if "ID" not in fields:
        raise ParseError("os-release", "no ID= line")
    return OsRelease(
        id=fields["ID"],
        version_id=fields.get("VERSION_ID"),
        pretty_name=fields.get("PRETTY_NAME"),
        id_like=tuple(fields.get("ID_LIKE", "").split()),
    )


_KERNEL = re.compile(r"\d+\.\d+[\w.+~-]*")


def parse_uname_r(text: str) -> str:
    """`uname -r` -> the kernel release string."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) != 1 or not _KERNEL.fullmatch(lines[0]):
        raise ParseError("uname", f"expected one kernel release line, got {text[:80]!r}")
    return lines[0]


@dataclass(frozen=True, slots=True)
class NvidiaDriver:
    version: str
    open_module: bool
    arch: str | None


_NVRM = re.compile(
    r"^NVRM version: NVIDIA UNIX (?:(?P<open>Open )?Kernel Module for (?P<arch1>\S+)|"
    r"(?P<arch2>\S+) Kernel Module)\s+(?P<ver>\d+(?:\.\d+){1,2})\b",
    re.MULTILINE,
)


def parse_nvidia_version(text: str) -> NvidiaDriver:
    """/proc/driver/nvidia/version (proprietary and open kernel module wordings)."""
    m = _NVRM.search(text)
    if m is None:
        raise ParseError("/proc/driver/nvidia/version", "no 'NVRM version:' line with a version")
    return NvidiaDriver(
        version=m.group("ver"),
        open_module=bool(m.group("open")),
        arch=m.group("arch1") or m.group("arch2"),
    )


@dataclass(frozen=True, slots=True)
class OfedInfo:
    flavor: str  # "MLNX_OFED_LINUX", "OFED-internal" (DOCA), ...
    version: str


_OFED = re.compile(r"^(?P<flavor>[A-Za-z][A-Za-z_-]*?)-(?P<ver>\d+\.\d+(?:[.-]\d+)*)\s*:?\s*$")


def parse_ofed_info(text: str) -> OfedInfo:
    """`ofed_info -s`: `MLNX_OFED_LINUX-23.10-1.1.9.0:` or DOCA's `OFED-internal-24.10-1.1.4:`."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) != 1:
        raise ParseError("ofed_info", f"expected one line, got {len(lines)}")
    m = _OFED.match(lines[0])
    if m is None:
        raise ParseError("ofed_info", f"unrecognized version line {lines[0][:80]!r}")
    return OfedInfo(flavor=m.group("flavor"), version=m.group("ver"))
