"""Loopback /16s for simulated fleets, reserved across processes: a lock, not a guess.

Each subnet 127.N (N in `OCTETS`) has a lock file in `LOCK_DIR`, shared by every test process
on this machine (xdist workers, two checkouts' suites); a reservation holds an exclusive
`flock` on it until released (or until its process ends: the kernel drops the lock), so two
concurrent runs never get the same subnet. A subnet busy for another reason (an operator's
demo, a benchmark: those use subnets outside `OCTETS`) is still found when the fleet starts.

    >>> r = reserve()
    >>> r.subnet.startswith("127.")
    True
    >>> r.release()
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / "nodegate-test-subnets"
OCTETS = range(100, 250)  # 127.100 - 127.249; the demo (127.77) and the benchmarks are below


class Reservation:
    """A subnet held by this process (its lock file's descriptor) until `release()`."""

    def __init__(self, subnet: str, fd: int) -> None:
        self.subnet = subnet
        self._fd: int | None = fd

    def release(self) -> None:
        """Unlock the subnet (closing the descriptor drops the lock); idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def reserve(lock_dir: Path = LOCK_DIR) -> Reservation:
    """The first subnet no other holder has locked (the search starts at a place spread by
    process id, so that concurrent runs rarely contend); RuntimeError if all are held."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    start = os.getpid() % len(OCTETS)
    for i in range(len(OCTETS)):
        subnet = f"127.{OCTETS[(start + i) % len(OCTETS)]}"
        fd = os.open(lock_dir / f"{subnet}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            # Per open file: a second reservation in this same process is refused too.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return Reservation(subnet, fd)
    raise RuntimeError(f"no free loopback subnet: all {len(OCTETS)} held ({lock_dir})")
