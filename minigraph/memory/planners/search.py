"""Exact search for a fixed arena: branch and bound over canonical plans [Moffitt 2023].

Planning offsets is strip packing with the x position of every box fixed: each buffer is
a rectangle (its steps x its bytes) that may only slide up or down. Is there a plan within
an arena of C bytes? MiniMalloc ([Moffitt 2023], "MiniMalloc: A Lightweight Memory
Allocator for Hardware-Accelerated Machine Learning", ASPLOS 2023) answers with a
depth-first search over a small part of the plans that still holds an optimal one:

- **Canonical plans.** Drop every buffer as low as it goes: it rests on the floor or on a
  buffer below it, at its *minimum offset* (the highest top among the placed buffers
  alive with it). The search places buffers in non-decreasing offset order, each at its
  minimum offset: it never chooses an offset, only which buffer goes next.
- **Sections and levels.** Time is cut where the set of live buffers changes. A section
  keeps its *floor* (the top of its placed buffers) and the bytes of its unplaced ones.
  The *level* is the lowest minimum offset among the buffers that may go next. One
  section whose floor is at or below the level is branched on: which buffer sits on it
  at this level, or none (a gap: the section is "closed" until the level rises).

That is the whole search (`feasible`, the first function below). The rest cuts branches
that cannot hold a plan, each rule a named function after the search: a section whose
unplaced bytes no longer fit (`level_overflows`, `section_overflows`, `step_overflows`,
`raised_too_high`), a "tight" section (no byte to spare) left without a buffer on its
floor (`tight_row`, `floor_unreachable`), a plan that another branch finds too
(`fits_below_level`: dominance, `waits_for_twin`: symmetry). When no unplaced buffer
crosses a step boundary, the two sides are solved apart (`independent_parts`): if one
side has no plan, the other side's alternatives are not tried.

`feasible` answers FOUND, INFEASIBLE (every branch was cut: a proof), or out of budget.
The order of the choices (never what is cut) is a `Strategy`; one strategy often finds a
plan with no backtracking where another needs thousands of nodes, so `plan_search` gives
each strategy of `PORTFOLIO` a small node budget in turn, doubling the budgets each round.
It starts from the better of greedy-size and bestfit, asks first for the theoretical
minimum (success proves optimality), then bisects between the best lower bound and the
best plan.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ...errors import PlanError
from ..buffers import Buffer, Placement
from . import register
from .anneal import overlap_lists
from .offset import place_in_order, plan_bestfit, size_order

FOUND, INFEASIBLE, ABORTED, TIMEOUT = "found", "infeasible", "aborted", "timeout"


class Strategy(NamedTuple):
    """How the search orders its choices (never what it may prune).

    `order`: the static rank that breaks ties, as in MiniMalloc's preorderings, larger
    first: T = the most bytes alive in a section the buffer spans, A = area (bytes x
    steps), Z = size, L = lifetime; the index breaks the remaining ties.
    `fit`: which candidate is tried first: "rank" alone, or "flat" (the one whose top
    lands level with a neighbour's floor, then one whose top meets some floor), or
    "pair" (as "flat", then one whose same-size neighbour in time sits at this level).
    `pick`: the section branched on: the one with the "fewest" candidates (leftmost
    on ties; "fewest-right": rightmost), or simply the "left"- or "right"-most.
    """
    order: str
    fit: str
    pick: str


# Tried in turn, with node budgets doubling each round. The first ones are those that
# solved the most guillotine instances (`instances.hard_instance`, 200 and 400 buffers,
# seeds 3..12) within 1.5 nodes per buffer; the rest add variety.
PORTFOLIO = (
    Strategy("ZTA", "flat", "fewest"),
    Strategy("LTZ", "flat", "fewest-right"),
    Strategy("LTZ", "flat", "left"),
    Strategy("TAZ", "pair", "fewest"),
    Strategy("TAZ", "flat", "fewest-right"),
    Strategy("LTZ", "pair", "fewest-right"),
    Strategy("TAZ", "pair", "left"),
    Strategy("ZTA", "flat", "fewest-right"),
    Strategy("TAZ", "pair", "fewest-right"),
    Strategy("LTZ", "flat", "right"),
)


# ---------------------------------------------------------------------------------------
# The search: depth first, one move (a buffer to place, or a gap) per node.
# ---------------------------------------------------------------------------------------

def feasible(problem: Problem, capacity: int, strategy: Strategy, node_budget: int,
             deadline: float | None = None) -> tuple[str, list[int] | None, int]:
    """Depth-first search for a plan within `capacity`: (status, offsets, nodes used).

    status: FOUND (offsets by buffer index), INFEASIBLE (every branch was cut: a proof
    that no plan fits), ABORTED (`node_budget` spent) or TIMEOUT (past `deadline`, a
    `time.perf_counter()` value). A node is one move tried. The loop below is this
    recursion, unrolled onto a list so that a plan thousands of buffers deep is fine:

        def solve(node):                  # node = open_node(...): its moves, in order
            for move in node.moves:       # a buffer at the level, or a gap
                if the rules do not cut it (`fits`):
                    apply it; if nothing is left, or solve(next node): return True
                    undo it
            return False                  # backtrack
    """
    if not problem.items:
        return FOUND, [], 0
    if capacity < problem.lower_bound:
        return INFEASIBLE, None, 0
    st = State(problem, capacity, strategy)
    root = Split(initial_parts(problem), 0, frozenset())
    stack: list[Node | Split] = [root, open_part(st, root)]
    nodes = 0
    while stack:
        node = stack[-1]
        if type(node) is Split:         # a part below it has no plan: neither has this
            for rec in reversed(node.done):
                st.unplace(rec)
            stack.pop()
            continue
        if node.undo is not None:       # back from the last move: take it back
            st.unplace(node.undo)
            node.undo = None
        if node.k == len(node.moves):   # every move tried: backtrack
            stack.pop()
            continue
        move = node.moves[node.k]
        node.k += 1
        nodes += 1
        if nodes > node_budget:
            return ABORTED, None, nodes - 1
        if deadline is not None and not nodes & 15 and time.perf_counter() > deadline:
            return TIMEOUT, None, nodes
        if move < 0:                    # a gap: section -1 - move holds nothing at this level
            stack.append(open_node(st, node.lo, node.hi, node.members, node.level,
                                   node.closed | {-1 - move}))
        elif descend(st, stack, node, move) and finish_part(st, stack):
            return FOUND, st.off, nodes
    return INFEASIBLE, None, nodes


def descend(st: State, stack: list, node: Node, i: int) -> bool:
    """Place buffer i and push the node(s) that go on from there, unless a rule cuts the
    branch. True when that placement solved the node's part."""
    rec = st.place(i)
    if not fits(st, rec):
        st.unplace(rec)
        return False
    node.undo = rec
    rest = [j for j in node.members if st.off[j] < 0]
    if not rest:
        return True
    parts = independent_parts(st, i, node.lo, node.hi, rest)
    if parts is None:
        stack.append(open_node(st, node.lo, node.hi, rest, node.level, node.closed))
    else:
        split = Split(parts, node.level, node.closed)
        stack += [split, open_part(st, split)]
    return False


def finish_part(st: State, stack: list) -> bool:
    """The part on top of the stack is solved: keep its placements (their undo records go
    to the split above, in case a later part has no plan) and open the split's next part.
    True when no part is left: the whole problem is solved."""
    carry: list = []
    while True:
        recs = []
        while type(stack[-1]) is Node:
            rec = stack.pop().undo
            if rec is not None:
                recs.append(rec)
        recs.reverse()
        split = stack[-1]
        split.done.extend(recs + carry)
        split.j += 1
        if split.j < len(split.parts):
            stack.append(open_part(st, split))
            return False
        stack.pop()
        if not stack:
            return True
        carry = split.done


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
        self.rank = p.ranks(strategy.order)
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
# The moves of a node: the next level, the section branched on, its candidates.
# ---------------------------------------------------------------------------------------

def open_part(st: State, split: Split) -> Node:
    """The node for the split's current part (the sections closed inside it stay so)."""
    a, b, members = split.parts[split.j]
    return open_node(st, a, b, members, split.level,
                     frozenset(s for s in split.closed if a <= s < b))


def open_node(st: State, lo: int, hi: int, members: list[int], level: int,
              closed: frozenset[int]) -> Node:
    """The node for `members` (unplaced, in sections [lo, hi)) when the last buffer went
    at `level` and the sections `closed` hold nothing more there.

    The level rises to the lowest minimum offset of a buffer that may go next. Of the
    sections whose floor is at or below it, one is branched on (`pick_section`): each
    buffer that can sit there, then a gap. Open sections that no buffer can cover get a
    gap at once. A node that a rule cuts gets no moves."""
    node = Node(lo, hi, members, level, closed)
    shut = closed_prefix(lo, hi, closed)
    nxt, lowest_top = next_level(st, node, shut)
    if fits_below_level(nxt, lowest_top):
        return node
    if nxt > level:                     # a new level: no section is closed there yet
        node.level, node.closed, shut = nxt, frozenset(), None
    if level_overflows(st, node):
        return node
    need = tight_sections(st, node)
    row = tight_row(st, node, candidates(st, node, shut), need)
    if row is None:
        return node
    viable, cover = row
    picked = pick_section(st, node, cover)
    if picked is None:
        return node
    x, gaps = picked
    if gaps:
        node.closed = node.closed.union(gaps)
    s = lo + x
    moves = order_moves(st, node, [j for j in viable if st.lo[j] <= s < st.hi[j]])
    if not need[x]:
        moves.append(-1 - s)
    node.moves = moves
    return node


def closed_prefix(lo: int, hi: int, closed: frozenset[int]) -> list[int] | None:
    """shut[x]: how many of the sections lo .. lo + x - 1 are closed (None: none is)."""
    if not closed:
        return None
    shut = [0] * (hi - lo + 1)
    for x in range(hi - lo):
        shut[x + 1] = shut[x] + ((lo + x) in closed)
    return shut


def blocked(st: State, j: int, lo: int, shut: list[int] | None) -> bool:
    """Does buffer j span a closed section (so it cannot go at this level)?"""
    return shut is not None and shut[st.hi[j] - lo] > shut[st.lo[j] - lo]


def next_level(st: State, node: Node, shut: list[int] | None) -> tuple[int, int]:
    """The next level (lowest minimum offset, at or above the node's, of a buffer that
    may go next) and the lowest top of any unplaced buffer at its minimum offset."""
    minoff, size, level = st.minoff, st.size, node.level
    lowest_top = nxt = st.capacity + 1
    for j in node.members:
        m = minoff[j]
        if m + size[j] < lowest_top:
            lowest_top = m + size[j]
        if m < level or m >= nxt or waits_for_twin(st, j):
            continue
        if m == level and blocked(st, j, node.lo, shut):
            continue
        nxt = m
    return nxt, lowest_top


def candidates(st: State, node: Node, shut: list[int] | None) -> list[int]:
    """The buffers that may go at the node's level: at their minimum offset there, not
    waiting for a twin, spanning no closed section."""
    minoff, level = st.minoff, node.level
    return [j for j in node.members if minoff[j] == level and not waits_for_twin(st, j)
            and not blocked(st, j, node.lo, shut)]


def tight_sections(st: State, node: Node) -> list[bool]:
    """need[x]: section lo + x is open at this level and has no grain to spare above it,
    so a buffer must sit on it now."""
    limit = st.capacity - st.grain - node.level
    total, floor, level = st.total, st.floor, node.level
    need = [total[s] > limit and floor[s] <= level for s in range(node.lo, node.hi)]
    for s in node.closed:
        need[s - node.lo] = False
    return need


def pick_section(st: State, node: Node, cover: list[int]) -> tuple[int, list[int]] | None:
    """The section to branch on (as `x` from lo, chosen by the strategy's `pick` among
    those some candidate covers) and the open sections that no candidate covers (they
    get a gap). None if no section can be branched on, or a tight one gets a gap."""
    pick, total, floor = st.strategy.pick, st.total, st.floor
    lo, level, closed = node.lo, node.level, node.closed
    limit = st.capacity - st.grain - level
    gaps = []
    best_x, best_c, c = -1, 0, 0
    for x in range(node.hi - lo):
        c += cover[x]
        s = lo + x
        if c:
            if best_x < 0 or pick == "right" or (pick == "fewest" and c < best_c) \
                    or (pick == "fewest-right" and c <= best_c):
                best_x, best_c = x, c
        elif total[s] and floor[s] <= level and s not in closed:
            if total[s] > limit:
                return None
            gaps.append(s)
    if best_x < 0:
        return None
    return best_x, gaps


def order_moves(st: State, node: Node, moves: list[int]) -> list[int]:
    """The buffers to try on the chosen section, in the strategy's `fit` order."""
    rank = st.rank
    if st.strategy.fit == "rank":
        return sorted(moves, key=rank.__getitem__)
    heights = set(st.floor[node.lo:node.hi])
    keyed = sorted((fit_key(st, node, heights, j), j) for j in moves)
    return [j for _, j in keyed]


def fit_key(st: State, node: Node, heights: set[int], j: int) -> tuple[int, int, int, int]:
    """Sort key of candidate j: flush with a neighbour's floor first, then a top that meets
    some floor, then ("pair") partners at this level, then the static rank."""
    floor, off, level = st.floor, st.off, node.level
    t = level + st.size[j]
    a, b = st.lo[j], st.hi[j]
    flush = (a > node.lo and floor[a - 1] == t) + (b < node.hi and floor[b] == t)
    pair = 0
    if st.strategy.fit == "pair":
        for k in st.partners[j]:
            if off[k] == level or (off[k] < 0 and st.minoff[k] == level):
                pair += 1
            elif off[k] >= 0:
                pair -= 1
    return -flush, -(t in heights), -pair, st.rank[j]


def independent_parts(st: State, i: int, lo: int, hi: int, rest: list[int]
                      ) -> list[tuple[int, int, list[int]]] | None:
    """The section ranges of [lo, hi) that placing i made independent (no unplaced buffer
    crosses between them), each with its unplaced buffers; None if there are none."""
    cuts = [s for s in range(max(st.lo[i], lo), min(st.hi[i] - 1, hi - 1))
            if st.crossing[s] == 0]
    if not cuts:
        return None
    bounds = [lo] + [s + 1 for s in cuts] + [hi]
    parts = []
    for a, b in zip(bounds, bounds[1:]):
        mem = [j for j in rest if a <= st.lo[j] and st.hi[j] <= b]
        if mem:
            parts.append((a, b, mem))
    return parts


def initial_parts(p: Problem) -> list[tuple[int, int, list[int]]]:
    """Section ranges that no buffer crosses, each with its buffers."""
    by_lo: dict[int, list[int]] = {}
    for i in range(len(p.items)):
        by_lo.setdefault(p.lo[i], []).append(i)
    parts, start, mem = [], 0, []
    for s in range(p.n_sections):
        mem += by_lo.get(s, [])
        if s == p.n_sections - 1 or p.crossing[s] == 0:
            if mem:
                parts.append((start, s + 1, mem))
            start, mem = s + 1, []
    return parts


# ---------------------------------------------------------------------------------------
# Pruning rules. Each one only cuts branches that hold no plan, or whose plans another
# branch also finds, so an exhausted search is still a proof.
# ---------------------------------------------------------------------------------------

def fits_below_level(nxt: int, lowest_top: int) -> bool:
    """Dominance: an unplaced buffer fits entirely below the next level; lowering it gives
    a plan at least as good, found in another branch."""
    return nxt >= lowest_top


def waits_for_twin(st: State, j: int) -> bool:
    """Symmetry: of identical buffers (same steps, same size) only the first unplaced one,
    by index, may go next; swapping twins gives the same plan."""
    twin = st.twin_before[j]
    return twin >= 0 and st.off[twin] < 0


def level_overflows(st: State, node: Node) -> bool:
    """Every later buffer goes at or above the level: a section whose unplaced bytes do
    not fit above it has no plan."""
    return node.level + max(st.total[node.lo:node.hi]) > st.capacity


def tight_row(st: State, node: Node, cands: list[int], need: list[bool]
              ) -> tuple[list[int], list[int]] | None:
    """Exact cover: the buffers at one level sit side by side in time, so they must cover
    every tight section (`need`) without overlapping. Returns the candidates that lie on
    such a row and, as a difference array, how many cover each section; None if no row.

    back[x]: a row can cover [lo + x, hi) with every tight section in it covered;
    reach[x]: the same for [lo, lo + x)."""
    lo, width, lo_s, hi_s = node.lo, node.hi - node.lo, st.lo, st.hi
    starts: dict[int, list[int]] = {}
    for j in cands:
        starts.setdefault(lo_s[j] - lo, []).append(j)
    back = [False] * (width + 1)
    back[width] = True
    for x in range(width - 1, -1, -1):
        ok = not need[x] and back[x + 1]
        if not ok:
            for j in starts.get(x, ()):
                if back[hi_s[j] - lo]:
                    ok = True
                    break
        back[x] = ok
    if not back[0]:
        return None
    reach = [True] + [False] * width
    cover = [0] * (width + 1)
    viable = []
    for x in range(width):
        if not reach[x]:
            continue
        if not need[x]:
            reach[x + 1] = True
        for j in starts.get(x, ()):
            e = hi_s[j] - lo
            if back[e]:
                reach[e] = True
                viable.append(j)
                cover[x] += 1
                cover[e] -= 1
    return viable, cover


def fits(st: State, rec: tuple) -> bool:
    """After placing a buffer: may this branch still hold a plan? (The rules below.)"""
    return not (section_overflows(st, rec) or step_overflows(st, rec)
                or raised_too_high(st, rec) or floor_unreachable(st, rec))


def section_overflows(st: State, rec: tuple) -> bool:
    """The bytes left in the placed buffer's sections all go above its top: they must
    fit below the capacity."""
    i = rec[0]
    top = st.off[i] + st.size[i]
    return top + max(st.total[st.lo[i]:st.hi[i]]) > st.capacity


def step_overflows(st: State, rec: tuple) -> bool:
    """The unplaced buffers alive on both sides of a step in the floors (at either end of
    the placed buffer) lie above the higher floor: they must fit below the capacity."""
    i = rec[0]
    a, b, top, cap, shared, floor = st.lo[i], st.hi[i], st.off[i] + st.size[i], \
        st.capacity, st.shared, st.floor
    if a > 0 and shared[a - 1] + max(top, floor[a - 1]) > cap:
        return True
    return b <= st.last and shared[b - 1] + max(top, floor[b]) > cap


def raised_too_high(st: State, rec: tuple) -> bool:
    """A section's unplaced buffers go no lower than their minimum offsets: if placing
    the buffer raised all of them above capacity - bytes left, the bytes do not fit."""
    raised = rec[2]
    if not raised:
        return False
    off, minoff, total, low, cap = st.off, st.minoff, st.total, st.low, st.capacity
    a = min(st.lo[j] for j, _ in raised)
    b = max(st.hi[j] for j, _ in raised)
    for s in range(a, b):
        room = cap - total[s]
        k = low[s]                      # a buffer low enough last time
        if not total[s] or off[k] < 0 and minoff[k] <= room:
            continue
        for k in st.members[s]:
            if off[k] < 0 and minoff[k] <= room:
                low[s] = k
                break
        else:
            return True
    return False


def floor_unreachable(st: State, rec: tuple) -> bool:
    """A tight section near the placed buffer needs some buffer to sit right on its
    floor (a gap there would waste a byte it does not have)."""
    i, off = rec[0], st.off
    near = [j for j in st.overlaps[i] if off[j] < 0]
    if not near:
        return False
    a = min(st.lo[j] for j in near)
    b = max(st.hi[j] for j in near)
    st.memo.clear()
    floor, total, cap, grain = st.floor, st.total, st.capacity, st.grain
    for s in range(a, b):
        if total[s] and floor[s] + grain + total[s] > cap and not has_bottom(st, s):
            return True
    return False


def has_bottom(st: State, s: int) -> bool:
    """Can some unplaced buffer of section s sit right on its floor? (The one found last
    time is tried first.)"""
    f = st.floor[s]
    j = st.witness[s]
    if j >= 0 and can_sit(st, j, f):
        return True
    for j in st.members[s]:
        if can_sit(st, j, f):
            st.witness[s] = j
            return True
    return False


def can_sit(st: State, j: int, f: int) -> bool:
    """Can unplaced buffer j go at offset f? Where it spans a lower tight section, the
    step between must be filled exactly by buffers that fit under it (`exact_fill`)."""
    if st.off[j] >= 0 or st.minoff[j] > f:
        return False
    floor, total, spare = st.floor, st.total, st.capacity - st.grain
    for t in range(st.lo[j], st.hi[j]):
        g = f - floor[t]
        if g and floor[t] + total[t] > spare and not exact_fill(st, t, g, j, f):
            return False
    return True


def exact_fill(st: State, t: int, g: int, j: int, f: int) -> bool:
    """Subset sum: do some unplaced buffers of section t (not j), each fitting below f,
    sum to exactly g bytes? (Says yes when the sums get too many to follow.)"""
    off, minoff, size, memo = st.off, st.minoff, st.size, st.memo
    key = (t, g, f)
    alone = minoff[j] + size[j] > f     # j could not be one of them anyway
    if alone and key in memo:
        return memo[key]
    parts = [size[k] for k in st.members[t]
             if k != j and off[k] < 0 and minoff[k] + size[k] <= f]
    ok = False
    if sum(parts) >= g:
        sums = {0}
        for z in parts:
            sums |= {x + z for x in sums if x + z <= g}
            if g in sums or len(sums) > 64:
                ok = True
                break
    if alone:
        memo[key] = ok
    return ok


# ---------------------------------------------------------------------------------------
# The problem: the buffers cut into sections, shared by every search of it.
# ---------------------------------------------------------------------------------------

class Problem:
    """The buffers, cut into sections (time ranges where the live set does not change).

    Buffer i lives in sections lo[i] .. hi[i] - 1. By section: `members` (buffer indices),
    `live` (their bytes), `crossing` and `shared` (buffers alive in it and the next, and
    their bytes). `partners`: same size, lifetimes end to end (as the two halves of a box
    cut across time are). `twin_before[i]`: the previous identical buffer, or -1.
    """

    def __init__(self, items: Sequence[Buffer]):
        self.items = list(items)
        self.size = [b.size for b in items]
        cuts = sorted({b.start for b in items} | {b.end + 1 for b in items})
        self.n_sections = len(cuts) - 1
        self.lo = [bisect_right(cuts, b.start) - 1 for b in items]
        self.hi = [bisect_right(cuts, b.end) for b in items]
        self.overlaps = overlap_lists(items)
        self.members, self.live, self.crossing, self.shared = \
            section_tables(self.size, self.lo, self.hi, self.n_sections)
        self.lower_bound = max(self.live, default=0)
        self.grain = math.gcd(*self.size) if self.size else 1   # offsets are multiples
        self.partners = end_to_end_partners(items)
        self.twin_before = earlier_twins(items)
        self._ranks: dict[str, list[int]] = {}

    def ranks(self, order: str) -> list[int]:
        """rank[i]: position of buffer i in the static preorder (smaller goes first)."""
        if order not in self._ranks:
            keys = [self._rank_field(c) for c in order]
            by = sorted(range(len(self.items)),
                        key=lambda i: tuple(-k(i) for k in keys) + (i,))
            rank = [0] * len(by)
            for r, i in enumerate(by):
                rank[i] = r
            self._ranks[order] = rank
        return self._ranks[order]

    def _rank_field(self, c: str):
        """One letter of a `Strategy.order`, as a function of the buffer index."""
        items = self.items
        return {"T": lambda i: max(self.live[self.lo[i]:self.hi[i]]),
                "A": lambda i: self.size[i] * (items[i].end - items[i].start + 1),
                "Z": lambda i: self.size[i],
                "L": lambda i: items[i].end - items[i].start}[c]


def section_tables(size: list[int], lo: list[int], hi: list[int], n_sections: int
                   ) -> tuple[list[list[int]], list[int], list[int], list[int]]:
    """members, live bytes, crossing buffers and their shared bytes, by section."""
    members: list[list[int]] = [[] for _ in range(n_sections)]
    live = [0] * max(n_sections, 1)
    crossing = [0] * max(n_sections, 1)
    shared = [0] * max(n_sections, 1)
    for i in range(len(size)):
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
# The planner: a portfolio of strategies, anytime, between a lower and an upper bound.
# ---------------------------------------------------------------------------------------

@dataclass
class Run:
    """One `plan_search`: the best plan so far (`best` bytes), the largest capacity proved
    to have no plan plus a grain (`proved`), the node budget of each attempt, the nodes
    spent, and why it stopped ("" while it goes on)."""
    problem: Problem
    best: int
    plan: list[int]
    proved: int
    budget: int
    node_limit: int | None
    deadline: float | None
    nodes: int = 0
    stopped: str = ""
    roomy: list[Strategy] = field(default_factory=lambda: list(PORTFOLIO))


@register("search")
def plan_search(buffers: Sequence[Buffer], *, time_limit: float | None = 2.0,
                node_limit: int | None = None) -> Placement:
    """Branch and bound over canonical plans [Moffitt 2023], anytime.

    Starts from the better of greedy-size and bestfit, so it is never worse than either.
    Each round gives the strategies of `PORTFOLIO`, four at a time, a node budget to find
    a plan at the lower bound, each batch followed by a bisection between the lower
    bound and the best plan so far; budgets double from round to round. `node_limit`
    bounds the nodes of all searches together (the result is then a function of the
    input alone); `time_limit` (seconds, None for none) stops earlier, and the note says
    so. The note says "optimal" when the plan meets the theoretical minimum or a search
    proved that no smaller plan exists; otherwise it gives the gap to the best lower bound.
    """
    if node_limit is not None and node_limit < 0:
        raise PlanError(f"search: node_limit must be >= 0, not {node_limit}")
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    items = [b for b in buffers if b.size]
    offsets = {b.id: 0 for b in buffers}
    if not items:
        return Placement.of(buffers, offsets, note="optimal (nothing to place)")
    run = start_run(Problem(items), node_limit, deadline)
    start = run.best
    while run.best > run.proved and not run.stopped:
        # The lower bound itself, a few strategies at a time, each batch followed by a
        # bisection (so a problem that is hard at the bound still improves early).
        for k in range(0, len(PORTFOLIO), 4):
            if run.best <= run.proved or run.stopped:
                break
            if attempt(run, run.proved, list(PORTFOLIO[k:k + 4])) == ABORTED:
                bisect(run)
        run.budget *= 2
    for b, o in zip(items, run.plan):
        offsets[b.id] = o
    took = time.perf_counter() - t0
    note = f"search: {start} -> {run.best} B, {verdict(run)}; {run.nodes} nodes, {took:.2f} s"
    return Placement.of(buffers, offsets, note=note)


def start_run(problem: Problem, node_limit: int | None, deadline: float | None) -> Run:
    """The better of greedy-size and bestfit as the first plan; the theoretical minimum
    as the first lower bound."""
    items = problem.items
    greedy = place_in_order(items, order=size_order(items))
    fitted = plan_bestfit(items).offsets
    fitted = [fitted[b.id] for b in items]
    best, plan = min((_arena(problem, greedy), greedy), (_arena(problem, fitted), fitted))
    return Run(problem, best, plan, problem.lower_bound, max(64, 3 * len(items) // 2),
               node_limit, deadline)


def attempt(run: Run, cap: int, strategies: list[Strategy]) -> str:
    """Ask each strategy in turn for a plan within `cap` bytes (the one that finds it
    moves to the front of `strategies`)."""
    grain = run.problem.grain
    for k, strategy in enumerate(strategies):
        left = run.budget if run.node_limit is None else \
            min(run.budget, run.node_limit - run.nodes)
        if left <= 0:
            run.stopped = "node limit"
            return ABORTED
        outcome, found, used = feasible(run.problem, cap, strategy, left, run.deadline)
        run.nodes += used
        if outcome == FOUND:
            arena = _arena(run.problem, found)
            if arena < run.best:
                run.best, run.plan = arena, list(found)
            strategies.insert(0, strategies.pop(k))
            return FOUND
        if outcome == INFEASIBLE:       # arenas are multiples of the grain
            run.proved = max(run.proved, (cap // grain + 1) * grain)
            return INFEASIBLE
        if outcome == TIMEOUT:
            run.stopped = "time limit"
            return TIMEOUT
    return ABORTED


def bisect(run: Run) -> None:
    """Bisect (in grains) between the bounds down to about 0.4% of the lower bound; the
    last few grains above the lower bound are tried one by one."""
    grain = run.problem.grain
    lo, hi = run.proved // grain + 1, run.best // grain - 1
    step = max(1, run.proved // grain // 256)
    while lo <= hi and not run.stopped and run.best > run.proved:
        if hi - lo < 4:
            mid = lo
        elif hi - lo < step:
            break
        else:
            mid = (lo + hi) // 2
        if attempt(run, mid * grain, run.roomy) == FOUND:
            hi = min(hi, run.best // grain - 1)
        else:
            lo = max(mid + 1, run.proved // grain)


def verdict(run: Run) -> str:
    """"optimal (why)", or the gap to the best lower bound (and why the search stopped)."""
    if run.best <= run.proved:
        how = ("meets the theoretical minimum" if run.best == run.problem.lower_bound
               else f"no plan below {run.best} B exists")
        return f"optimal ({how})"
    note = f"gap {100.0 * (run.best - run.proved) / run.best:.1f}% to the lower bound " \
           f"{run.proved} B"
    return note + (f", {run.stopped} reached" if run.stopped else "")


def _arena(problem: Problem, offsets: Sequence[int]) -> int:
    return max((o + s for o, s in zip(offsets, problem.size)), default=0)
