"""`srun --label` output -> each task's own bytes, exactly as the task wrote them.

Who wrote a line is what srun says, never what a node prints: srun writes the label
(`<task id>: `, right-aligned to the widest id) in front of every line it forwards, from the
task id in slurmstepd's I/O header, so a node that prints `3: ` inside its output only adds
bytes to its own stream (`1: 3: ...`).

srun changes the bytes in one known way, undone here: slurmstepd forwards a task's output a
line at a time, at most SRUN_LINE_MAX bytes per message (MAX_MSG_LEN in Slurm's
src/common/io_hdr.h; 1024 since Slurm 2.x, measured on 22.05 here), and srun ends every
message that does not end in a newline with one of its own (src/common/
write_labelled_message.c). So a labelled line holding exactly SRUN_LINE_MAX bytes is a piece
of a longer line (its newline is srun's, dropped); a shorter one ended with the task's own
newline. The stage script's frames carry byte lengths, so anything this gets wrong shows up
as a frame error for that node (an ERROR), never as another node's result.

That undoing is exact only when slurmstepd sends a piece short of SRUN_LINE_MAX solely at a
newline; under a flood it also sends a partial line when its buffer fills, and srun's added
newline is then taken for the task's (measured: a 300 MB flood's frames were off by one). So
the stage scripts' stdout goes through `base64 -w 76` on the node (`b64=True`): every line is
short and newlines are not data, whatever srun adds or splits; the task's bytes are the
decoded concatenation.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence

SRUN_LINE_MAX = 1024
_LABEL = re.compile(rb" *(\d+): ")
# A line srun wrote is a label and at most SRUN_LINE_MAX bytes; anything longer is not srun's.
_LINE_LIMIT = SRUN_LINE_MAX + 64
_STRAY_KEPT = 50  # unlabelled lines (srun's own messages) kept for the diagnosis
# srun's report of tasks that did not exit 0 (src/srun/step_launch.c, _task_finish): "srun:
# error: gpu006: task 5: Exited with exit code 137", "... tasks 0-2,4: Killed"
TASK_EXIT = re.compile(rb"^srun: error: \S+: tasks? ([\d,-]+): (.+)$")


class LabelledStream:
    """One of srun's streams, fed in chunks, split into each task's bytes (each kept up to
    `cap` + 1 bytes: more than `cap` is a flood, cut there)."""

    def __init__(self, ntasks: int, cap: int, b64: bool = False) -> None:
        self.tasks: list[bytearray] = [bytearray() for _ in range(ntasks)]
        self.b64 = b64
        self.cap = cap
        # What is kept per task: the cap itself, or its base64 text (4/3, one newline per 76).
        self.keep = cap if not b64 else (cap // 3 + 1) * 4 + cap // 57 + 64
        self.stray: list[str] = []  # lines without a task's label: srun's own messages
        self.exits: dict[int, str] = {}  # task -> how it ended, for those srun reports
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> None:
        """Route the complete lines of `chunk`; keep a trailing partial line for later."""
        self._pending += chunk
        start = 0
        while (end := self._pending.find(b"\n", start)) >= 0:
            self._line(bytes(self._pending[start:end]))
            start = end + 1
        del self._pending[:start]
        if len(self._pending) > _LINE_LIMIT:  # not srun's line shape: keep nothing of it
            self._stray(bytes(self._pending))
            self._pending.clear()

    def close(self) -> None:
        """The stream ended: a last line without a newline is routed as it is."""
        if self._pending:
            self._line(bytes(self._pending), ended=False)
            self._pending.clear()

    def _line(self, line: bytes, ended: bool = True) -> None:
        m = _LABEL.match(line)
        task = int(m.group(1)) if m is not None else -1
        if m is None or task >= len(self.tasks) or len(line) > _LINE_LIMIT:
            self._stray(line)
            return
        body = line[m.end() :]
        if self.b64:
            body = body.strip()  # newlines are not data in base64 text
        elif ended and len(body) < SRUN_LINE_MAX:
            body += b"\n"  # the task's own newline (a full piece's newline is srun's)
        kept = self.tasks[task]
        room = self.keep + 1 - len(kept)
        if room > 0:
            kept += body[:room]

    def _stray(self, line: bytes) -> None:
        if (m := TASK_EXIT.match(line)) is not None:
            how = m.group(2).decode("utf-8", "replace")[:100]
            for part in m.group(1).decode().split(","):
                lo, _, hi = part.partition("-")
                if lo.isdigit() and (hi.isdigit() or not hi):
                    self.exits.update(dict.fromkeys(range(int(lo), int(hi or lo) + 1), how))
        if len(self.stray) < _STRAY_KEPT:
            self.stray.append(line[:300].decode("utf-8", "replace"))

    def of(self, task: int) -> bytes:
        """The task's bytes (decoded, `b64`; what decodes of a cut or damaged text: the frames
        then say what is missing)."""
        kept = bytes(self.tasks[task])
        if not self.b64:
            return kept
        kept = kept[: len(kept) - len(kept) % 4]
        try:
            return binascii.a2b_base64(kept)
        except binascii.Error:
            return b""

    def flooded(self, task: int) -> bool:
        """The task sent more than the cap (what was kept is cut there)."""
        return len(self.tasks[task]) > self.keep


def route_labelled(output: bytes, nodes: Sequence[str], cap: int) -> dict[str, bytes]:
    """srun's labelled output of one step whose task i ran on `nodes[i]` -> bytes per node.

    >>> route_labelled(b"1: b\\n0: a\\n1: 0: x\\n", ["n1", "n2"], 100)
    {'n1': b'a\\n', 'n2': b'b\\n0: x\\n'}
    """
    stream = LabelledStream(len(nodes), cap)
    stream.feed(output)
    stream.close()
    return {n: stream.of(i) for i, n in enumerate(nodes)}
