"""A pytest plugin for the benches (`-p _memtrace`): where the controller's memory is at its
peak, by allocation site; and a cProfile of the thread that runs the stages (the parent's
`-m cProfile` sees the main thread only).

With `$NODEGATE_BENCH_TRACEMALLOC` set, tracing starts when the plugin is imported (before
the suite's conftest and nodegate's run); a sampling thread takes a tracemalloc snapshot each
time the traced memory grows 5 % above the largest seen, so the last snapshot is the one
nearest the peak; at exit it is written to
`$NODEGATE_BENCH_TRACEMALLOC` (read it with `print_snapshot`). Tracing slows the run by 2-3x:
measure time and RSS without it. With `$NODEGATE_BENCH_LOOPPROF` set, the `nodegate-loop`
thread (`nodegate.session.engine.LoopThread`) runs under cProfile, written there at its end.
"""

from __future__ import annotations

import atexit
import cProfile
import os
import threading
import time
import tracemalloc

FRAMES = 8  # enough to see which caller of a builder holds the memory
PERIOD_S = 0.25


class _Peak:
    def __init__(self, path: str) -> None:
        self.path = path
        self.best = 0
        self.snapshot: tracemalloc.Snapshot | None = None
        self.at = 0.0
        self.t0 = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, name="memtrace", daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stop.wait(PERIOD_S):
            cur, _ = tracemalloc.get_traced_memory()
            if cur > self.best * 1.05:
                self.snapshot = tracemalloc.take_snapshot()
                self.best, self.at = cur, time.monotonic() - self.t0

    def dump(self) -> None:
        self.stop.set()
        self.thread.join(5)
        _, peak = tracemalloc.get_traced_memory()
        if self.snapshot is not None:
            self.snapshot.dump(self.path)
            with open(self.path + ".txt", "w", encoding="utf-8") as f:
                f.write(f"snapshot {self.best} B at {self.at:.1f} s; traced peak {peak} B\n")


_path = os.environ.get("NODEGATE_BENCH_TRACEMALLOC")
if _path:
    tracemalloc.start(FRAMES)
    atexit.register(_Peak(_path).dump)


_loopprof = os.environ.get("NODEGATE_BENCH_LOOPPROF")
if _loopprof:
    import asyncio

    _run_forever = asyncio.BaseEventLoop.run_forever

    def _profiled(self: asyncio.BaseEventLoop) -> None:
        if threading.current_thread().name != "nodegate-loop":
            return _run_forever(self)
        prof = cProfile.Profile()
        prof.enable()
        try:
            return _run_forever(self)
        finally:
            prof.disable()
            prof.dump_stats(_loopprof)

    asyncio.BaseEventLoop.run_forever = _profiled  # type: ignore[method-assign]


def print_snapshot(path: str, top: int) -> None:
    """The snapshot's largest allocation sites: by line, then by their callers' traceback."""
    snap = tracemalloc.Snapshot.load(path).filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    )
    try:
        with open(path + ".txt", encoding="utf-8") as f:
            print(f.read().strip())
    except OSError:
        pass
    stats = snap.statistics("lineno")
    total = sum(s.size for s in stats)
    print(f"traced at the snapshot: {total / 2**20:.1f} MiB in {len(stats)} lines; top {top}:")
    for s in stats[:top]:
        fr = s.traceback[0]
        print(f"{s.size / 2**20:9.1f} MiB {s.count:10d} blocks  {fr.filename}:{fr.lineno}")
    print(f"\nby traceback (top {min(top, 10)}):")
    for s in snap.statistics("traceback")[: min(top, 10)]:
        print(f"{s.size / 2**20:9.1f} MiB {s.count:10d} blocks")
        for line in s.traceback.format(limit=FRAMES, most_recent_first=True):
            print("   ", line)
