"""A planning clock that a test moves itself (`minigraph.memory.clock.injected`).

`ticking()` makes every read of the clock `STEP` seconds later than the one before, so a
time limit passes after a fixed number of reads: the test that a limit covers the whole
call ("no step runs on past the deadline without looking") is the same on any machine at
any load, and asserts no wall-clock time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from minigraph.memory.clock import injected

STEP = 1e-4            # seconds a read of the clock moves it
AFTER = 0.1            # the reads a call may make once its limit has passed, in seconds


class Ticking:
    """A clock that moves `step` seconds each time it is read."""

    def __init__(self, step: float = STEP) -> None:
        self.t, self.step, self.reads = 0.0, step, 0

    def __call__(self) -> float:
        self.t += self.step
        self.reads += 1
        return self.t


@contextmanager
def ticking(step: float = STEP) -> Iterator[Ticking]:
    """Plan under a `Ticking` clock; `clock.t` afterwards: the seconds the call took on it."""
    clock = Ticking(step)
    with injected(clock):
        yield clock


def within(clock: Ticking, limit: float) -> bool:
    """The call ended at most `AFTER` seconds (of this clock) after its limit."""
    return clock.t <= limit + AFTER
