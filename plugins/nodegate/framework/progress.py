"""The progress protocol the stages call while they run; the session's display implements it.

The framework owns it (stages call it, any thread) and knows nothing of how it is shown: a
passive stage announces itself with the worst deadline of the scripts it planned (the display
adds the connect deadline and the fan-out waves it knows), an active stage without one (its
rounds show progress).
"""

from __future__ import annotations

from typing import Protocol


class ProgressSink(Protocol):
    """What the stages and the active skeleton tell while they run (any thread)."""

    def stage_started(
        self, stage: str, nodes: int, *, active: bool, script_deadline_s: float | None
    ) -> None: ...

    def node_done(self, stage: str, node: str, ok: bool) -> None: ...

    def stage_finished(self, stage: str, failed_nodes: int) -> None: ...

    def round_started(self, stage: str, label: str, planned: int) -> None: ...

    def test_done(self, stage: str, label: str) -> None: ...

    def log(self, line: str) -> None: ...
