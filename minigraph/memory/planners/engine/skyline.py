"""The engine room's best fit structures: bestfit.py's `Skyline` and `Unplaced`, made fast
(read bestfit.py first; its loop, `bestfit_offsets`, runs these through the same methods).

- `Skyline` keeps the lines in a doubly linked list over the time axis and finds the
  lowest in a heap, where bestfit.py's reads every line: O(log n) a round, not O(n).
- `Unplaced` keeps the unplaced buffers sorted by start, so the buffers that start on a
  line are a run of positions. A short run is read whole (in Python, or in NumPy); a long
  one is searched in a segment tree (`_find`), where bestfit.py's reads the list from
  the best down. It also keeps the deadline: `find` stops the loop with `OutOfTime` once
  it has passed, carrying the offsets placed so far.

Both give bestfit.py's answers (tests/test_planner_tiers.py, tests/test_bestfit_index.py);
`benchmarks/plan_scaling.py` measures how many lines are short.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Sequence

import numpy as np

from ....errors import PlanError
from ...buffers import Buffer
from .budget import NEVER, Deadline, OutOfTime

NONE = (1 << 63) - 1    # the rank of a buffer placed already: worse than any


class Skyline:
    """bestfit.py's `Skyline`, fast: the offset lines as segments [t0, t1] at height h,
    in a doubly linked list over the time axis, and a heap of (height, t0, segment) to
    find the lowest one (lazy: an entry is checked when it is popped, and is stale once
    its segment is dead or has moved: a segment only ever rises, or grows leftward when
    it rises). A dead segment's slot is used again, and the heap is rebuilt when stale
    entries outnumber the live ones, so both stay the size of the skyline, not of the
    whole run (a stale entry that meets a slot used again finds a live line of that very
    height and start: the lowest one all the same)."""

    def __init__(self, t0: int, t1: int):
        self.t0, self.t1, self.h = [t0], [t1], [0]
        self.prev, self.next, self.alive = [-1], [-1], [True]
        self.heap = [(0, t0, 0)]
        self.dead: list[int] = []           # slots free to use again

    def lowest(self) -> tuple[int, int, int, int]:
        """The lowest line, leftmost on ties: (its slot s, t0, t1, h)."""
        if len(self.heap) > 2 * (len(self.h) - len(self.dead)) + 64:
            self.heap = [(self.h[s], self.t0[s], s) for s in range(len(self.h))
                         if self.alive[s]]
            heapq.heapify(self.heap)
        while True:
            h, t0, s = heapq.heappop(self.heap)
            if self.alive[s] and self.h[s] == h and self.t0[s] == t0:
                return s, t0, self.t1[s], h

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


class Unplaced:
    """bestfit.py's `Unplaced`, fast: which is the best (longest-lived) unplaced buffer
    whose lifetime lies inside [t0, t1]? Inside, the buffers with bytes are numbered by
    start (positions p; `where[p]` is the index into the buffers), so those starting in
    [t0, t1] are a run of positions. A short run is read whole: one by one when it is
    very short (`_read`), else in NumPy (`_scan`). A long one is searched in a segment
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

    def __init__(self, buffers: Sequence[Buffer], deadline: Deadline = NEVER):
        self.deadline = deadline
        self.offsets = [-1 if b.size else 0 for b in buffers]     # as bestfit.py's
        self.where = sorted((i for i, b in enumerate(buffers) if b.size),
                            key=lambda i: buffers[i].start)          # stable
        self.position = [0] * len(buffers)
        for p, i in enumerate(self.where):
            self.position[i] = p
        # The searches read the buffers in no particular order: fresh lists in start order
        # (not the Buffer objects, strewn over memory) miss the cache less.
        starts = self.starts = [buffers[i].start for i in self.where]
        ends = self.ends = [buffers[i].end for i in self.where]
        n = len(starts)
        # ranked as bestfit.py's: longest-lived, larger, earlier start, earlier in the list
        by_quality = sorted(zip([s - e for s, e in zip(starts, ends)],
                                [-buffers[i].size for i in self.where], starts, range(n)))
        rank = self.rank = [0] * n
        for r, quality in enumerate(by_quality):
            rank[quality[-1]] = r
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

    def find(self, t0: int, t1: int) -> int:
        """The best unplaced buffer with t0 <= start and end <= t1, by index into the
        buffers, or -1. Past the deadline: `OutOfTime` carrying the offsets so far."""
        if self.deadline.passed():
            raise OutOfTime("bestfit", list(self.offsets))
        p = self._find(t0, t1)
        return self.where[p] if p >= 0 else -1

    def place(self, i: int, offset: int) -> None:
        """Buffer i goes at `offset`: it is no longer a candidate."""
        self.offsets[i] = offset
        p = self.position[i]
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

    def _find(self, t0: int, t1: int) -> int:
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
        """`_find` by reading every buffer that starts on the line, one by one."""
        ends, rank, gone = self.ends, self.rank, self.gone
        best, where = NONE, -1
        for p in range(lo, hi):
            if ends[p] <= t1 and rank[p] < best and not gone[p]:
                best, where = rank[p], p
        return where

    def _scan(self, lo: int, hi: int, t1: int) -> int:
        """`_find` by reading every buffer that starts on the line, in NumPy: for a short
        line this costs less than the descent."""
        ranks = np.where(self.end_left[lo:hi] <= t1, self.rank_array[lo:hi], NONE)
        k = int(ranks.argmin())
        return -1 if ranks[k] == NONE else lo + k
