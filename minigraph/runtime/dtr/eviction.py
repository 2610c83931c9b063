"""Choosing what to evict: the candidates, the order they are offered in, the scores.

When an allocation does not fit, the runtime asks `choose_victims(rt, need)` for the
tensors to evict. The rules, in the order they apply:

* **candidates**: the resident tensors that can be recomputed (`Candidates`). Parameters,
  inputs, graph outputs and outputs of stateful ops never are; pinned tensors (inputs and
  outputs of the running op) are offered, flagged, but never taken.
* **dead first**: a dead tensor (its last reader ran) kept resident after a
  rematerialisation goes before any live one (`DTROptions.dead_first`; the DTR authors'
  simulator scores it like the others, under rules of its own: dtr_research/simrd.py),
  unless a live tensor that is evicted now reads it: that tensor's recomputation would
  only fetch it back (`wanted_back`). DenseNet's concatenations are read again by every
  later layer's recomputation: evicting them first made h_DTR thrash on its trace at half
  its peak, and every score at 0.4 (benchmarks/dtr_heuristics.py).
* **protected last**: the inputs that waiting ops still need are offered only when
  nothing else can go (evicting one only to fetch it back is the first step of thrashing;
  `DTROptions.protect`).
* **sampling**: with `sample`, a seeded random sample of the candidates first, the whole
  set if the sample gives nothing.
* **score**: the runtime's `choose_victim` hook picks one; by default the lowest heuristic
  score (`lowest_score`). A *window* heuristic (Coop [Zhang 2023]) instead evicts the
  cheapest contiguous run of blocks in the arena that frees enough bytes (`coop_window`).

`ScoreInputs` computes what a score may read about a tensor (`TensorView`): evicted
neighbourhoods (DTR's e*), union-find classes, MegEngine's neighbour cost, cached until a
tensor they looked at changes state.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from typing import Any

from .heuristics import TensorView, dtr, dtr_live, dtr_local
from .neighbourhood import (
    DSU,
    evicted_ancestors,
    evicted_region,
    evicted_up,
    live_evicted_region,
)
from .states import EVI, RES


def choose_victims(rt: Any, need: int) -> list[int]:
    """The tensors to evict so that `need` bytes may fit ([] if none may go): Coop's window,
    or one tensor chosen by `rt.choose_victim` among the candidates offered in turn: the
    dead ones (with `dead_first`), then the (sampled) candidates without and with the
    protected ones, then all of them without and with the protected ones."""
    if rt.heuristic.window and rt.arena.tracks_addresses:
        return coop_window(rt, need)
    now, protect, pins, cands = rt.now, rt.protect, rt.pins, rt.candidates.items
    view = rt.scores.view
    if rt.options.dead_first:
        dead = [view(t, now) for t in cands
                if rt.dead[t] and not pins[t] and not wanted_back(rt, t)]
        v = rt.choose_victim(dead, need) if dead else None
        if v is not None:
            return [v.index]
    pool = rt.candidates.sampled()
    passes = (True, False) if rt.options.protect else (False,)
    for offered in ((pool, cands) if pool is not cands else (pool,)):
        for strict in passes:
            v = rt.choose_victim([view(t, now) for t in offered
                                  if not (strict and protect[t] and not pins[t])], need)
            if v is not None:
                return [v.index]
    return []


def wanted_back(rt: Any, t: int) -> bool:
    """Whether a live tensor evicted now reads t: recomputing it would fetch t back."""
    state, dead = rt.state, rt.dead
    return any(state[c] == EVI and not dead[c] for c in rt.program.children[t])


def lowest_score(rt: Any, candidates: list[TensorView], need: int) -> TensorView | None:
    """The unpinned candidate with the lowest heuristic score (the first on ties); a window
    heuristic without addresses scores its cost per byte."""
    h, now, pins = rt.heuristic, rt.now, rt.pins
    free = [v for v in candidates if not pins[v.index]]
    if len(free) == 1:
        return free[0]      # nothing to compare: skip the score (an e* search may be long)
    score = h.score
    if h.window:
        size, cost = rt.size, h.score
        score = lambda v, now: cost(v, now) / size[v.index]   # noqa: E731
    elif score in BOUNDED:
        return _lowest_bounded(free, score, now)
    best, best_s = None, math.inf
    for v in candidates:
        if pins[v.index]:
            continue
        s = score(v, now)
        if best is None or s < best_s:
            best, best_s = v, s
    return best


# Scores known to be >= dtr_local's c0 / (size x staleness), exactly (float division is
# monotone and their evicted-neighbourhood term is >= 0)
BOUNDED = (dtr, dtr_live)


def _lowest_bounded(free: list[TensorView], score: Any, now: float) -> TensorView | None:
    """`lowest_score` for a score bounded below by `dtr_local`: the candidates in the order
    of that cheap bound, each scored only while its bound could still beat (or tie
    earlier than) the best so far. The same choice as scanning them all (the lowest
    score, the first on ties), without searching the evicted neighbourhood of most: on a
    long run that search, not the scan, is what costs."""
    bound = [dtr_local(v, now) for v in free]
    if not all(math.isfinite(b) for b in bound):
        bound = [0.0] * len(free)                  # no pruning
    best, best_s, best_k = None, math.inf, -1
    for k in sorted(range(len(free)), key=bound.__getitem__):
        b = bound[k]
        if best is not None and (b > best_s or b == best_s and k > best_k):
            if b > best_s:
                break
            continue
        s = score(free[k], now)
        if best is None or s < best_s or s == best_s and k < best_k:
            best, best_s, best_k = free[k], s, k
    return best


class Candidates:
    """The resident, replayable tensors, in a list with O(1) add and remove (the last one
    takes a removed one's place: the scan order, which decides ties, is this list's)."""

    def __init__(self, sample: bool | int = False, seed: int = 0):
        self.items: list[int] = []
        self._pos: dict[int, int] = {}
        self.sample, self.rng = sample, random.Random(seed)

    def add(self, t: int) -> None:
        if t not in self._pos:
            self._pos[t] = len(self.items)
            self.items.append(t)

    def remove(self, t: int) -> None:
        k = self._pos.pop(t, None)
        if k is None:
            return
        last = self.items.pop()
        if last != t:
            self.items[k] = last
            self._pos[last] = k

    def sampled(self) -> list[int]:
        """`items` itself, or with `sample` about sqrt(N) of them (or `sample` many) at
        seeded random strides."""
        cand = self.items
        n = len(cand)
        if not self.sample or n <= 4:
            return cand
        k = self.sample if not isinstance(self.sample, bool) else math.isqrt(n - 1) + 1
        if k >= n:
            return cand
        rng, out = self.rng, []
        at = rng.randrange(n)
        span = max(1, 2 * n // k)
        for _ in range(k):
            out.append(cand[at % n])
            at += rng.randint(1, span)
        return out


# --- Coop's sliding window ----------------------------------------------------------------

def coop_window(rt: Any, need: int) -> list[int]:
    """Coop's sliding window [Zhang 2023]: over blocks in address order, the contiguous run
    of free blocks and evictable tensors with at least `need` bytes and the lowest summed
    cost."""
    best_c, best = math.inf, []
    for run in _evictable_runs(rt):
        c, window = _cheapest_window(run, need)
        if c < best_c:
            best_c, best = c, window
    if best:
        return best
    # No window: the runs are all too short. If the free bytes would do, compact (the
    # caller does); else free bytes greedily, the cheapest per byte first, until they would.
    if rt.arena.free_bytes >= need:
        return []
    now, pins, cost, view = rt.now, rt.pins, rt.heuristic.score, rt.scores.view
    best_t, best_s = -1, math.inf
    for t in rt.candidates.items:
        if not pins[t]:
            s = cost(view(t, now), now) / rt.size[t]
            if best_t < 0 or s < best_s:
                best_t, best_s = t, s
    return [best_t] if best_t >= 0 else []


def _evictable_runs(rt: Any) -> Iterator[list[tuple[int, float, int]]]:
    """The arena's blocks left to right as (bytes, cost, tensor or -1 if free), cut into
    runs at every block that cannot be evicted."""
    now, pins, cost = rt.now, rt.pins, rt.heuristic.score
    state, replayable, view = rt.state, rt.program.replayable, rt.scores.view
    run: list[tuple[int, float, int]] = []
    for _start, nb, owner in list(rt.arena.blocks()):
        if owner is None:
            run.append((nb, 0.0, -1))
        elif isinstance(owner, int) and state[owner] == RES and replayable[owner] \
                and not pins[owner]:
            run.append((nb, max(0.0, cost(view(owner, now), now)), owner))
        else:
            yield run
            run = []
    yield run


def _cheapest_window(run: list[tuple[int, float, int]], need: int) -> tuple[float, list[int]]:
    """The cheapest window of one run with >= `need` bytes (the first on ties), by two
    pointers: costs are >= 0, so for each right end the shortest window that is big enough
    is also the cheapest."""
    best_c, best = math.inf, []
    lo, have, c = 0, 0, 0.0
    for hi, (nb, cc, _) in enumerate(run):
        have += nb
        c += cc
        while lo < hi and have - run[lo][0] >= need:
            have -= run[lo][0]
            c -= run[lo][1]
            lo += 1
        if have >= need and c < best_c:
            best_c, best = c, [t for _, _, t in run[lo:hi + 1] if t >= 0]
    return best_c, best


# --- what a score may read ----------------------------------------------------------------

class ScoreInputs:
    """The costs a `TensorView` reads, computed on demand: evicted neighbourhoods (cached;
    each entry dropped when a tensor its search looked at is evicted or comes back), and
    the union-find classes of evicted tensors (DTR-eq, MegEngine's DsuNode)."""

    def __init__(self, rt: Any):
        self.rt, p = rt, rt.program
        n = len(p.tensors)
        self._views: list[TensorView | None] = [None] * n
        self._cache: dict[tuple[str, int], float] = {}
        self._watch: dict[int, list[tuple[str, int]]] = {}   # tensor -> keys that read it
        self.dsu_eq = DSU(n, rt.cost_t)
        self.dsu_mge = DSU(n, rt.cost_t)
        self._mge_adj: list[list[int]] | None = None

    def view(self, t: int, now: float) -> TensorView:
        v = self._views[t]
        if v is None:
            v = self._views[t] = TensorView(self.rt, t)
        v.now = now
        return v

    def evicted(self, t: int) -> None:
        """t was evicted (or fake-deleted): it joins its evicted neighbours' classes."""
        self.changed(t)
        self.dsu_eq.add(t, self.rt.program.adj[t])
        self.dsu_mge.add(t, self.mge_neighbours(t))

    def returned(self, t: int) -> None:
        """t is resident again, or freed for good."""
        self.changed(t)
        self.dsu_eq.remove(t)
        self.dsu_mge.remove(t)

    def changed(self, t: int) -> None:
        cache = self._cache
        for key in self._watch.pop(t, ()):
            if cache.pop(key, None) is not None and key[0] == "u":
                cache.pop(("e", key[1]), None)      # both are summed from the "u" part
                cache.pop(("l", key[1]), None)

    def _cached(self, kind: str, t: int, fn: Callable[[list[int]], float]) -> float:
        key = (kind, t)
        c = self._cache.get(key)
        if c is None:
            watched: list[int] = []
            c = self._cache[key] = fn(watched)
            watch = self._watch
            for y in watched:
                lst = watch.get(y)
                if lst is None:
                    watch[y] = [key]
                else:
                    lst.append(key)
        return c

    def neighbour_cost(self, t: int) -> float:
        rt, p = self.rt, self.rt.program
        return self._cached("e", t, lambda w: evicted_region(
            t, p.parents, p.children, rt.evicted, rt.cost_t, w, self.up_cost(t)))

    def live_neighbour_cost(self, t: int) -> float:
        rt, p = self.rt, self.rt.program
        return self._cached("l", t, lambda w: live_evicted_region(
            t, p.parents, p.children, rt.evicted, rt.dead, rt.cost_t, w, self.up_cost(t)))

    def up_cost(self, t: int) -> float:
        """The ancestors' part of t's evicted neighbourhood, cached on its own: below a long
        evicted chain it stays valid while the evicted tensors under t come and go, which
        is what changes from one eviction to the next."""
        rt, p = self.rt, self.rt.program
        return self._cached("u", t, lambda w: evicted_up(t, p.parents, rt.evicted,
                                                         rt.cost_t, w))

    def ancestor_cost(self, t: int) -> float:
        rt, p = self.rt, self.rt.program
        return self._cached("a", t, lambda w: evicted_ancestors(
            t, p.parents, rt.evicted, rt.cost_t, w))

    def evicted_neighbours(self, t: int) -> int:
        ev = self.rt.evicted
        return sum(1 for n in self.rt.program.adj[t] if ev[n])

    def eqclass_cost(self, t: int) -> float:
        d = self.dsu_eq
        roots = {d.find(d.node[n]) for n in self.rt.program.adj[t] if d.node[n] >= 0}
        return sum(d.total[r] for r in roots)

    def megengine_cost(self, t: int) -> float:
        d, cost = self.dsu_mge, self.rt.cost_t
        s = 0.0
        for n in self.mge_neighbours(t):
            k = d.node[n]
            if k >= 0:
                s += max(d.total[d.find(k)], cost[n])
        return s

    def mge_neighbours(self, t: int) -> list[int]:
        """MegEngine's neighbours of t: its producer's arena inputs and sibling outputs."""
        if self._mge_adj is None:
            p = self.rt.program
            adj: list[list[int]] = [[] for _ in p.tensors]
            for op in p.ops:
                ins = [i for i in op.inputs if p.arena[i]]
                outs = [o for o in op.outputs if p.arena[o]]
                for o in outs:
                    adj[o] = ins + [s for s in outs if s != o]
            self._mge_adj = adj
        return self._mge_adj[t]
