"""The simulated fleet's sshd daemons as processes: finding sshd, and telling whether a daemon
is alive and accepting connections (by the PID it wrote, never by name)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

from nodegate.core.errors import ConfigError

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd")


def find_sshd() -> str:
    for c in SSHD_CANDIDATES:
        if os.access(c, os.X_OK):
            return c
    found = shutil.which("sshd")
    if found:
        return found
    raise ConfigError(
        "OpenSSH sshd not found (looked in " + ", ".join(SSHD_CANDIDATES) + "); "
        "install it: apt-get install openssh-server"
    )


def supports_no_reexec(sshd: str) -> bool:
    out = subprocess.run([sshd, "-V"], capture_output=True, text=True).stderr
    m = re.search(r"OpenSSH_(\d+)\.(\d+)", out)
    return m is not None and (int(m.group(1)), int(m.group(2))) < (9, 8)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is not alive.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def alive(pidf: Path) -> int | None:
    try:
        pid = int(pidf.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
