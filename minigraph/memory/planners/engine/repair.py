"""Local repair: lower a plan's arena by re-placing the buffers around the steps that set it.

The exact search (`search.py`) needs tables that grow with the pairs of buffers alive
together: tens of millions of entries on a training step of 20,000 buffers, more than a
time limit of seconds allows, and on a tight tiling of a few hundred buffers its
depth-first search may miss the last percent for minutes. Both cases start from a plan
that is good almost everywhere and too high at a few steps. Repair works on that plan
alone, as a *ruin and recreate* large-neighbourhood search [Shaw 1998]: take out the
buffers near the top of the arena around one step that sets it (a time window around
that step, an offset band below the top), fix every other buffer where it is, and put the
ones taken out back, one by one, each in the lowest gap the fixed ones (and those put
back before it) leave over its whole lifetime (first fit, as greedy.py's `lowest_gap`),
in an order drawn at random: largest first, longest first, or as they lay. The new plan
is kept when it sets no higher arena and leaves fewer bytes above the target (the arena
less one grain); once nothing lies above the target, the target moves one grain down.

Every plan it keeps is valid by construction: a buffer put back sits in a gap that no
buffer alive with it at any of its steps covers. It needs no table beyond the buffers'
starts, ends, sizes and offsets (NumPy arrays, read whole for each buffer put back:
O(n) a buffer, fine for 60,000), so it runs at any size, and it stops at its deadline.
It proves nothing: the bound beside its plan is the search's (the theoretical minimum,
or what `window_proof` proved).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from ...buffers import Buffer
from ...clock import now
from .boxes import lowest_gap_of

ORDERS = ("size", "length", "offset", "random")
CANDIDATES = 256         # offsets an ejection weighs (drawn at random beyond that)


class Repair:
    """A plan under repair: offsets by index into `items`, the arena, the target."""

    def __init__(self, items: Sequence[Buffer], offsets: Sequence[int], grain: int,
                 seed: int = 0) -> None:
        self.start = np.array([b.start for b in items], dtype=np.int64)
        self.end = np.array([b.end for b in items], dtype=np.int64)
        self.size = np.array([b.size for b in items], dtype=np.int64)
        self.off = np.array(offsets, dtype=np.int64)
        self.grain = max(grain, 1)
        self.rng = random.Random(seed)
        self.arena = int((self.off + self.size).max()) if len(items) else 0
        self.target = self.arena - self.grain
        self.moves = 0          # ruins tried
        self.kept = 0           # of them, kept

    def excess(self, off: np.ndarray) -> tuple[int, int]:
        """(arena, bytes above the target, summed over buffers): the score to lower."""
        top = off + self.size
        return int(top.max()), int(np.maximum(top - self.target, 0).sum())

    def ruin(self) -> np.ndarray:
        """The indices of the buffers to take out: those that reach above the target in a
        time window around one step of one of them, and those below them in an offset
        band, alive in the window."""
        top = self.off + self.size
        high = np.flatnonzero(top > self.target)
        v = int(high[self.rng.randrange(len(high))])
        half = self.rng.choice((0, 1, 2, 4, 8, 16))
        lo_t, hi_t = int(self.start[v]) - half, int(self.end[v]) + half
        depth = self.arena * self.rng.choice((0.05, 0.1, 0.2, 0.35, 0.5))
        alive = (self.start <= hi_t) & (self.end >= lo_t)
        band = top > self.arena - depth
        picked = np.flatnonzero(alive & band)
        limit = self.rng.choice((8, 16, 24, 40))
        if len(picked) > limit:             # the highest ones, at most `limit`
            picked = picked[np.argsort(-top[picked], kind="stable")[:limit]]
        return np.union1d(picked, [v])

    def recreate(self, out: np.ndarray) -> np.ndarray:
        """Offsets with the buffers `out` put back, one by one, first fit, in an order
        drawn at random."""
        off = self.off.copy()
        off[out] = -1
        how = self.rng.choice(ORDERS)
        keys = {"size": -self.size[out], "length": self.start[out] - self.end[out],
                "offset": self.off[out]}
        if how == "random":
            order = list(out)
            self.rng.shuffle(order)
        else:
            order = [int(out[k]) for k in np.lexsort((self.rng_keys(len(out)), keys[how]))]
        fit = "best" if self.rng.random() < 0.3 else "lowest"
        for i in order:
            off[i] = self.gap_for(i, off, fit)
        return off

    def gap_for(self, i: int, off: np.ndarray, fit: str = "lowest") -> int:
        """The offset buffer `i` goes back to: the lowest (or best) gap that the buffers
        already placed in `off` (offset >= 0) and alive with it leave over its lifetime."""
        near = np.flatnonzero((self.start <= self.end[i]) & (self.end >= self.start[i])
                              & (off >= 0))
        near = near[np.argsort(off[near], kind="stable")]
        at = off[near]
        return lowest_gap_of(at, at + self.size[near], int(self.size[i]), fit)

    def rng_keys(self, n: int) -> np.ndarray:
        return np.array([self.rng.random() for _ in range(n)])

    def eject(self) -> np.ndarray:
        """Offsets with one buffer v that reaches above the target moved down to a lower
        offset y (among the tops of the buffers alive with it: `CANDIDATES` drawn at
        random, the one in the way of the fewest bytes kept), and the buffers in its way
        there taken out and put back first fit, largest first (an ejection chain of
        length one)."""
        top = self.off + self.size
        high = np.flatnonzero(top > self.target)
        v = int(high[self.rng.randrange(len(high))])
        way = np.flatnonzero((self.start <= self.end[v]) & (self.end >= self.start[v]))
        way = way[way != v]
        size = int(self.size[v])
        ys = np.unique(np.concatenate(([0], top[way])))
        ys = ys[ys + size <= self.target]
        if not len(ys):
            return self.off
        if len(ys) > CANDIDATES:
            ys = np.array(self.rng.sample(list(ys), CANDIDATES), dtype=np.int64)
        lo, hi = self.off[way], top[way]
        hit = (lo[None, :] < ys[:, None] + size) & (hi[None, :] > ys[:, None])
        cost = (hit * self.size[way][None, :]).sum(axis=1)
        k = int(cost.argmin())
        out = way[hit[k]]
        off = self.off.copy()
        off[v] = int(ys[k])
        off[out] = -1
        for i in out[np.argsort(-self.size[out], kind="stable")]:
            off[i] = self.gap_for(i, off)
        return off

    def step(self) -> bool:
        """One move (a ruin and recreate, or an ejection); True when the new plan is
        kept."""
        self.moves += 1
        before = self.excess(self.off)
        off = self.eject() if self.rng.random() < 0.5 else self.recreate(self.ruin())
        after = self.excess(off)
        if after <= before:
            self.off = off
            self.kept += 1
            if after[1] == 0:               # nothing above the target: lower it
                self.arena = after[0]
                self.target = self.arena - self.grain
            return True
        return False

    def run(self, deadline: float | None, moves: int | None = None, floor: int = 0) -> None:
        """Repair until `deadline` (a `planning clock's `now()` value), `moves` ruins, or the
        arena meets `floor` (a proved lower bound)."""
        while self.arena > floor and (moves is None or self.moves < moves):
            if deadline is not None and now() > deadline:
                return
            self.step()
