"""The data of the exact search (`search.py`): the problem cut into sections, the search
state (what is placed where, what each section still holds), and the search's nodes.
Read `search.py` first; `search_rules.py` holds the moves and the pruning rules.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from ...buffers import Buffer
from .anneal import timed_overlap_lists
from .budget import NEVER, Deadline


class Strategy(NamedTuple):
    """How the search orders its choices (never what it may prune).

    `order`: the static rank that breaks ties, as in MiniMalloc's preorderings, larger
    first: T = the most bytes alive in a section the buffer spans, A = area (bytes x
    steps), Z = size, L = lifetime; the index breaks the remaining ties, or, with a
    `seed` other than 0, a random key fixed by it (restarts that differ in their ties
    only: a depth-first search's time is heavy-tailed, and a restart with other ties
    often finds at once what the first one misses [Gomes 2000]).
    `fit`: which candidate is tried first: "rank" alone, or "flat" (the one whose top
    lands level with a neighbour's floor, then one whose top meets some floor), or
    "pair" (as "flat", then one whose same-size neighbour in time sits at this level).
    `pick`: the section branched on: the one with the "fewest" candidates (leftmost
    on ties; "fewest-right": rightmost), or simply the "left"- or "right"-most.
    """
    order: str
    fit: str
    pick: str
    seed: int = 0


# ---------------------------------------------------------------------------------------
# The problem: the buffers cut into sections, shared by every search of it.
# ---------------------------------------------------------------------------------------

class Problem:
    """The buffers, cut into sections (time ranges where the live set does not change).

    Buffer i lives in sections lo[i] .. hi[i] - 1; section s starts at step cuts[s]. By
    section: `members` (buffer indices),
    `live` (their bytes), `crossing` and `shared` (buffers alive in it and the next, and
    their bytes). `partners`: same size, lifetimes end to end (as the two halves of a box
    cut across time are). `twin_before[i]`: the previous identical buffer, or -1.
    """

    def __init__(self, items: Sequence[Buffer], deadline: Deadline = NEVER):
        self.items = list(items)
        self.size = [b.size for b in items]
        cuts = sorted({b.start for b in items} | {b.end + 1 for b in items})
        self.cuts, self.n_sections = cuts, len(cuts) - 1
        self.lo = [bisect_right(cuts, b.start) - 1 for b in items]
        self.hi = [bisect_right(cuts, b.end) for b in items]
        self.overlaps = timed_overlap_lists(items, deadline)
        self.members, self.live, self.crossing, self.shared = \
            section_tables(self.size, self.lo, self.hi, self.n_sections, deadline)
        self.lower_bound = max(self.live, default=0)
        self.grain = math.gcd(*self.size) if self.size else 1   # offsets are multiples
        self.partners = end_to_end_partners(items)
        self.twin_before = earlier_twins(items)
        self._ranks: dict[tuple[str, int], list[int]] = {}

    def ranks(self, order: str, seed: int = 0) -> list[int]:
        """rank[i]: position of buffer i in the static preorder (smaller goes first);
        ties broken by index, or by a random key fixed by `seed` (not 0)."""
        if (order, seed) not in self._ranks:
            keys = [self._rank_field(c) for c in order]
            rng = random.Random(seed)
            tie = [rng.random() for _ in self.items] if seed else list(range(len(self.items)))
            by = sorted(range(len(self.items)),
                        key=lambda i: tuple(-k(i) for k in keys) + (tie[i], i))
            rank = [0] * len(by)
            for r, i in enumerate(by):
                rank[i] = r
            self._ranks[(order, seed)] = rank
        return self._ranks[(order, seed)]

    def _rank_field(self, c: str):
        """One letter of a `Strategy.order`, as a function of the buffer index."""
        items = self.items
        return {"T": lambda i: max(self.live[self.lo[i]:self.hi[i]]),
                "A": lambda i: self.size[i] * (items[i].end - items[i].start + 1),
                "Z": lambda i: self.size[i],
                "L": lambda i: items[i].end - items[i].start}[c]


def section_tables(size: list[int], lo: list[int], hi: list[int], n_sections: int,
                   deadline: Deadline = NEVER
                   ) -> tuple[list[list[int]], list[int], list[int], list[int]]:
    """members, live bytes, crossing buffers and their shared bytes, by section (past
    `deadline`: OutOfTime)."""
    members: list[list[int]] = [[] for _ in range(n_sections)]
    live = [0] * max(n_sections, 1)
    crossing = [0] * max(n_sections, 1)
    shared = [0] * max(n_sections, 1)
    for i in range(len(size)):
        deadline.check("section tables")
        for s in range(lo[i], hi[i]):
            members[s].append(i)
            live[s] += size[i]
        for s in range(lo[i], hi[i] - 1):
            crossing[s] += 1
            shared[s] += size[i]
    return members, live, crossing, shared


def end_to_end_partners(items: Sequence[Buffer]) -> list[list[int]]:
    """For each buffer, those of the same size that end just before it starts or start
    just after it ends (the "pair" fit puts them level)."""
    by_end: dict[tuple[int, int], list[int]] = {}
    for i, b in enumerate(items):
        by_end.setdefault((b.end, b.size), []).append(i)
    partners: list[list[int]] = [[] for _ in items]
    for i, b in enumerate(items):
        for k in by_end.get((b.start - 1, b.size), ()):
            partners[i].append(k)
            partners[k].append(i)
    return partners


def earlier_twins(items: Sequence[Buffer]) -> list[int]:
    """For each buffer, the index of the previous one with the same steps and size, or -1."""
    twin_before, last = [-1] * len(items), {}
    for i, b in enumerate(items):
        key = (b.start, b.end, b.size)
        twin_before[i] = last.get(key, -1)
        last[key] = i
    return twin_before


# ---------------------------------------------------------------------------------------
# The search state: what is placed where, and what each section still holds.
# ---------------------------------------------------------------------------------------

class State:
    """One `feasible` call's state. By buffer: `off` (its offset, -1 while unplaced) and
    `minoff` (the highest top among the placed buffers alive with it). By section:
    `floor` (the highest top placed there), `total` (bytes of its unplaced buffers),
    `crossing` and `shared` (unplaced buffers alive in it and the next, and their bytes).
    `low`, `witness` and `memo` are caches of the rules (checked before use)."""
    __slots__ = ("problem", "capacity", "strategy", "size", "lo", "hi", "grain", "overlaps",
                 "partners", "twin_before", "members", "last", "rank", "off", "minoff",
                 "floor", "total", "crossing", "shared", "low", "witness", "memo")

    def __init__(self, problem: Problem, capacity: int, strategy: Strategy):
        p = self.problem = problem
        self.capacity, self.strategy = capacity, strategy
        self.size, self.lo, self.hi, self.grain = p.size, p.lo, p.hi, p.grain
        self.overlaps, self.partners, self.twin_before = p.overlaps, p.partners, p.twin_before
        self.members, self.last = p.members, p.n_sections - 1
        self.rank = p.ranks(strategy.order, strategy.seed)
        self.off = [-1] * len(p.items)
        self.minoff = [0] * len(p.items)
        self.floor = [0] * p.n_sections
        self.total, self.crossing, self.shared = list(p.live), list(p.crossing), list(p.shared)
        self.low = [m[0] if m else 0 for m in p.members]
        self.witness = [-1] * p.n_sections
        self.memo: dict[tuple[int, int, int], bool] = {}

    def place(self, i: int) -> tuple[int, list[int], list[tuple[int, int]]]:
        """Put buffer i at its minimum offset; return what undoes it (i, the old floors,
        the raised minimum offsets)."""
        size, a, b = self.size[i], self.lo[i], self.hi[i]
        top = self.minoff[i] + size
        self.off[i] = self.minoff[i]
        old_floor = self.floor[a:b]
        self.floor[a:b] = [top] * (b - a)
        for s in range(a, b):
            self.total[s] -= size
        for s in range(a, b - 1):
            self.crossing[s] -= 1
            self.shared[s] -= size
        off, minoff, raised = self.off, self.minoff, []
        for j in self.overlaps[i]:
            if off[j] < 0 and minoff[j] < top:
                raised.append((j, minoff[j]))
                minoff[j] = top
        return (i, old_floor, raised)

    def unplace(self, rec: tuple[int, list[int], list[tuple[int, int]]]) -> None:
        """Undo `place`."""
        i, old_floor, raised = rec
        size, a, b = self.size[i], self.lo[i], self.hi[i]
        for j, m in raised:
            self.minoff[j] = m
        self.floor[a:b] = old_floor
        for s in range(a, b):
            self.total[s] += size
        for s in range(a, b - 1):
            self.crossing[s] += 1
            self.shared[s] += size
        self.off[i] = -1


# ---------------------------------------------------------------------------------------
# The nodes of the search.
# ---------------------------------------------------------------------------------------

class Node:
    """A search node: the part being solved (sections [lo, hi) and its unplaced
    `members`), its `level` and the sections `closed` at that level, the `moves` to try
    in turn (a buffer to place, or -1 - s: a gap in section s), the next one `k`, and
    the undo record of the move applied."""
    __slots__ = ("lo", "hi", "members", "level", "closed", "moves", "k", "undo")

    def __init__(self, lo: int, hi: int, members: list[int], level: int,
                 closed: frozenset[int]):
        self.lo, self.hi, self.members = lo, hi, members
        self.level, self.closed, self.moves = level, closed, ()
        self.k, self.undo = 0, None


class Split:
    """Independent parts `(lo, hi, members)` solved one after the other; `done` holds the
    undo records of those solved (undone together if a later one has no plan)."""
    __slots__ = ("parts", "j", "done", "level", "closed")

    def __init__(self, parts: list[tuple[int, int, list[int]]], level: int,
                 closed: frozenset[int]):
        self.parts, self.j, self.done = parts, 0, []
        self.level, self.closed = level, closed
