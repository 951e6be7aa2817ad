"""Ctrl-C and SIGTERM end a run the same way, and the run finishes its cleanup before it exits.

The first SIGINT or SIGTERM raises KeyboardInterrupt (SIGTERM as `Terminated`, a subclass) in
the main thread: the engine cancels the running stage, which kills by PID what it started
(a passive stage's node sessions: `transport.hangup`), then the reports are written
(admission.json says the run was interrupted). Later signals while that happens are noted on
stderr, not raised: an exception there would cut the kills short and leave ib_write_bw
servers holding their ports for minutes. The cleanup is bounded
(`engine.CANCEL_GRACE_S`, then the transport's close); a third signal interrupts it anyway.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
FORCE_AFTER = 3  # the third signal stops waiting for the cleanup


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt so that it ends the run like Ctrl-C."""


class InterruptGuard:
    """Installs the handlers (main thread only) and restores the previous ones."""

    def __init__(self) -> None:
        self.received = 0
        self._saved: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self._saved:
            return
        for sig in SIGNALS:
            self._saved[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, previous in self._saved.items():
            signal.signal(sig, previous)
        self._saved.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received += 1
        if self.received == 1 or self.received >= FORCE_AFTER:
            if signum == signal.SIGTERM:
                raise Terminated(f"terminated ({signal.Signals(signum).name})")
            raise KeyboardInterrupt
        # os.write, not print: a handler may run in the middle of another write to stderr.
        os.write(
            2,
            b"\nnodegate: interrupted again: still killing what the run started and writing "
            b"its reports (bounded); interrupt once more to abandon them\n",
        )
