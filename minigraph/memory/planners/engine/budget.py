"""Time limits: one deadline, computed when a planner is called, that every step checks.

A time limit covers the whole planner call, its setup included (the heuristic plan it
starts from, the overlap lists, the search's tables, the ILP's model), so each of those
loops looks at the one `Deadline`. A step that runs past it raises `OutOfTime`, which
never leaves the planner: the planner returns the best plan it knows at that point, and
its note says which step the limit cut.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from ....errors import PlanError
from ...buffers import Buffer
from ...clock import now
from .. import positive_finite

MAX_TIME_LIMIT = 7 * 24 * 3600.0     # a week: any longer limit is a typo, not a plan


class OutOfTime(Exception):
    """A planner step ran past its deadline (internal: the planner catches it).
    `partial`: offsets by index of the buffers the step had placed (-1: not placed)."""

    def __init__(self, step: str, partial: list[int] | None = None):
        super().__init__(step)
        self.step, self.partial = step, partial


class Deadline:
    """A `planning clock's `now()` value to stop at, or none (`at=None`)."""

    __slots__ = ("at",)

    def __init__(self, at: float | None = None):
        self.at = at

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """The deadline `seconds` from now (none for None)."""
        return cls(None if seconds is None else now() + seconds)

    def passed(self) -> bool:
        return self.at is not None and now() > self.at

    def left(self) -> float:
        """Seconds left (inf with no deadline, 0 once passed)."""
        return math.inf if self.at is None else max(self.at - now(), 0.0)

    def check(self, step: str, partial: list[int] | None = None) -> None:
        """Raise `OutOfTime(step)` once the deadline has passed."""
        if self.passed():
            raise OutOfTime(step, partial)


NEVER = Deadline()


def check_time_limit(planner: str, time_limit: object, *, optional: bool = False) -> None:
    """Refuse a time limit that is not a positive, finite number of seconds (NaN or inf
    would never stop; 0 or less cannot plan anything). None passes when `optional`."""
    if time_limit is None and optional:
        return
    if not (positive_finite(time_limit) and time_limit <= MAX_TIME_LIMIT):
        what = "a positive number of seconds" + (" or None" if optional else "")
        raise PlanError(f"{planner}: time_limit must be {what} (at most "
                        f"{MAX_TIME_LIMIT:g}), not {time_limit!r}")


def check_count(planner: str, name: str, value: object, *, most: int | None = None) -> None:
    """Refuse a count option (iterations, node_limit) that is not an int >= 0 (or above
    `most`)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0 and \
        (most is None or value <= most)
    if not ok:
        bound = f" and at most {most:,}" if most is not None else ""
        raise PlanError(f"{planner}: {name} must be an integer >= 0{bound}, not {value!r}")


def stack_unplaced(items: Sequence[Buffer], partial: Sequence[int]) -> list[int]:
    """Complete a partial plan (offset -1: not placed), above every placed byte, in
    O(n log n): the unplaced buffers share blocks by size class (a power of two), a block
    taken by a buffer once its last one has ended; the blocks are stacked. A block's width
    is its class rounded up to the sizes' gcd, so every block starts at a multiple of
    the alignment the sizes were rounded to (3 as well as 512)."""
    unit = math.gcd(*(b.size for b in items)) or 1
    top = max((o + b.size for o, b in zip(partial, items) if o >= 0), default=0)
    top = -(-top // unit) * unit
    out = list(partial)
    rest = sorted((k for k, o in enumerate(partial) if o < 0), key=lambda k: items[k].start)
    busy: dict[int, list[tuple[int, int]]] = {}     # class -> heap of (end, block)
    free: dict[int, list[int]] = {}                 # class -> free blocks
    block_of: list[int] = []
    width: list[int] = []
    for k in rest:
        b = items[k]
        c = max(b.size - 1, 0).bit_length()
        bh, fh = busy.setdefault(c, []), free.setdefault(c, [])
        while bh and bh[0][0] < b.start:
            fh.append(heapq.heappop(bh)[1])
        blk = fh.pop() if fh else len(width)
        if blk == len(width):
            width.append(-(-(1 << c) // unit) * unit)
        block_of.append(blk)
        heapq.heappush(bh, (b.end, blk))
    base = []
    for w in width:
        base.append(top)
        top += w
    for k, blk in zip(rest, block_of):
        out[k] = base[blk]
    return out
