"""Live progress of the stages while the engine runs (before any test item reports).

Per stage: nodes done / total, nodes whose session failed so far, elapsed time and what is
left of the stage's deadline; per round of an active stage: tests done / planned. On a
terminal, `rich` bars (left on screen when done); elsewhere (CI logs) plain lines, at most one
per stage every few seconds; nothing under `-q` when not on a terminal unless asked
(`--progress plain`).

    nodegate: reach: 512/1024 nodes, 3 failed, 4.1 s elapsed, deadline in 118.9 s
"""

from __future__ import annotations

import math
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

import pytest

from nodegate.core.safetext import printable
from nodegate.core.settings import Settings
from nodegate.core.words import plural
from nodegate.session.state import STATE

PLAIN_EVERY_S = 5.0  # a plain line per stage at most this often (and at its end)
DEFAULT_CONNECT_S = 10.0


def progress_mode(mode: str, isatty: bool, verbosity: int) -> str:
    """live | plain | off from --progress (`Settings.progress`, one of PROGRESS_MODES)."""
    if mode != "auto":
        return mode
    if isatty:
        return "live"
    return "off" if verbosity < 0 else "plain"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if state is None or state.is_worker or reporter is None:
        return
    mode = progress_mode(state.settings.progress, bool(reporter.isatty), config.get_verbosity())
    if mode == "plain":
        # Something from the first second: collecting 40,000 items takes a few.
        profiles = ", ".join(sorted({p.name for p in state.profiles.values()}))
        reporter.write_line(
            printable(
                f"nodegate: {plural(len(state.nodes), 'node')} from {state.settings.inventory} "
                f"(profiles: {profiles}); collecting the test items"
            )
        )


