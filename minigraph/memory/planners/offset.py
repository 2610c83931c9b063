"""Offset planners: the 2D picture [Sekiyama 2018] (time on x, address on y, a buffer a box).

Two heuristics, both placing boxes at offsets directly (no "blocks"):

- "greedy-size": largest buffer first, each at the lowest offset that is free over its
  whole lifetime. This is the greedy-by-size heap of TFLite's arena planner and XLA's
  `GlobalDecreasingSizeBestFitHeap` (with `fit="best"`: the smallest gap that fits).
- "bestfit": Chainer-Opt's best-fit heuristic [Sekiyama 2018]: keep a skyline of
  "offset lines"; take the lowest line (leftmost on ties), put there the longest-lived
  buffer whose lifetime fits under it; when none fits, raise the line to its lower
  neighbour and merge them.

Greedy-size (and GE's level 2, in ge.py) asks "the lowest offset free over [start, end]"
once per buffer. `BoxTable` answers by reading every placed box in the way, in NumPy:
a few dozen calls and a few nanoseconds a box, so cheap while each box has at most a few
hundred others in its way (random lists, or about sqrt(n) on the hard instances), and
quadratic on a training graph, where thousands of activations are alive at the turn from
forward to backward. `FreeSpace` answers from merged byte ranges kept in a segment tree
over the steps, so its cost does not grow with the boxes in the way. For a few hundred
boxes a plain list (`BoxList`) is cheapest. `box_index` picks one of the three by the
number of boxes and how much their lifetimes overlap; all give the same offsets.
Best fit keeps its skyline in a heap and its unplaced buffers sorted by start: a short
line's candidates are read whole in NumPy, a long line's found in a segment tree; at most
3n + 1 rounds (`benchmarks/plan_scaling.py` measures how many lines are short).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from operator import itemgetter

import numpy as np

from ...errors import PlanError
from ..buffers import Buffer, Placement
from . import register
from .budget import NEVER, Deadline, OutOfTime, stack_unplaced


class BoxList:
    """Placed boxes in a plain list, read whole for each query: for a few hundred boxes,
    where reading them costs less than the NumPy calls of a `BoxTable` (a search plans
    many such small problems inside a large one)."""

    __slots__ = ("_spans", "_size", "_placed")

    def __init__(self, spans: Sequence[tuple[int, int]], sizes: Sequence[int]) -> None:
        self._spans, self._size = spans, sizes
        self._placed: list[tuple[int, int, int, int]] = []     # (start, end, lo, hi)

    def add(self, spans: Iterable[int], lo: int) -> None:
        """Place the boxes of span numbers `spans` at offset `lo`."""
        for k in spans:
            self._placed.append((*self._spans[k], lo, lo + self._size[k]))

    def lowest(self, spans: Sequence[int], size: int, fit: str = "lowest") -> int:
        """`lowest_gap` of the boxes alive at some step of span numbers `spans`."""
        taken = []
        for k in spans:
            a, b = self._spans[k]
            taken += [(lo, hi) for s, e, lo, hi in self._placed if s <= b and a <= e]
        return lowest_gap(taken, size, fit)


class BoxTable:
    """Placed boxes in NumPy arrays, read whole: "the lowest offset free at every step of
    these spans" when each box has at most a few hundred others in its way.

    Every box's lifetime and size are known before the first is placed, so the table is
    laid out once: a row per span, grouped by lifetime class (class c lives fewer than
    2**c steps and at least 2**(c-1)), by start within a class. A box of class c in the
    way of [s, e] starts in (s + 1 - 2**c, e]: one run of its class's rows, at most about
    twice the rows it must return (one `searchsorted` finds the runs of every class).
    The rows not placed yet or ended before s are dropped; each of the others holds its
    box as one integer, offset in the high bits and size in the low ones, so that one
    `np.sort` lays them out by offset for `lowest_gap_of`. The work is still every box in
    the way, but at a few nanoseconds a box, beside a few dozen NumPy calls a query.
    """

    __slots__ = ("_spans", "_unit", "_bits", "_size", "_row", "_keys", "_window", "_se",
                 "_q", "_end", "_box", "_rows")

    def __init__(self, spans: Sequence[tuple[int, int]], sizes: Sequence[int]) -> None:
        n = len(spans)
        self._spans = spans
        self._unit = math.gcd(*sizes) or 1      # every size, so every offset, is a multiple
        self._bits = (max(sizes, default=0) // self._unit).bit_length()
        self._size = [size // self._unit for size in sizes]
        life = [(e - s + 1).bit_length() for s, e in spans]
        order = sorted(range(n), key=lambda k: (life[k], spans[k][0]))
        self._row = [0] * n                         # span number -> row
        for r, k in enumerate(order):
            self._row[k] = r
        # A row's key is its class's base + its start; the bases lie far enough apart
        # that the window of any span in one class never reaches into the next class.
        t0 = min((s for s, _ in spans), default=0)
        width = max((e for _, e in spans), default=0) - t0 + (2 << max(life, default=0))
        classes = sorted(set(life))
        base = {c: q * width - t0 for q, c in enumerate(classes)}
        self._keys = np.array([base[life[k]] + spans[k][0] for k in order], dtype=np.int64)
        # the window of class c for [s, e]: keys in (base + s + 1 - 2**c, base + e]
        self._window = np.array([[base[c] + 1 - (1 << c) for c in classes],
                                 [base[c] for c in classes]], dtype=np.int64)
        self._se = np.zeros((2, 1), dtype=np.int64)          # scratch for one query
        self._q = np.zeros_like(self._window)
        self._end = np.full(n, NOT_YET, dtype=np.int64)      # last step, once placed
        self._box = np.zeros(n, dtype=np.int64)              # offset << bits | size
        self._rows = np.arange(n)

    @staticmethod
    def holds(spans: Sequence[tuple[int, int]], sizes: Sequence[int]) -> bool:
        """Whether the table's int64 keys can hold these steps, and its boxes these
        sizes stacked one on another (the highest offset any planner can give)."""
        unit = math.gcd(*sizes) or 1
        bits = (sum(sizes) // unit).bit_length() + (max(sizes, default=0) // unit).bit_length()
        return bits < 63 and all(abs(t) < STEPS_SAFE for span in spans for t in span)

    def add(self, spans: Iterable[int], lo: int) -> None:
        """Place the boxes of span numbers `spans` at offset `lo`."""
        if lo % self._unit:
            raise PlanError(f"offset {lo} is not a multiple of {self._unit} bytes, which "
                            "divides every size of this table")
        for k in spans:
            r = self._row[k]
            self._end[r] = self._spans[k][1]
            self._box[r] = (lo // self._unit) << self._bits | self._size[k]

    def in_the_way(self, spans: Sequence[int]) -> np.ndarray:
        """Rows of the placed boxes alive at some step of the span numbers `spans`."""
        if len(spans) > 1:
            return self._in_the_way_of(sorted(self._spans[k] for k in spans))
        s, e = self._spans[spans[0]]
        self._se[0, 0], self._se[1, 0] = s, e
        np.add(self._window, self._se, out=self._q)
        first, last = self._keys.searchsorted(self._q, "right").tolist()
        parts = [self._rows[i:j] for i, j in zip(first, last) if i < j]
        if not parts:
            return self._rows[:0]
        rows = np.concatenate(parts)
        return rows.compress(self._end[rows] >= s)

    def _in_the_way_of(self, spans: list[tuple[int, int]]) -> np.ndarray:
        """`in_the_way` of many spans at once (a GE block of many tensors), by start. A
        row read for one span is not read again for the next: if it ended before that
        span's start, it ended before the next one's too."""
        s = np.array([a for a, _ in spans], dtype=np.int64)
        e = np.array([b for _, b in spans], dtype=np.int64)
        first = self._keys.searchsorted(self._window[0][:, None] + s, "right")  # class, span
        last = self._keys.searchsorted(self._window[1][:, None] + e, "right")
        first[:, 1:] = np.maximum(first[:, 1:], np.maximum.accumulate(last, axis=1)[:, :-1])
        count = np.maximum(last - first, 0).ravel()
        rows = np.arange(count.sum()) + np.repeat(first.ravel() - (np.cumsum(count) - count),
                                                  count)
        since = np.repeat(np.broadcast_to(s, first.shape).ravel(), count)
        return rows.compress(self._end[rows] >= since)

    def lowest(self, spans: Sequence[int], size: int, fit: str = "lowest") -> int:
        """`lowest_gap` of the boxes alive at some step of span numbers `spans`."""
        boxes = np.sort(self._box[self.in_the_way(spans)])
        lo = boxes >> self._bits
        hi = lo + (boxes & ((1 << self._bits) - 1))
        return self._unit * lowest_gap_of(lo, hi, -(-size // self._unit), fit)


def lowest_gap_of(lo: np.ndarray, hi: np.ndarray, size: int, fit: str = "lowest") -> int:
    """`lowest_gap` of the ranges [lo[i], hi[i]) with lo sorted, in NumPy: the top of the
    ranges below each one is a running maximum, and its gap the room under it."""
    if not len(lo):
        return 0
    top = np.maximum.accumulate(hi)
    if fit == "lowest":
        if lo[0] >= size:
            return 0
        room = lo[1:] - top[:-1] >= size
        k = int(room.argmax()) if len(room) else 0
        return int(top[k]) if len(room) and room[k] else int(top[-1])
    gaps = np.empty_like(lo)
    gaps[0] = lo[0]
    np.subtract(lo[1:], top[:-1], out=gaps[1:])
    too_small = gaps < size
    if too_small.all():
        return int(top[-1])
    gaps[too_small] = np.iinfo(np.int64).max
    k = int(gaps.argmin())              # the smallest gap that fits, the lowest on ties
    return 0 if k == 0 else int(top[k - 1])


def box_index(spans: Sequence[tuple[int, int]], sizes: Sequence[int]
              ) -> BoxList | BoxTable | FreeSpace:
    """An empty index for boxes of `sizes` bytes over `spans` (a box is named by its
    span's number): `BoxList` for at most `FEW` boxes; `BoxTable` while the spans make
    at most `DENSE` overlapping pairs per span (it reads every box in the way, which is
    then cheaper) and NumPy's int64 holds them; else `FreeSpace`. All give the same
    answers."""
    if len(spans) <= FEW:
        return BoxList(spans, sizes)
    if overlapping_pairs(spans) > DENSE * len(spans) or not BoxTable.holds(spans, sizes):
        return FreeSpace(spans, sizes)
    return BoxTable(spans, sizes)


FEW = 700       # about where BoxTable overtakes BoxList on random lists and hard instances
DENSE = 1200    # about where FreeSpace overtakes BoxTable on the realistic training graphs
STEPS_SAFE = 1 << 50    # BoxTable's keys: a class's base + a start, 52 classes at most
NOT_YET = -1 << 63      # the end of a row not placed yet: before any step
NONE = (1 << 63) - 1    # the rank of a buffer placed already: worse than any


def overlapping_pairs(spans: Sequence[tuple[int, int]]) -> int:
    """How many pairs of the closed intervals `spans` share a step, in O(n log n)."""
    ends = sorted(e for _, e in spans)
    n = len(spans)
    return n * (n - 1) // 2 - sum(bisect_left(ends, s) for s, _ in spans)


class FreeSpace:
    """Placed boxes, kept to answer "the lowest offset free at every step of these spans"
    without reading every box in the way.

    A segment tree whose leaves are *stretches*: the runs of steps between one lifetime
    bound and the next (a start, or the step after an end), inside which no box begins
    or ends. A span is tiled by O(log) nodes (`_nodes`), and it cuts their ancestors.
    Node v keeps `used[v]`: the byte ranges of the boxes that reach into v, merged into
    disjoint sorted runs - all of them at a *wide* node (over `wide` stretches), else
    only those that cover no whole ancestor of v; and `cover[v]`: the boxes that cover
    all of v but no whole ancestor. The boxes alive at some step of a span are then
    exactly those of `used` at its tiles and of `cover` at the nodes it cuts. Those sets
    can interleave (a training graph's stack of activations, each held over a different
    stretch, is split over many nodes), so every `stride`-th stretch is also a *probe*
    that keeps the exact union of the boxes alive in it: a short list, since the stack
    is a few runs of bytes at any one step. A query reads the probes inside its span
    first, which lets `lowest_free` jump over the stack in a few steps. `stride` and
    `wide` are set from the lifetimes so that a box reaches about `PROBES_PER_BOX`
    probes and `WIDE_PER_BOX` wide nodes on average (beyond one per level), so they
    cost O(n log n) merges in all.
    """

    __slots__ = ("_rank", "_spans", "_size", "_leaves", "_used", "_cover", "_stride",
                 "_probes", "_wide")
    WIDE_PER_BOX = 8
    PROBES_PER_BOX = 4
    PROBES_PER_QUERY = 8

    def __init__(self, spans: Sequence[tuple[int, int]], sizes: Sequence[int]) -> None:
        self._size = sizes
        bounds = sorted({s for s, _ in spans} | {e + 1 for _, e in spans})
        self._rank = {t: k for k, t in enumerate(bounds)}     # stretch k starts at bounds[k]
        self._spans = [self._stretches(s, e) for s, e in spans]    # as stretches
        leaves = 1
        while leaves < len(bounds) - 1:
            leaves *= 2
        self._leaves = leaves
        self._used = [([], []) for _ in range(2 * leaves)]      # (los, his) per node
        self._cover: dict[int, tuple[list[int], list[int]]] = {}
        per_box = max(len(spans), 1)
        reach = sum(self._rank[e + 1] - self._rank[s] for s, e in spans)
        self._stride = max(1, -(-reach // (self.PROBES_PER_BOX * per_box)))
        self._probes: dict[int, tuple[list[int], list[int]]] = {}
        self._wide = max(1, reach // (self.WIDE_PER_BOX * per_box))

    def _stretches(self, start: int, end: int) -> tuple[int, int]:
        """The first and last stretch of steps [start, end]."""
        return self._rank[start], self._rank[end + 1] - 1

    def _nodes(self, s: int, e: int) -> tuple[list[int], set[int]]:
        """The nodes that tile stretches [s, e] (bottom up, as a segment tree is read
        without recursion) and the nodes that span cuts: the tiles' ancestors."""
        lo, hi = s + self._leaves, e + self._leaves + 1
        tiles = []
        while lo < hi:
            if lo & 1:
                tiles.append(lo)
                lo += 1
            if hi & 1:
                hi -= 1
                tiles.append(hi)
            lo >>= 1
            hi >>= 1
        cut: set[int] = set()
        for v in tiles:
            v >>= 1
            while v and v not in cut:
                cut.add(v)
                v >>= 1
        return tiles, cut

    def add(self, spans: Iterable[int], lo: int) -> None:
        """Place the boxes of span numbers `spans` at offset `lo`."""
        for k in spans:
            self._add(*self._spans[k], lo, lo + self._size[k])

    def _add(self, s: int, e: int, lo: int, hi: int) -> None:
        """Record a box alive over stretches [s, e] at bytes [lo, hi)."""
        k = self._stride
        for p in range(-(-s // k), e // k + 1):
            _merge_in(self._probes.setdefault(p, ([], [])), lo, hi)
        used, cover, leaves, wide = self._used, self._cover, self._leaves, self._wide
        tiles, cut = self._nodes(s, e)
        for v in cut:
            _merge_in(used[v], lo, hi)
        for v in tiles:
            _merge_in(used[v], lo, hi)
            if v >= leaves:
                continue
            _merge_in(cover.setdefault(v, ([], [])), lo, hi)
            depth, width = 1, leaves >> v.bit_length()      # v's children, in stretches
            while width > wide:              # a wide node below a tile keeps the box too
                for u in range(v << depth, (v + 1) << depth):
                    _merge_in(used[u], lo, hi)
                depth, width = depth + 1, width >> 1

    def unions(self, spans: Iterable[int]) -> list[tuple[list[int], list[int]]]:
        """Merged byte ranges (los, his), probes first: together every box alive at some
        step of the span numbers `spans`, and no other."""
        probes, nodes, covers = {}, {}, {}
        used, cover, k = self._used, self._cover, self._stride
        for span in spans:
            s, e = self._spans[span]
            first, last = -(-s // k), e // k
            step = max(1, (last - first + 1) // self.PROBES_PER_QUERY)
            for p in range(first, last + 1, step):
                if p in self._probes:
                    probes[p] = self._probes[p]
            tiles, cut = self._nodes(s, e)
            for v in tiles:
                if used[v][0]:
                    nodes[v] = used[v]
            for v in cut:
                if v in cover:
                    covers[v] = cover[v]
        return [*probes.values(), *nodes.values(), *covers.values()]

    def lowest(self, spans: Sequence[int], size: int, fit: str = "lowest") -> int:
        """`lowest_gap` of the boxes alive at some step of span numbers `spans`."""
        sets = self.unions(spans)
        if fit == "lowest":
            return lowest_free(sets, size)
        return lowest_gap(list(heapq.merge(*(zip(*s) for s in sets))), size, fit)


def _merge_in(ranges: tuple[list[int], list[int]], lo: int, hi: int) -> None:
    """Add bytes [lo, hi) to disjoint sorted ranges, merging those it overlaps or touches."""
    los, his = ranges
    i = bisect_left(his, lo)
    j = bisect_right(los, hi, i)
    if i == j:
        los.insert(i, lo)
        his.insert(i, hi)
    else:
        los[i:j] = [min(lo, los[i])]
        his[i:j] = [max(hi, his[j - 1])]


def lowest_free(sets: Sequence[tuple[list[int], list[int]]], size: int) -> int:
    """The lowest offset y >= 0 with [y, y + size) clear of every range of `sets` (each
    disjoint and sorted, as (los, his)). The sets are visited in turn, round and round:
    when one is in the way at y, y jumps past its ranges in the way; the answer is the
    first y that every set in a row leaves in place. Every offset jumped over is blocked,
    so this is the first fit of `lowest_gap` over all the ranges."""
    y, quiet, k, n = 0, 0, 0, len(sets)
    while quiet < n:                    # quiet: sets in a row that leave y in place
        los, his = sets[k]
        j = bisect_right(his, y)                  # the set's first range ending above y
        m = len(los)
        if j < m and los[j] < y + size:
            while j < m and los[j] < y + size:    # in the way: jump past it (and the
                y = his[j]                        # set's next ones, while in the way)
                j += 1
            quiet = 1
        else:
            quiet += 1
        k = k + 1 if k + 1 < n else 0
    return y


def lowest_gap(taken: list[tuple[int, int]], size: int, fit: str = "lowest") -> int:
    """The offset for `size` bytes among the byte ranges `taken`: the lowest gap that
    fits (`fit="lowest"`, first fit), or the smallest such gap (`fit="best"`); the top
    of the highest range when no gap fits."""
    taken.sort(key=itemgetter(0))   # by lo alone: ties cannot change the answer, and ints
    top = 0                         # compare several times faster than tuples
    if fit == "lowest":
        for lo, hi in taken:
            if lo - top >= size:
                return top
            if hi > top:
                top = hi
        return top
    best, best_gap = None, None
    for lo, hi in taken:
        gap = lo - top
        if gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = top, gap
        if hi > top:
            top = hi
    return top if best is None else best


def place_in_order(buffers: Sequence[Buffer], order: Sequence[int], fit: str = "lowest",
                   deadline: Deadline = NEVER) -> list[int]:
    """Offsets (by index into `buffers`) when each buffer in `order` takes the lowest
    (or best) gap free over its whole lifetime among those placed before it. Past
    `deadline`: `OutOfTime` carrying the offsets placed so far (-1: not yet)."""
    if fit not in ("lowest", "best"):
        raise PlanError(f"fit must be 'lowest' or 'best', not {fit!r}")
    queue = [i for i in order if buffers[i].size]         # span k: the k-th one placed
    sizes = [buffers[i].size for i in queue]
    index = box_index([(buffers[i].start, buffers[i].end) for i in queue], sizes)
    offsets = [0] * len(buffers)
    for k, i in enumerate(queue):
        if deadline.passed():
            raise OutOfTime("greedy-size", _unplaced_after(buffers, offsets, queue[k:]))
        off = offsets[i] = index.lowest((k,), sizes[k], fit)
        index.add((k,), off)
    return offsets


def _unplaced_after(buffers: Sequence[Buffer], offsets: list[int], rest: Sequence[int]
                    ) -> list[int]:
    """`offsets` with the buffers of `rest` that take bytes marked unplaced (-1)."""
    out = list(offsets)
    for i in rest:
        if buffers[i].size:
            out[i] = -1
    return out


def size_order(buffers: Sequence[Buffer]) -> list[int]:
    """Largest first; among equal sizes the longer-lived first, then the earlier."""
    return sorted(range(len(buffers)), key=lambda i: (-buffers[i].size,
                                                      buffers[i].start - buffers[i].end,
                                                      buffers[i].start, i))


@register("greedy-size")
def plan_greedy_size(buffers: Sequence[Buffer], *, fit: str = "lowest") -> Placement:
    """Decreasing size, each buffer at the lowest offset free for its whole lifetime
    (TFLite's greedy-by-size, XLA's decreasing-size heap; `fit="best"` takes the smallest
    gap that fits instead of the lowest). O(n log n) for bounded overlap."""
    offsets = place_in_order(buffers, size_order(buffers), fit)
    return Placement.of(buffers, {b.id: off for b, off in zip(buffers, offsets)})


# ---------------------------------------------------------------------------------------
# Chainer-Opt best fit
# ---------------------------------------------------------------------------------------

@register("bestfit")
def plan_bestfit(buffers: Sequence[Buffer]) -> Placement:
    """Chainer-Opt's best fit [Sekiyama 2018, fig. 1].

    The skyline is a list of offset lines over the time axis. Repeat: take the lowest
    line (leftmost on ties); among the unplaced buffers whose lifetime lies within the
    line's steps, place the longest-lived one (larger first on ties) on the line, which
    splits it in up to three; if none fits, raise the line to its lower neighbour and
    merge them (and every equal neighbour). At most 3n + 1 rounds.
    """
    offsets = bestfit_offsets(buffers)
    return Placement.of(buffers, {b.id: o for b, o in zip(buffers, offsets)})


def bestfit_offsets(buffers: Sequence[Buffer], deadline: Deadline = NEVER) -> list[int]:
    """Best fit's offsets, by index into `buffers`. Past `deadline`: `OutOfTime`
    carrying the offsets placed so far (-1: not yet)."""
    offsets = [0] * len(buffers)
    where = sorted((k for k, b in enumerate(buffers) if b.size),
                   key=lambda k: buffers[k].start)                          # stable
    if not where:
        return offsets
    # The loop reads the buffers in no particular order: fresh lists in start order
    # (not the Buffer objects, strewn over memory) miss the cache less.
    starts, ends, sizes = (list(column) for column in
                           zip(*[(buffers[k].start, buffers[k].end, buffers[k].size)
                                 for k in where]))
    pool = _Unplaced.of(starts, ends, sizes)
    sky = Skyline(starts[0], max(ends))
    left = len(where)
    while left:
        if deadline.passed():
            raise OutOfTime("bestfit", _unplaced_after(buffers, offsets,
                                                       [where[p] for p in pool.left()]))
        s = sky.lowest()
        p = pool.find(sky.t0[s], sky.t1[s])
        if p < 0:                 # nothing fits on this line
            sky.lift(s)
            continue
        offsets[where[p]] = sky.h[s]
        pool.remove(p)
        sky.place(s, starts[p], ends[p], sizes[p])
        left -= 1
    return offsets


HEURISTICS = ("greedy-size", "bestfit")


def heuristic_offsets(items: Sequence[Buffer], name: str, deadline: Deadline = NEVER
                      ) -> list[int]:
    """The offsets of heuristic `name` (one of `HEURISTICS`), by index into `items`."""
    if name == "greedy-size":
        return place_in_order(items, size_order(items), deadline=deadline)
    return bestfit_offsets(items, deadline)


def crowded(items: Sequence[Buffer], per_buffer: int = 64) -> bool:
    """More than `per_buffer` buffers alive with each buffer, on average (counted in
    O(n log n)): greedy-size then costs more than bestfit."""
    return overlapping_pairs([(b.start, b.end) for b in items]) > per_buffer * len(items)


def start_plans(items: Sequence[Buffer], names: Sequence[str], deadline: Deadline
                ) -> tuple[list[tuple[str, list[int]]], str]:
    """The plans of the heuristics `names` that finish before `deadline`, listed in the
    order of `names`, and a note ("" when all finished). The cheaper one runs first:
    bestfit when many buffers live together (a long chain), else greedy-size (whose setup
    is only a sort). The first one run always
    comes back: if the deadline cuts it, the buffers it placed keep their offsets and the
    others are stacked above them. A later one that the deadline cuts is left out."""
    plans: dict[str, list[int]] = {}
    note = ""
    dense = len(names) > 1 and crowded(items)
    for name in sorted(names, key=lambda n: (n != "bestfit") == dense):
        try:
            plans[name] = heuristic_offsets(items, name, deadline)
        except OutOfTime as stop:
            if plans:
                note = f"{name} left out: time limit reached"
                break
            placed = sum(1 for o in stop.partial if o >= 0)
            plans[name] = stack_unplaced(items, stop.partial)
            note = (f"time limit reached in {name} after {placed} of {len(items)} buffers; "
                    "the rest stacked above them")
            break
    return [(name, plans[name]) for name in names if name in plans], note


class Skyline:
    """The offset lines of best fit: segments [t0, t1] at height h, in a doubly linked
    list over the time axis, and a heap of (height, t0, segment) to find the lowest one
    (lazy: an entry is checked when it is popped, and is stale once its segment is dead
    or has moved: a segment only ever rises, or grows leftward when it rises). A dead
    segment's slot is used again, and the heap is rebuilt when stale entries outnumber
    the live ones, so both stay the size of the skyline, not of the whole run (a stale
    entry that meets a slot used again finds a live line of that very height and start:
    the lowest one all the same)."""

    def __init__(self, t0: int, t1: int):
        self.t0, self.t1, self.h = [t0], [t1], [0]
        self.prev, self.next, self.alive = [-1], [-1], [True]
        self.heap = [(0, t0, 0)]
        self.dead: list[int] = []           # slots free to use again

    def lowest(self) -> int:
        """The lowest line, leftmost on ties."""
        if len(self.heap) > 2 * (len(self.h) - len(self.dead)) + 64:
            self.heap = [(self.h[s], self.t0[s], s) for s in range(len(self.h))
                         if self.alive[s]]
            heapq.heapify(self.heap)
        while True:
            h, t0, s = heapq.heappop(self.heap)
            if self.alive[s] and self.h[s] == h and self.t0[s] == t0:
                return s

    def place(self, s: int, start: int, end: int, size: int) -> None:
        """Put a buffer (steps start..end, size bytes) on line `s`: the line splits into
        the part before it, its top, and the part after it."""
        h, t0, t1, top = self.h[s], self.t0[s], self.t1[s], self.h[s] + size
        pieces = [self._new(t0, start - 1, h)] if start > t0 else []
        mid = self._new(start, end, top)
        pieces.append(mid)
        if end < t1:
            pieces.append(self._new(end + 1, t1, h))
        left = self.prev[s]
        for q in pieces:
            self._link(left, q)
            left = q
        self._link(left, self.next[s])
        self._kill(s)
        a, c = self.prev[mid], self.next[mid]   # lines never touch at one height: merge
        if (a >= 0 and self.h[a] == top) or (c >= 0 and self.h[c] == top):
            self._join(mid, top)

    def lift(self, s: int) -> None:
        """Nothing fits on line `s`: raise it to its lower neighbour and merge them."""
        a, c = self.prev[s], self.next[s]
        if a < 0 and c < 0:     # one line over all time and nothing fits: cannot happen
            raise PlanError("bestfit: no buffer fits under the only offset line")
        self._join(s, min(self.h[q] for q in (a, c) if q >= 0))

    def _new(self, t0: int, t1: int, h: int) -> int:
        if self.dead:
            s = self.dead.pop()
            self.t0[s], self.t1[s], self.h[s] = t0, t1, h
            self.prev[s], self.next[s], self.alive[s] = -1, -1, True
        else:
            s = len(self.h)
            self.t0.append(t0), self.t1.append(t1), self.h.append(h)
            self.prev.append(-1), self.next.append(-1), self.alive.append(True)
        heapq.heappush(self.heap, (h, t0, s))
        return s

    def _kill(self, s: int) -> None:
        self.alive[s] = False
        self.dead.append(s)

    def _link(self, a: int, b: int) -> None:
        if a >= 0:
            self.next[a] = b
        if b >= 0:
            self.prev[b] = a

    def _join(self, s: int, h: int) -> None:
        """Segment s, raised to height h, takes in its neighbours at height h: one line."""
        a, b = self.prev[s], self.next[s]
        if a >= 0 and self.h[a] == h:
            self.t0[s] = self.t0[a]
            self._link(self.prev[a], s)
            self._kill(a)
        if b >= 0 and self.h[b] == h:
            self.t1[s] = self.t1[b]
            self._link(s, self.next[b])
            self._kill(b)
        self.h[s] = h
        heapq.heappush(self.heap, (h, self.t0[s], s))


class _Unplaced:
    """The unplaced buffers, for one question: which is the best (longest-lived) one
    whose lifetime lies inside [t0, t1]? The buffers starting in [t0, t1] are a run of
    positions (they are sorted by start). A short run is read whole: one by one when it
    is very short (`_read`), else in NumPy (`_scan`). A long one is searched in a segment
    tree that keeps, per node, the best rank and the earliest end among its unplaced
    buffers: the run is covered by O(log) nodes read bottom up, and a branch-and-bound
    descent from them, left to right, skips a node that cannot fit (earliest end > t1),
    cannot win (best rank no better than the one found), or starts too late to hold a
    longer-lived fit than the one found (a buffer starting at t fits in at most
    t1 - t + 1 steps). The tree learns of the buffers placed only when it is next
    searched (`_catch_up`): where every line is short, it is never kept up at all."""

    INF = float("inf")
    FEW = 32            # runs of at most this many buffers are read in Python,
    SCAN = 4096         # of at most this many in NumPy (each costs less than the other
                        # way there), longer ones searched in the tree

    @classmethod
    def of(cls, starts: list[int], ends: list[int], sizes: list[int]) -> _Unplaced:
        """The pool of the buffers given by their steps and sizes (sorted by start),
        ranked longest-lived first, then larger, then earlier."""
        by_quality = sorted(zip([s - e for s, e in zip(starts, ends)],
                                [-z for z in sizes], starts, range(len(starts))))
        rank = [0] * len(starts)
        for r, quality in enumerate(by_quality):
            rank[quality[-1]] = r
        return cls(starts, ends, rank)

    def __init__(self, starts: list[int], ends: list[int], rank: list[int]):
        self.starts, self.ends, self.rank = starts, ends, rank
        n = len(starts)
        self.end_left = np.array(ends, dtype=np.int64)   # for `_scan`: NONE once placed
        self.rank_array = np.array(rank, dtype=np.int64)
        self.gone = bytearray(n)                         # for `_read`: 1 once placed
        self.placed: list[int] = []      # for the tree: placed since it was last searched
        # where the run of a line's bound begins: a line starts at a buffer's start or
        # the step after a buffer's end, and ends the step before one (a dict lookup
        # costs less than a bisection of a long list, which misses the cache at each step)
        bounds = sorted({*starts, *(e + 1 for e in ends)})
        self.first = dict(zip(bounds, np.searchsorted(starts, bounds).tolist()))
        size = 1
        while size < max(n, 1):
            size *= 2
        self.size = size
        self.best = [self.INF] * (2 * size)     # smallest rank (best buffer) below a node
        self.who = [-1] * (2 * size)            # its position
        self.min_end = [self.INF] * (2 * size)
        self.best[size:size + n], self.who[size:size + n] = rank, range(n)     # leaves
        self.min_end[size:size + n] = ends
        self._pull(range(size - 1, 0, -1))

    def _pull(self, nodes: Iterable[int]) -> None:
        """Recompute each of `nodes` from its two children (children before parents)."""
        best, who, min_end = self.best, self.who, self.min_end
        for k in nodes:
            a = 2 * k
            if best[a] > best[a + 1]:
                a += 1
            best[k], who[k] = best[a], who[a]
            x, y = min_end[2 * k], min_end[2 * k + 1]
            min_end[k] = x if x < y else y

    def left(self) -> list[int]:
        """The positions not removed yet."""
        return np.flatnonzero(self.end_left != NONE).tolist()

    def remove(self, p: int) -> None:
        self.end_left[p] = NONE
        self.gone[p] = 1
        self.placed.append(p)

    def _catch_up(self) -> None:
        """Take the buffers placed since the last search out of the tree: their leaves,
        then their ancestors, a level at a time from the bottom."""
        best, who, min_end, size = self.best, self.who, self.min_end, self.size
        for p in self.placed:
            best[size + p], who[size + p], min_end[size + p] = self.INF, -1, self.INF
        nodes, level = [], {(size + p) >> 1 for p in self.placed}
        while level:
            nodes += level
            level = {k >> 1 for k in level if k > 1}
        self._pull(nodes)
        self.placed.clear()

    def find(self, t0: int, t1: int) -> int:
        """Position of the best unplaced buffer with t0 <= start and end <= t1, or -1."""
        starts = self.starts
        lo, hi = self.first.get(t0), self.first.get(t1 + 1)
        if lo is None:
            lo = bisect_left(starts, t0)
        if hi is None:
            hi = bisect_left(starts, t1 + 1)
        if hi - lo <= self.FEW:
            return self._read(lo, hi, t1)
        if hi - lo <= self.SCAN:
            return self._scan(lo, hi, t1)
        if self.placed:
            self._catch_up()
        best, who, min_end, ends, size = self.best, self.who, self.min_end, self.ends, self.size
        left, right = [], []                    # the nodes covering [lo, hi) where one fits
        a, b = lo + size, hi + size
        while a < b:
            if a & 1:
                if min_end[a] <= t1:
                    left.append(a)
                a += 1
            if b & 1:
                b -= 1
                if min_end[b] <= t1:
                    right.append(b)
            a >>= 1
            b >>= 1
        stack = right + left[::-1]              # popped left to right
        best_rank, best_pos, reach = self.INF, -1, t1 + 1
        levels = size.bit_length()
        while stack:
            k = stack.pop()
            if min_end[k] > t1 or best[k] >= best_rank:
                continue
            w = who[k]
            if ends[w] <= t1:                   # the node's best fits: nothing below beats it
                best_rank, best_pos = best[k], w
                reach = t1 - (ends[w] - starts[w])  # a later start fits only shorter lives
                continue
            first = (k << (levels - k.bit_length())) - size     # the node's first position
            if k < size and starts[first] <= reach:
                stack.append(2 * k + 1)
                stack.append(2 * k)
        return best_pos

    def _read(self, lo: int, hi: int, t1: int) -> int:
        """`find` by reading every buffer that starts on the line, one by one."""
        ends, rank, gone = self.ends, self.rank, self.gone
        best, where = NONE, -1
        for p in range(lo, hi):
            if ends[p] <= t1 and rank[p] < best and not gone[p]:
                best, where = rank[p], p
        return where

    def _scan(self, lo: int, hi: int, t1: int) -> int:
        """`find` by reading every buffer that starts on the line, in NumPy: for a short
        line this costs less than the descent."""
        ranks = np.where(self.end_left[lo:hi] <= t1, self.rank_array[lo:hi], NONE)
        k = int(ranks.argmin())
        return -1 if ranks[k] == NONE else lo + k
