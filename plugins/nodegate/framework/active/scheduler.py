"""When each test of a round may start: all of its resources free and its channels under the
controller's limit, both taken at once.

A test *claims* resources (hashable names of hardware: a node's rail `("gpu001", 3)`, a whole
node) and channels (the remote processes it has open, each an SSH channel or a local child of
the controller). Two tests that share a resource never overlap; at most `max_channels` channels
are held over the whole fleet. A test takes everything it claims in one step, or nothing, so no
two tests can each hold part of what the other waits for (no deadlock). Waiting tests are
admitted in plan order: one whose resources are free but whose channels do not fit holds back
every later test from the channel pool (a large test is never starved by small ones); one whose
resources are busy lets later tests past. A claim of more channels than the limit counts as
the whole limit (it runs alone rather than never).

>>> s = Scheduler(max_channels=4)
>>> [s.fits(Claim(frozenset({("a", 0), ("b", 0)}), 2)), s.fits(Claim(frozenset({"a"}), 9))]
[True, True]
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Claim:
    """What one test holds while it runs: resources nobody else may use, and channels."""

    resources: frozenset[Hashable]
    channels: int = 1


@dataclass
class _Waiter:
    order: int
    claim: Claim
    granted: asyncio.Future[None] = field(repr=False)


@dataclass
class Usage:
    """What a round used: the most tests and channels held at once."""

    peak_tests: int = 0
    peak_channels: int = 0


class Scheduler:
    """Admits claims atomically, in plan order (see the module's docstring)."""

    def __init__(self, max_channels: int) -> None:
        if max_channels < 1:
            raise ValueError("max_channels must be >= 1")
        self.max_channels = max_channels
        self.usage = Usage()
        self._busy: set[Hashable] = set()
        self._channels = 0
        self._running = 0
        self._waiting: list[_Waiter] = []  # in plan order
        self._channel_blocked = False  # a waiter with free resources waits for channels

    def need(self, claim: Claim) -> int:
        """Channels a claim takes from the pool: at least 0, at most the whole limit."""
        return min(max(claim.channels, 0), self.max_channels)

    def fits(self, claim: Claim) -> bool:
        """Whether `claim` could start now (its resources free, its channels available)."""
        free = self._busy.isdisjoint(claim.resources)
        return free and self._channels + self.need(claim) <= self.max_channels

    @contextlib.asynccontextmanager
    async def hold(self, order: int, claim: Claim) -> AsyncIterator[None]:
        """Wait until `claim` is granted, hold it for the body, release it whatever happens
        (a cancel while waiting leaves nothing held)."""
        waiter = _Waiter(order, claim, asyncio.get_running_loop().create_future())
        self._enqueue(waiter)
        try:
            await waiter.granted
        except BaseException:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self._release(claim)  # granted just as the cancel came
            else:
                with contextlib.suppress(ValueError):  # a pass may have dropped it already
                    self._waiting.remove(waiter)
                self._admit()  # it may have held later claims back from the channels
            raise
        try:
            yield
        finally:
            self._release(claim)

    def _enqueue(self, waiter: _Waiter) -> None:
        if self._waiting and self._waiting[-1].order > waiter.order:
            self._waiting.append(waiter)
            self._waiting.sort(key=lambda w: w.order)
            self._admit()
        elif self.take_last(waiter.claim):
            waiter.granted.set_result(None)
        else:
            self._waiting.append(waiter)

    def take_last(self, claim: Claim) -> bool:
        """Take `claim` now if it may start as the last in plan order (nothing released since
        the last pass, so only it can change); else note what it waits for."""
        if not self._busy.isdisjoint(claim.resources):
            return False
        if self._channel_blocked or not self.fits(claim):
            self._channel_blocked = True
            return False
        self._take(claim)
        return True

    def _admit(self) -> None:
        """One pass in plan order over the waiting claims, granting each that may start."""
        left: list[_Waiter] = []
        self._channel_blocked = False
        for w in self._waiting:
            if w.granted.done():
                continue
            if self._busy.isdisjoint(w.claim.resources):
                if not self._channel_blocked and self.fits(w.claim):
                    self._take(w.claim)
                    w.granted.set_result(None)
                    continue
                self._channel_blocked = True
            left.append(w)
        self._waiting = left

    def _take(self, claim: Claim) -> None:
        self._busy |= claim.resources
        self._channels += self.need(claim)
        self._running += 1
        self.usage.peak_tests = max(self.usage.peak_tests, self._running)
        self.usage.peak_channels = max(self.usage.peak_channels, self._channels)

    def _release(self, claim: Claim) -> None:
        self._busy -= claim.resources
        self._channels -= self.need(claim)
        self._running -= 1
        self._admit()


def first_wave(claims: Iterable[Claim], max_channels: int) -> Usage:
    """The tests and channels that start at once when a round begins: what its plan says.

    >>> first_wave([Claim(frozenset({"a"}), 2), Claim(frozenset({"a"}), 2),
    ...             Claim(frozenset({"b"}), 2)], 64)
    Usage(peak_tests=2, peak_channels=4)
    """
    s = Scheduler(max_channels)
    for c in claims:
        s.take_last(c)
    return s.usage
