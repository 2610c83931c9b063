"""Evicted neighbourhoods: the bookkeeping behind DTR's e* cost.

Evicting a tensor t makes t more expensive to get back *and* makes its evicted neighbours
more expensive: recomputing one of them may now need t first. DTR (Kirisame et al., ICLR
2021, section 4) charges a candidate its own cost c0(t) plus the cost of its evicted
neighbourhood, h_DTR = (c0(t) + e*(t)) / (bytes x staleness), where

    e*(t) = cost of the evicted ancestors reachable through evicted tensors
          + cost of the evicted descendants reachable through evicted tensors

(t's own cost is not part of e*: it is c0, added beside it)

(the authors' simulator keeps these two sets as `region_rev` and `region`).
`evicted_region` computes it by two searches; the runtime caches the result while nothing
changes. `live_evicted_region` charges only what may still be recomputed: a *dead*
evicted descendant (its last reader ran; it is kept only because a tensor computed from it
might need it) costs nothing until a live evicted tensor lies beyond it.

`DSU` is the cheap approximation of the DTR paper's `h_DTR-eq` and of MegEngine's
DsuNode [MegEngine 2021]: union with evicted neighbours on eviction, and on recomputation the
member's cost is subtracted from its class without splitting it ("DSU does not support
deletion").
"""

from __future__ import annotations

from collections.abc import Sequence


def _reach(t: int, edges: Sequence[Sequence[int]], evicted: Sequence[bool],
           seen: set[int]) -> list[int]:
    """The evicted tensors reachable from t along `edges` through evicted tensors only, in
    the order found. Every tensor looked at is added to `seen` (and not looked at again)."""
    found, stack = [], [t]
    while stack:
        x = stack.pop()
        for y in edges[x]:
            if y in seen:
                continue
            seen.add(y)
            if evicted[y]:
                found.append(y)
                stack.append(y)
    return found


def _evicted_reach(t: int, directions: Sequence[Sequence[Sequence[int]]],
                   evicted: Sequence[bool], cost: Sequence[float], total: float,
                   watched: list[int] | None) -> float:
    """`total` plus the cost of every evicted tensor reachable from t through evicted
    tensors only, searching along each edge list in `directions` (up = ancestors, down =
    descendants) with one shared visited set. Every tensor looked at goes to `watched`."""
    seen = {t}
    for edges in directions:
        for y in _reach(t, edges, evicted, seen):
            total += cost[y]
    if watched is not None:
        watched.extend(seen)
    return total


def evicted_region(t: int, up: Sequence[Sequence[int]], down: Sequence[Sequence[int]],
                   evicted: Sequence[bool], cost: Sequence[float],
                   watched: list[int] | None = None, up_total: float | None = None) -> float:
    """Summed cost of t's evicted neighbourhood: the evicted ancestors reachable from t
    through evicted tensors only (what recomputing t would need), plus the evicted
    descendants reachable the same way (what would need t): simrd's `region_rev` and
    `region`. Every tensor looked at is appended to `watched`: the result stays valid
    until one of them changes state. `up_total`: the ancestors' part, if already known
    (`evicted_up`); the same sum, since no ancestor is also a descendant."""
    if up_total is None:
        return _evicted_reach(t, (up, down), evicted, cost, 0.0, watched)
    return _evicted_reach(t, (down,), evicted, cost, up_total, watched)


def evicted_up(t: int, up: Sequence[Sequence[int]], evicted: Sequence[bool],
               cost: Sequence[float], watched: list[int] | None = None) -> float:
    """The ancestors' part of `evicted_region` (summed in the same order)."""
    return _evicted_reach(t, (up,), evicted, cost, 0.0, watched)


def live_evicted_region(t: int, up: Sequence[Sequence[int]], down: Sequence[Sequence[int]],
                        evicted: Sequence[bool], dead: Sequence[bool], cost: Sequence[float],
                        watched: list[int] | None = None,
                        up_total: float | None = None) -> float:
    """`evicted_region` without the dead evicted descendants that no live evicted tensor
    needs: every evicted ancestor counts (recomputing t needs it), an evicted descendant
    counts if it is live or a live evicted tensor is reachable from it through evicted
    tensors. Under eager release a chain of dead tensors (a matmul's raw output, its
    bias-add, ...) hangs below most tensors; the paper's simulator charges it to each of
    them although nothing will ever recompute it while its live end stays resident.
    `up_total` as in `evicted_region`."""
    seen = {t}
    if up_total is None:
        total = 0.0
        for y in _reach(t, up, evicted, seen):
            total += cost[y]
    else:
        total = up_total
    below = _reach(t, down, evicted, seen)
    if watched is not None:
        watched.extend(seen)
    inside = set(below)
    useful = {y for y in below if not dead[y]}
    stack = list(useful)
    while stack:                       # ... and those a live evicted one needs
        x = stack.pop()
        for y in up[x]:
            if y in inside and y not in useful:
                useful.add(y)
                stack.append(y)
    return total + sum(cost[y] for y in useful)


def evicted_ancestors(t: int, up: Sequence[Sequence[int]], evicted: Sequence[bool],
                      cost: Sequence[float], watched: list[int] | None = None) -> float:
    """c0(t) plus the cost of every evicted ancestor recomputing t would need."""
    return _evicted_reach(t, (up,), evicted, cost, cost[t], watched)


class DSU:
    """Union-find over evicted tensors (MegEngine's DsuNode, the DTR paper's eq. classes).

    Each tensor gets a fresh node when it is evicted; a recomputed tensor's cost is
    subtracted from its class and its node is abandoned (classes never split)."""

    def __init__(self, n: int, cost: Sequence[float]):
        self.cost = cost
        self.node = [-1] * n          # tensor -> its current DSU node (-1: not evicted)
        self.parent: list[int] = []
        self.total: list[float] = []

    def find(self, x: int) -> int:
        parent = self.parent
        r = x
        while parent[r] != r:
            r = parent[r]
        while parent[x] != r:          # path compression, iteratively
            parent[x], x = r, parent[x]
        return r

    def add(self, t: int, neighbours: Sequence[int]) -> None:
        k = len(self.parent)
        self.parent.append(k)
        self.total.append(self.cost[t])
        self.node[t] = k
        for n in neighbours:
            m = self.node[n]
            if m < 0:
                continue
            a, b = self.find(m), self.find(k)
            if a != b:
                self.parent[a] = b
                self.total[b] += self.total[a]

    def remove(self, t: int) -> None:
        k = self.node[t]
        if k < 0:
            return
        r = self.find(k)
        self.total[r] -= self.cost[t]
        self.node[t] = -1

    def class_cost(self, t: int) -> float:
        """Cost of t's class (t evicted)."""
        k = self.node[t]
        return self.total[self.find(k)] if k >= 0 else 0.0
