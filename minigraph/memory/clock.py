"""The one clock that every time limit of memory planning reads.

A planner's time limit is wall-clock seconds (what a user waits for), read through `now()`
alone: the deadlines (`planners/engine/budget.py`), the share of a limit each colour gets
(`planners/__init__.py`), the searches and the repair. A test that a limit covers the whole
call runs it under `injected(fake)`, a clock it moves itself, so the test holds on any
machine at any load. Work budgets (moves, nodes) need no clock at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_source: Callable[[], float] = time.perf_counter


def now() -> float:
    """Seconds on the planning clock (`time.perf_counter`, unless a test injected one)."""
    return _source()


@contextmanager
def injected(source: Callable[[], float]) -> Iterator[None]:
    """Read `source()` instead of the machine's clock inside the block (for tests)."""
    global _source
    saved, _source = _source, source
    try:
        yield
    finally:
        _source = saved
