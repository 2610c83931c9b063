"""The planning problem as plain data: a list of `Buffer`s, and the one validator.

A `Buffer` is a block of bytes alive over the steps `[start, end]` (inclusive). Every
planner takes a list of them and returns offsets; nothing else. That is the 2D picture of
Chainer-Opt [Sekiyama 2018]: time on x, address on y, each buffer a rectangle; a plan is
valid when no two rectangles overlap.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from ..errors import PlanError


@dataclass(frozen=True)
class Buffer:
    """`size` bytes alive from step `start` to step `end`, both inclusive; buffers of
    different `color`s never share bytes (parallel-safe sharing)."""
    id: Hashable
    start: int
    end: int
    size: int
    color: int = 0

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise PlanError(f"buffer {self.id}: end {self.end} < start {self.start}")
        if self.size < 0:
            raise PlanError(f"buffer {self.id}: negative size {self.size}")

    def overlaps_in_time(self, other: Buffer) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass
class Placement:
    """What a planner returns: an offset per buffer id, the arena those offsets need, and a
    note (e.g. "optimal"). Planners build it with `Placement.of`, which measures the arena."""
    offsets: dict[Hashable, int]
    note: str = ""
    blocks: list[list[Hashable]] | None = field(default=None, repr=False)
    arena_bytes: int = field(kw_only=True)

    @classmethod
    def of(cls, buffers: Iterable[Buffer], offsets: Mapping[Hashable, int], note: str = "",
           blocks: list[list[Hashable]] | None = None) -> Placement:
        """The placement of `buffers` at `offsets`, its arena measured (`arena_size`)."""
        return cls(dict(offsets), note, blocks, arena_bytes=arena_size(buffers, offsets))


def alignment_value(alignment: Any, who: str = "alignment") -> int:
    """`alignment` as a plain int >= 1 (np.int64(512) -> 512); PlanError naming `who` and
    the value for anything else: a string, a float, a bool, 0 or less."""
    if isinstance(alignment, bool) or not hasattr(type(alignment), "__index__") or \
            alignment < 1:
        raise PlanError(f"{who} must be a whole number of bytes >= 1, not {alignment!r}")
    return int(alignment)


def align_up(n: int, alignment: int) -> int:
    """Round `n` up to a multiple of `alignment` (GE rounds to 512 bytes)."""
    if alignment <= 1:
        return int(n)
    return -(-int(n) // alignment) * alignment


def arena_size(buffers: Iterable[Buffer], offsets: Mapping[Hashable, int]) -> int:
    """Bytes up to the end of the highest buffer placed so far (buffers without an offset
    yet are skipped, so a planner, or the colour stacking, may ask midway)."""
    return max((offsets[b.id] + b.size for b in buffers if b.size and b.id in offsets),
               default=0)


def theoretical_minimum(buffers: Iterable[Buffer]) -> int:
    """The largest sum of bytes alive at any one step: no plan of this schedule beats it."""
    events: dict[int, int] = {}
    for b in buffers:
        events[b.start] = events.get(b.start, 0) + b.size
        events[b.end + 1] = events.get(b.end + 1, 0) - b.size
    return max(accumulate(events[t] for t in sorted(events)), default=0)


def live_bytes_per_step(buffers: Iterable[Buffer], steps: int) -> list[int]:
    """Bytes alive at each step 0..steps-1 (for plots and the minimum's location)."""
    diff = [0] * (steps + 1)
    for b in buffers:
        diff[max(b.start, 0)] += b.size
        diff[min(b.end + 1, steps)] -= b.size
    return list(accumulate(diff[:steps]))


def validate_offsets(buffers: Sequence[Buffer], offsets: Mapping[Hashable, int],
                     arena_bytes: int | None = None, alignment: int = 1,
                     handovers: Iterable[tuple[Hashable, Hashable]] = ()) -> None:
    """Prove that no two buffers alive at the same step overlap in the arena.

    The one exception is an in-place hand-over `(a, b)` (`_check_handovers`); whether the
    op producing b may overwrite a is `MemoryPlan.validate`'s to check, with the graph.
    Buffers of different colours never share bytes, at any step; offsets are aligned,
    non-negative and inside the arena. The verdict does not depend on the order of either
    list. PlanError names the buffers, their intervals, their byte ranges and the step."""
    if len({b.id for b in buffers}) != len(buffers):
        raise PlanError("two buffers share an id")
    for b in buffers:
        _check_offset(b, offsets, arena_bytes, alignment)
    handovers = list(handovers)
    _check_handovers(buffers, offsets, handovers)
    _check_colours(buffers, offsets)
    pair = first_overlap(buffers, offsets, handovers)
    if pair is not None:
        o, b = pair
        o_lo, lo = offsets[o.id], offsets[b.id]
        raise PlanError(f"{o.id} [{o.start},{o.end}] at bytes [{o_lo},{o_lo + o.size}) and "
                        f"{b.id} [{b.start},{b.end}] at bytes [{lo},{lo + b.size}) overlap at "
                        f"step {max(o.start, b.start)} while both are alive")


def _check_offset(b: Buffer, offsets: Mapping[Hashable, int], arena_bytes: int | None,
                  alignment: int) -> None:
    """One buffer's offset: present, an integer, non-negative, aligned, inside the arena."""
    if b.id not in offsets:
        raise PlanError(f"buffer {b.id} has no offset")
    off = offsets[b.id]
    if isinstance(off, bool) or not hasattr(type(off), "__index__"):   # np.int64 is fine
        raise PlanError(f"buffer {b.id}: offset {off!r} is not an integer")
    if off < 0:
        raise PlanError(f"buffer {b.id}: negative offset {off}")
    if alignment > 1 and off % alignment:
        raise PlanError(f"buffer {b.id}: offset {off} is not a multiple of {alignment}")
    if arena_bytes is not None and off + b.size > arena_bytes:
        raise PlanError(f"buffer {b.id}: bytes [{off},{off + b.size}) run past the arena "
                        f"of {arena_bytes} bytes")


def _check_handovers(buffers: Sequence[Buffer], offsets: Mapping[Hashable, int],
                     handovers: Sequence[tuple[Hashable, Hashable]]) -> None:
    """Each in-place pair (a, b): a is born before b's first step and dies at it, at b's
    offset, with b's size; no buffer gives or takes bytes twice."""
    by_id = {b.id: b for b in buffers}
    gives: dict[Hashable, Hashable] = {}
    takes: dict[Hashable, Hashable] = {}
    for a, b in handovers:
        for t in (a, b):
            if t not in by_id:
                raise PlanError(f"in-place {a} -> {b}: {t} is not a planned buffer")
        if a in gives or b in takes:
            twice = f"{a} already gives its bytes to {gives[a]}" if a in gives else \
                f"{b} already takes the bytes of {takes[b]}"
            raise PlanError(f"in-place {a} -> {b}: {twice}")
        gives[a], takes[b] = b, a
        ba, bb = by_id[a], by_id[b]
        if not ba.start < bb.start == ba.end or offsets[a] != offsets[b] or \
                ba.size != bb.size:
            raise PlanError(f"in-place {a} -> {b} is not a hand-over: {a} [{ba.start},"
                            f"{ba.end}] at {offsets[a]} size {ba.size}, {b} [{bb.start},"
                            f"{bb.end}] at {offsets[b]} size {bb.size} ({a} must be born "
                            f"before {b}'s first step and die at it, at the same offset "
                            "with the same size)")


def _check_colours(buffers: Sequence[Buffer], offsets: Mapping[Hashable, int]) -> None:
    """Buffers of different colours never share bytes, whenever they live: a sweep over
    addresses that keeps, per colour, the buffer reaching highest so far."""
    if len({b.color for b in buffers}) < 2:
        return
    top: dict[int, Buffer] = {}        # colour -> buffer with the highest end so far
    for b in sorted((b for b in buffers if b.size), key=lambda b: (offsets[b.id], str(b.id))):
        lo = offsets[b.id]
        for c, o in top.items():
            if c != b.color and offsets[o.id] + o.size > lo:
                raise PlanError(f"{o.id} (colour {o.color}) at bytes [{offsets[o.id]},"
                                f"{offsets[o.id] + o.size}) and {b.id} (colour {b.color}) "
                                f"at bytes [{lo},{lo + b.size}) share bytes: buffers of "
                                "different colours never do")
        o = top.get(b.color)
        if o is None or offsets[o.id] + o.size < lo + b.size:
            top[b.color] = b


def first_overlap(buffers: Sequence[Buffer], offsets: Mapping[Hashable, int],
                  handovers: Iterable[tuple[Hashable, Hashable]] = ()
                  ) -> tuple[Buffer, Buffer] | None:
    """Two buffers alive at a common step whose bytes overlap, or None: (the one placed
    first, the one that starts later); an in-place pair (a, b) does not count. A sweep
    over time; the live set is kept sorted by offset, so a new buffer only needs checking
    against its two neighbours (the live set is disjoint). O(n log n)."""
    by_id = {b.id: b for b in buffers}
    handed = {b: a for a, b in handovers}
    order = sorted((b for b in buffers if b.size), key=lambda b: (b.start, offsets[b.id]))
    ends: list[tuple[int, int]] = []        # heap of (end step, index in order)
    live_lo: list[int] = []                 # offsets of live buffers, sorted
    live: list[Buffer] = []                 # the live buffers, in the same order
    alive: set[Hashable] = set()

    def drop(x: Buffer) -> None:
        if x.id not in alive:       # already handed over in place
            return
        j = bisect.bisect_left(live_lo, offsets[x.id])
        while live[j].id != x.id:
            j += 1
        del live_lo[j], live[j]
        alive.discard(x.id)

    for i, b in enumerate(order):
        while ends and ends[0][0] < b.start:
            drop(order[heapq.heappop(ends)[1]])
        prev = handed.get(b.id)
        if prev is not None and prev in alive:
            drop(by_id[prev])   # the in-place input hands its bytes over at this step
        lo, hi = offsets[b.id], offsets[b.id] + b.size
        k = bisect.bisect_left(live_lo, lo)
        for j in (k - 1, k):
            if 0 <= j < len(live):
                o = live[j]
                if offsets[o.id] < hi and lo < offsets[o.id] + o.size:
                    return o, b
        live_lo.insert(k, lo)
        live.insert(k, b)
        alive.add(b.id)
        heapq.heappush(ends, (b.end, i))
    return None