def make_progress(config: pytest.Config, settings: Settings) -> Progress:
    """The run's progress display, on pytest's terminal."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    isatty = bool(getattr(reporter, "isatty", False))
    verbosity = config.get_verbosity()
    mode = progress_mode(settings.progress, isatty, verbosity) if reporter is not None else "off"

    def write(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)

    connect_s = settings.connect_timeout_s or DEFAULT_CONNECT_S
    return Progress(mode, write, connect_s, settings.fanout, sys.stdout)


@dataclass
class StageCount:
    name: str
    total: int
    deadline_s: float | None
    started: float
    active: bool = False
    done: int = 0
    failed: int = 0
    last_line: float = 0.0

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        if self.active:
            return (
                f"{self.name}: {plural(self.total, 'node')}, {elapsed:.1f} s elapsed (rounds below)"
            )
        text = (
            f"{self.name}: {self.done}/{plural(self.total, 'node')}, {self.failed} failed, "
            f"{elapsed:.1f} s elapsed"
        )
        if self.deadline_s is not None:
            text += f", deadline in {max(self.deadline_s - elapsed, 0):.1f} s"
        return text


class Progress:
    """A ProgressSink that shows live bars, plain lines, or nothing (`mode`)."""

    def __init__(self, mode: str, write: Any, connect_s: float, fanout: int, file: IO[str]) -> None:
        self.mode = mode
        self._write = write
        self.connect_s = connect_s
        self.fanout = fanout
        self._lock = threading.Lock()
        self.stage: StageCount | None = None
        self.rounds: dict[tuple[str, str], list[int]] = {}  # (stage, round) -> [done, planned]
        self._bars: Any = None
        self._tasks: dict[str, Any] = {}
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if mode == "live":
            self._bars = _live_bars(file)

    def __enter__(self) -> Progress:
        if self._bars is not None:
            self._bars.start()
        elif self.mode == "plain":
            self._ticker = threading.Thread(
                target=self._tick, name="nodegate-progress", daemon=True
            )
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._bars is not None:
            self._bars.stop()
        if self._ticker is not None:
            self._ticker.join(PLAIN_EVERY_S)

    def _tick(self) -> None:
        """Plain mode: a line every few seconds while a stage runs, even when no node ends
        (a fleet waiting on a hung command still shows it is alive)."""
        while not self._stop.wait(PLAIN_EVERY_S / 5):
            with self._lock:
                st = self.stage
                if st is not None and time.monotonic() - st.last_line >= PLAIN_EVERY_S:
                    self._write(f"nodegate: {st.line()}")
                    st.last_line = time.monotonic()

    def log(self, line: str) -> None:
        """A line above the bars (an active stage's plan), shown in every mode."""
        text = printable(f"nodegate: {line}")
        if self._bars is not None:
            self._bars.console.print(text, markup=False, highlight=False)
        else:
            self._write(text)

    def stage_started(
        self, stage: str, nodes: int, *, active: bool, script_deadline_s: float | None
    ) -> None:
        deadline = stage_deadline_s(nodes, script_deadline_s, self.connect_s, self.fanout)
        with self._lock:
            self.stage = StageCount(stage, nodes, deadline, time.monotonic(), active=active)
            if self._bars is not None:
                self._tasks[stage] = self._bars.add_task(
                    stage, total=nodes or 1, failed=0, deadline=deadline, unit="nodes"
                )
            elif self.mode == "plain":
                self._write(f"nodegate: {self.stage.line()}")
                self.stage.last_line = time.monotonic()

    def node_done(self, stage: str, node: str, ok: bool) -> None:
        with self._lock:
            st = self.stage
            if st is None or st.name != stage:
                return  # another stage's file (an active stage's cleanup check)
            st.done += 1
            st.failed += not ok
            if self._bars is not None:
                self._bars.update(self._tasks[stage], completed=st.done, failed=st.failed)
            elif self.mode == "plain" and time.monotonic() - st.last_line >= PLAIN_EVERY_S:
                self._write(f"nodegate: {st.line()}")
                st.last_line = time.monotonic()

    def stage_finished(self, stage: str, failed_nodes: int) -> None:
        with self._lock:
            st = self.stage
            if st is None or st.name != stage:
                return
            st.failed = max(st.failed, failed_nodes)
            st.done = st.total
            if self._bars is not None:
                self._bars.update(
                    self._tasks[stage], completed=st.total or 1, failed=st.failed, deadline=None
                )
            elif self.mode == "plain":
                elapsed = time.monotonic() - st.started
                self._write(
                    f"nodegate: {stage} done: {plural(st.total, 'node')}, "
                    f"{st.failed} failed a check, {elapsed:.1f} s"
                )
            self.stage = None

    def round_started(self, stage: str, label: str, planned: int) -> None:
        with self._lock:
            self.rounds[(stage, label)] = [0, planned]
            if self._bars is not None:
                self._tasks[f"{stage}:{label}"] = self._bars.add_task(
                    f"{stage} {label}", total=planned or 1, failed=0, deadline=None,
                    unit="tests",
                )  # fmt: skip

    def test_done(self, stage: str, label: str) -> None:
        with self._lock:
            count = self.rounds.get((stage, label))
            if count is None:
                return
            count[0] += 1
            if self._bars is not None:
                self._bars.update(self._tasks[f"{stage}:{label}"], completed=count[0])
            elif self.mode == "plain" and count[0] == count[1]:
                self._write(
                    f"nodegate: {stage} {label}: {count[0]}/{plural(count[1], 'test')} done"
                )


def _live_bars(file: IO[str]) -> Any:
    """rich bars: stage, bar, done/total, failures, elapsed, deadline left."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    class DeadlineColumn(TextColumn):
        def render(self, task: Any) -> Any:
            from rich.text import Text

            deadline = task.fields.get("deadline")
            if deadline is None or task.finished:
                return Text("")
            return Text(f"deadline in {max(deadline - task.elapsed, 0):.0f} s")

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} {task.fields[unit]}"),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        DeadlineColumn(""),
        console=Console(file=file, force_terminal=True),
        transient=False,
        redirect_stdout=False,
        redirect_stderr=False,
    )


def stage_deadline_s(
    nodes: int, script_deadline_s: float | None, connect_s: float, fanout: int
) -> float | None:
    """Upper bound for a passive stage: waves of --fanout sessions, each within its connect
    deadline and its script's deadline (the worst the stage planned); None for an active stage
    (its rounds show progress)."""
    if script_deadline_s is None or not nodes:
        return None
    waves = math.ceil(nodes / max(fanout, 1))
    return round(waves * (2 * connect_s + 1 + script_deadline_s), 1)
