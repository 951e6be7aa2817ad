"""A simulated node's files: a fake root tree per node, and the file readers (`cat`, `grep`).

Each node holds its own tree under `nodes/<name>/root` (`/etc/os-release`, `/proc/...`, a
sysfs with the kernel's layout: `/sys/class/infiniband/<dev>` symlinks into `/sys/devices`).
A command a node runs names absolute paths; the node's `cat` and `grep` read them under the
node's root and print them as named, so a stage's command line is answered as a real node
would answer it, whatever it names (a wrong path fails as it would on the node).

- Globs: the node's shell is the host's `sh`, which expands `/sys/class/infiniband/*/fw_ver`
  against the host and leaves it literal (no match there); the readers expand such an operand
  under the node's root, as the node's shell would have. (A pattern the host *does* match,
  say `/sys/class/net/*`, arrives expanded to host paths: simulated trees avoid those paths.)
- `grep` is the host's GNU grep on the mapped operands: its options are parsed as grep 3.x
  parses them (short clusters, `--long[=value]`, unique prefixes, option permutation, `--`)
  so a pattern or an option's argument is never taken for a file; its output and messages
  name the paths as given (`/sys/class/infiniband/mlx5_0/fw_ver:28.41.1000`), with grep's rc
  (0 match, 1 none, 2 trouble). `-r` follows symlinks named on the command line, not those
  met while recursing (sysfs's `device` links), and visits a directory in the order the
  filesystem lists it, as on a node. grep names the node's files through the link
  `nodetools.MARK` in the node's directory, whose byte is then dropped from what it prints:
  one builtin call, no rewriting line by line (that slower way only when relative operands,
  the host's files, are named too). Trailing empty lines of the output are lost (every empty line in
  the slower way). Not simulated (rc 2 and a message): `-z`/`-Z` on the node's files.
- `cat` of plain operands is answered with shell builtins (no process); options, stdin and
  anything else run the host's cat on the mapped operands.
- Climbing counters (`Counter`): every read of the node's `/sys` by these readers advances
  them by their step, like time passing between reads: the first read sees the value, each
  later read a higher one, whatever path, glob or tool reads them.
- Files with the same content share one inode across the fleet (hard links): the tree is
  read-only but for the climbing counters, files of their own. Other tools read the host's
  files. The node's `pgrep` sees the node's own processes (its NG_NODE in their environment).
The shell of these tools is in sim/nodetools.py.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Symlink:
    """A symbolic link, relative as the kernel's sysfs links are (`../../devices/...`)."""

    target: str


@dataclass(frozen=True, slots=True)
class Counter:
    """A counter file that climbs by `step` after every read of the node's /sys."""

    value: int
    step: int


Entry = str | Symlink | Counter


class TreeWriter:
    """Writes nodes' trees; files of equal content share one inode across the fleet."""

    def __init__(self) -> None:
        self._pool: dict[str, str] = {}
        self._lock = threading.Lock()  # trees are written by several threads

    def write(self, root: Path, entries: Mapping[str, Entry]) -> str:
        """Write `entries` (absolute path -> entry) under `root`; returns the node's
        `climb.sh` (one `ngsim__climb PATH STEP` per climbing counter), empty if none."""
        climb = []
        made: set[str] = set()
        for path in sorted(entries):
            entry = entries[path]
            target = os.path.join(root, path.lstrip("/"))
            parent = os.path.dirname(target)
            if parent not in made:  # thousands of files per fleet: one mkdir per directory
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            if isinstance(entry, Symlink):
                os.symlink(entry.target, target)
            elif isinstance(entry, Counter):
                Path(target).write_text(f"{entry.value}\n")
                climb.append(f"ngsim__climb {shlex.quote(path.lstrip('/'))} {entry.step}\n")
            else:
                self._file(target, entry)
        return "".join(climb)

    def _file(self, target: str, text: str) -> None:
        first = self._pool.get(text)
        if first is None:
            with self._lock:  # the first writer of a content registers it before others look
                first = self._pool.get(text)
                if first is None:
                    Path(target).write_text(text)
                    self._pool[text] = target
                    return
        try:
            os.link(first, target)
        except OSError:  # a filesystem without hard links (or at its link limit)
            Path(target).write_text(text)


__all__ = ["Counter", "Entry", "Symlink", "TreeWriter"]
