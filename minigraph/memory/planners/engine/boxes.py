"""The engine room's placed boxes: greedy.py's `PlacedBoxes`, made fast (read greedy.py first).

Greedy-size and GE's level 2 ask "the lowest offset free at every step of these spans" once
per buffer (or block). `PlacedBoxes` answers by reading every placed box; the indexes here
answer the same question, through the same two methods (`add`, `lowest`), with the same
answers (tests/test_scaling.py asks each like a scan of every box), only sooner:

- `BoxTable` reads only the boxes in the way, in NumPy: a few dozen calls and a few
  nanoseconds a box, so cheap while each box has at most a few hundred others in its way
  (random lists, or about sqrt(n) on the hard instances), and quadratic on a training
  graph, where thousands of activations are alive at the turn from forward to backward.
- `FreeSpace` answers from merged byte ranges kept in a segment tree over the steps, so
  its cost does not grow with the boxes in the way.
- For a few hundred boxes the plain list, `PlacedBoxes` itself, is cheapest.

`box_index` picks one of the three by the number of boxes and how much their lifetimes
overlap.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence

import numpy as np

from ....errors import PlanError
from ..greedy import PlacedBoxes, lowest_gap


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
              ) -> PlacedBoxes | BoxTable | FreeSpace:
    """An empty index for boxes of `sizes` bytes over `spans` (a box is named by its
    span's number): `PlacedBoxes` for at most `FEW` boxes; `BoxTable` while the spans make
    at most `DENSE` overlapping pairs per span (it reads every box in the way, which is
    then cheaper) and NumPy's int64 holds them; else `FreeSpace`. All give the same
    answers."""
    if len(spans) <= FEW:
        return PlacedBoxes(spans, sizes)
    if overlapping_pairs(spans) > DENSE * len(spans) or not BoxTable.holds(spans, sizes):
        return FreeSpace(spans, sizes)
    return BoxTable(spans, sizes)


FEW = 700       # about where BoxTable overtakes PlacedBoxes on random lists and hard instances
DENSE = 1200    # about where FreeSpace overtakes BoxTable on the realistic training graphs
STEPS_SAFE = 1 << 50    # BoxTable's keys: a class's base + a start, 52 classes at most
NOT_YET = -1 << 63      # the end of a row not placed yet: before any step


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
