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
once per buffer. `TimeIndex` answers by reading every placed box in the way: cheap while
few buffers live together (20,000 buffers with ~30 alive per step plan in about 0.3 s of
CPU), quadratic on a training graph, where thousands of activations are alive at the turn
from forward to backward. `FreeSpace` answers from merged byte ranges kept in a segment
tree over the steps, so its cost does not grow with the boxes in the way; `box_index`
picks one of the two by how much the lifetimes overlap. Both give the same offsets.
Best fit keeps its skyline in a heap and its unplaced buffers in a segment tree: at most
3n + 1 rounds of a heap pop and a pruned descent of the tree (log n nodes when the pruning
holds; `benchmarks/plan_scaling.py` measures how far it does).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from operator import itemgetter

from ...errors import PlanError
from ..buffers import Buffer, Placement
from . import register
from .budget import NEVER, Deadline, OutOfTime, stack_unplaced


class TimeIndex:
    """Placed boxes, found by time.

    Boxes are kept in start-sorted lists per lifetime class: class c holds lifetimes
    below `4**c` steps (and at least `4**(c-1)`, roughly). A box of class c that overlaps
    `[s, e]` must start in `(s - 4**c, e]`, a window a few times as long as needed, so a
    query reads a few times the boxes it returns, plus two bisections per class (at most
    ~9 classes for 100,000 steps: on long lists a bisection, which chases pointers all
    over memory, costs more than reading a few more boxes). Each class's list is cut by
    start into buckets of `BUCKET * 4**c` steps, so an insertion moves the entries of one
    bucket, not of the whole list (one sorted list per class made the insertions
    quadratic: on 100,000 random buffers they cost a fifth of GE's time).
    """

    __slots__ = ("_starts", "_boxes")
    BUCKET = 16         # a query window spans at most two buckets of its class, mostly

    def __init__(self) -> None:
        self._starts: dict[int, dict[int, list[int]]] = {}
        self._boxes: dict[int, dict[int, list[tuple[int, int, int]]]] = {}  # (end, lo, hi)

    def add(self, start: int, end: int, lo: int, hi: int) -> None:
        """Record a box alive over steps [start, end] at bytes [lo, hi)."""
        c = ((end - start + 1).bit_length() + 1) // 2      # lifetimes below 4**c
        starts = self._starts.get(c)
        if starts is None:
            starts = self._starts[c] = {}
            self._boxes[c] = {}
        q = start // (self.BUCKET << 2 * c)
        bucket = starts.get(q)
        if bucket is None:
            starts[q], self._boxes[c][q] = [start], [(end, lo, hi)]
            return
        k = bisect_right(bucket, start)
        bucket.insert(k, start)
        self._boxes[c][q].insert(k, (end, lo, hi))

    def in_the_way(self, start: int, end: int) -> list[tuple[int, int]]:
        """Byte ranges [lo, hi) of the placed boxes alive at some step of [start, end]."""
        out: list[tuple[int, int]] = []
        for c, buckets in self._starts.items():
            first = start - (1 << 2 * c)
            width = self.BUCKET << 2 * c
            boxes = self._boxes[c]
            for q in range(first // width, end // width + 1):
                starts = buckets.get(q)
                if starts is not None:
                    i = bisect_right(starts, first)
                    j = bisect_right(starts, end, i)
                    if i < j:
                        out += [(lo, hi) for e, lo, hi in boxes[q][i:j] if e >= start]
        return out

    def in_the_way_of(self, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """Byte ranges of the placed boxes alive at some step of `spans`, each box once:
        the spans go by start, and a box read for one span is not read again for the
        next (if it missed that span's start it ended too early for the next one too).
        A GE block of thousands of tensors close in time would otherwise read and sort
        every long-lived box once per tensor."""
        spans = sorted(spans)
        out: list[tuple[int, int]] = []
        for c, buckets in self._starts.items():
            reach, width = 1 << 2 * c, self.BUCKET << 2 * c
            boxes = self._boxes[c]
            read: dict[int, int] = {}               # bucket -> how far it has been read
            for start, end in spans:
                first = start - reach
                for q in range(first // width, end // width + 1):
                    starts = buckets.get(q)
                    if starts is None:
                        continue
                    i = max(bisect_right(starts, first), read.get(q, 0))
                    j = bisect_right(starts, end, i)
                    if i < j:
                        out += [(lo, hi) for e, lo, hi in boxes[q][i:j] if e >= start]
                        read[q] = j
        return out

    def lowest(self, spans: Iterable[tuple[int, int]], size: int, fit: str = "lowest"
               ) -> int:
        """`lowest_gap` of the boxes alive at some step of `spans`, for `size` bytes."""
        spans = list(spans)
        taken = self.in_the_way(*spans[0]) if len(spans) == 1 else self.in_the_way_of(spans)
        return lowest_gap(taken, size, fit)


def box_index(spans: Sequence[tuple[int, int]]) -> TimeIndex | FreeSpace:
    """An empty index for boxes with these lifetimes: `TimeIndex` while the lifetimes
    make at most `DENSE` overlapping pairs per box (it reads every box in the way, which
    is then cheaper), else `FreeSpace`. Both give the same answers."""
    if overlapping_pairs(spans) > DENSE * len(spans):
        return FreeSpace(spans)
    return TimeIndex()


DENSE = 200     # about where FreeSpace overtakes TimeIndex on the hard instances


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

    __slots__ = ("_rank", "_leaves", "_used", "_cover", "_stride", "_probes", "_wide")
    WIDE_PER_BOX = 8
    PROBES_PER_BOX = 4
    PROBES_PER_QUERY = 8

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        bounds = sorted({s for s, _ in spans} | {e + 1 for _, e in spans})
        self._rank = {t: k for k, t in enumerate(bounds)}     # stretch k starts at bounds[k]
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

    def add(self, start: int, end: int, lo: int, hi: int) -> None:
        """Record a box alive over steps [start, end] at bytes [lo, hi); `start` and
        `end` must bound one of the spans the index was made for."""
        s, e = self._stretches(start, end)
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

    def unions(self, spans: Iterable[tuple[int, int]]) -> list[tuple[list[int], list[int]]]:
        """Merged byte ranges (los, his), probes first: together every box alive at some
        step of `spans`, and no other."""
        probes, nodes, covers = {}, {}, {}
        used, cover, k = self._used, self._cover, self._stride
        for start, end in spans:
            s, e = self._stretches(start, end)
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

    def lowest(self, spans: Iterable[tuple[int, int]], size: int, fit: str = "lowest"
               ) -> int:
        """`lowest_gap` of the boxes alive at some step of `spans`, for `size` bytes."""
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
    index = box_index([(b.start, b.end) for b in buffers if b.size])
    offsets = [0] * len(buffers)
    for k, i in enumerate(order):
        b = buffers[i]
        if not b.size:
            continue
        if deadline.passed():
            raise OutOfTime("greedy-size", _unplaced_after(buffers, offsets, order[k:]))
        off = index.lowest([(b.start, b.end)], b.size, fit)
        offsets[i] = off
        index.add(b.start, b.end, off, off + b.size)
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
    items = [buffers[k] for k in where]
    if not items:
        return offsets
    pool = _Unplaced.of(items)
    sky = Skyline(min(b.start for b in items), max(b.end for b in items))
    left = len(items)
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
        sky.place(s, items[p])
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
    (lazy: an entry is checked when it is popped). Segments are never changed, only
    replaced by new ones, so an entry is stale once its segment is dead."""

    def __init__(self, t0: int, t1: int):
        self.t0, self.t1, self.h = [t0], [t1], [0]
        self.prev, self.next, self.alive = [-1], [-1], [True]
        self.heap = [(0, t0, 0)]

    def lowest(self) -> int:
        """The lowest line, leftmost on ties."""
        while True:
            h, t0, s = heapq.heappop(self.heap)
            if self.alive[s] and self.h[s] == h and self.t0[s] == t0:
                return s

    def place(self, s: int, b: Buffer) -> None:
        """Put `b` on line `s`: the line splits into the part before `b`, the top of `b`,
        and the part after it."""
        h, t0, t1 = self.h[s], self.t0[s], self.t1[s]
        pieces = []
        if b.start > t0:
            pieces.append(self._new(t0, b.start - 1, h))
        mid = self._new(b.start, b.end, h + b.size)
        pieces.append(mid)
        if b.end < t1:
            pieces.append(self._new(b.end + 1, t1, h))
        self._replace(s, pieces)
        self._settle(mid)

    def lift(self, s: int) -> None:
        """Nothing fits on line `s`: raise it to its lower neighbour and merge them."""
        nbrs = [self.h[q] for q in (self.prev[s], self.next[s]) if q >= 0]
        if not nbrs:     # one line over all time and nothing fits: cannot happen
            raise PlanError("bestfit: no buffer fits under the only offset line")
        self._join(s, min(nbrs))

    def _new(self, t0: int, t1: int, h: int) -> int:
        self.t0.append(t0), self.t1.append(t1), self.h.append(h)
        self.prev.append(-1), self.next.append(-1), self.alive.append(True)
        heapq.heappush(self.heap, (h, t0, len(self.h) - 1))
        return len(self.h) - 1

    def _link(self, a: int, b: int) -> None:
        if a >= 0:
            self.next[a] = b
        if b >= 0:
            self.prev[b] = a

    def _replace(self, s: int, pieces: list[int]) -> None:
        """Segment `s` dies; `pieces`, left to right, take its place in the list."""
        self.alive[s] = False
        self._link(self.prev[s], pieces[0])
        for a, c in zip(pieces, pieces[1:]):
            self._link(a, c)
        self._link(pieces[-1], self.next[s])

    def _settle(self, s: int) -> None:
        """Merge s with neighbours of the same height (lines never touch at one height)."""
        if any(q >= 0 and self.h[q] == self.h[s] for q in (self.prev[s], self.next[s])):
            self._join(s, self.h[s])

    def _join(self, s: int, h: int) -> None:
        """Segment s, set to height h, and its neighbours at height h become one new line."""
        a, b = self.prev[s], self.next[s]
        first = a if a >= 0 and self.h[a] == h else s
        last = b if b >= 0 and self.h[b] == h else s
        m = self._new(self.t0[first], self.t1[last], h)
        for q in {first, s, last}:
            self.alive[q] = False
        self._link(self.prev[first], m)
        self._link(m, self.next[last])


class _Unplaced:
    """The unplaced buffers, for one question: which is the best (longest-lived) one
    whose lifetime lies inside [t0, t1]? A segment tree over the buffers sorted by start
    keeps, per node, the best rank and the earliest end among its unplaced buffers. The
    buffers starting in [t0, t1] are a run of leaves, covered by O(log) nodes read bottom
    up; a branch-and-bound descent from them, left to right, skips a node that cannot fit
    (earliest end > t1), cannot win (best rank no better than the one found), or starts
    too late to hold a longer-lived fit than the one found (a buffer starting at t fits
    in at most t1 - t + 1 steps)."""

    INF = float("inf")

    @classmethod
    def of(cls, items: Sequence[Buffer]) -> _Unplaced:
        """The pool of `items` (sorted by start), ranked longest-lived first, then larger,
        then earlier."""
        starts = [b.start for b in items]
        ends = [b.end for b in items]
        by_quality = sorted(range(len(items)), key=lambda p: (starts[p] - ends[p],
                                                              -items[p].size, starts[p], p))
        rank = [0] * len(items)
        for r, p in enumerate(by_quality):
            rank[p] = r
        return cls(starts, ends, rank)

    def __init__(self, starts: list[int], ends: list[int], rank: list[int]):
        self.starts, self.ends, self.rank = starts, ends, rank
        n = len(starts)
        size = 1
        while size < max(n, 1):
            size *= 2
        self.size = size
        self.best = [self.INF] * (2 * size)     # smallest rank (best buffer) below a node
        self.who = [-1] * (2 * size)            # its position
        self.min_end = [self.INF] * (2 * size)
        for p in range(n):
            self.best[size + p], self.who[size + p] = rank[p], p
            self.min_end[size + p] = ends[p]
        self._pull(range(size - 1, 0, -1))

    def _pull(self, nodes: Iterable[int]) -> None:
        """Recompute each of `nodes` from its two children (children before parents)."""
        best, who, min_end = self.best, self.who, self.min_end
        for k in nodes:
            a = 2 * k
            if best[a] > best[a + 1]:
                a += 1
            best[k], who[k] = best[a], who[a]
            min_end[k] = min(min_end[2 * k], min_end[2 * k + 1])

    def left(self) -> list[int]:
        """The positions not removed yet."""
        return [p for p in range(len(self.starts)) if self.who[self.size + p] >= 0]

    def remove(self, p: int) -> None:
        leaf = self.size + p
        self.best[leaf], self.who[leaf], self.min_end[leaf] = self.INF, -1, self.INF
        self._pull(leaf >> d for d in range(1, leaf.bit_length()))     # its ancestors

    def find(self, t0: int, t1: int) -> int:
        """Position of the best unplaced buffer with t0 <= start and end <= t1, or -1."""
        starts = self.starts
        lo, hi = bisect_left(starts, t0), bisect_right(starts, t1)
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
