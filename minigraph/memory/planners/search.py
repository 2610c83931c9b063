"""Exact search for the 2D picture of seed 002: branch and bound over canonical plans.

DSA is strip packing with the x position of every box fixed (seed 002, paper 1): only the
offsets are free. This planner follows MiniMalloc (Moffitt, ASPLOS 2023), which searches
a small part of the space that still holds an optimal plan, with a few additions:

- **Canonical plans.** Drop every buffer as low as it goes: it then rests on the floor or
  on a buffer below it, at its *minimum offset* (the highest top among the buffers
  below it that are alive with it). The search places buffers in non-decreasing offset
  order, each at its minimum offset: it never chooses an offset, only what goes next.
- **Sections and levels.** Time is cut where the set of live buffers changes. A section
  keeps its floor (the top of its placed buffers) and the bytes of its unplaced ones.
  The *level* is the lowest minimum offset among the buffers that may go next. One
  section whose floor is at or below the level is branched on: which buffer sits on it
  at this level, or none (a gap: the section is "closed" until the level rises). The
  section chosen is the one with the fewest candidates (fail first).
- **Inference** (what cuts a branch). Every later buffer lies at or above the level, so
  `max(floor, level) + unplaced bytes` must fit in each section. A section with no
  byte to spare ("tight": always so when the capacity is the theoretical minimum) must
  get a buffer exactly on its floor: the buffers at one level sit side by side, so the
  tight sections must be covered by non-overlapping candidates (a 1D exact cover), and
  a buffer can only sit on a floor above a lower tight section if some buffers there
  sum to exactly the step between (a subset sum).
- **Dominance.** A branch where some unplaced buffer would fit entirely below the
  level is cut: lowering it gives a plan at least as good, found elsewhere. Identical
  buffers (same steps, same size) are placed in index order.
- **Decomposition.** When no unplaced buffer crosses a step boundary, the two sides are
  independent: each is solved alone, and when one side has no plan the other side's
  alternatives are not tried.

`feasible` answers "is there a plan within capacity C?": FOUND, or INFEASIBLE (a proof:
every branch was cut), or out of budget. The order of the choices (never what is cut) is
a `Strategy`; a solution is often found with no backtracking at all under one strategy
and not in thousands of nodes under another, so `plan_search` gives each strategy of
`PORTFOLIO` a small node budget in turn, doubling the budgets each round. It starts from
the better of greedy-size and bestfit (an upper bound), asks first for the theoretical
minimum (success proves optimality), then bisects between the best lower bound and the
best plan. The depth-first search keeps its own stack of frames, so a plan thousands of
buffers deep needs no Python recursion.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from ...errors import PlanError
from ..buffers import Buffer, Placement
from . import register
from .anneal import overlap_lists
from .offset import place_in_order, plan_bestfit, size_order


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

FOUND, INFEASIBLE, ABORTED, TIMEOUT = "found", "infeasible", "aborted", "timeout"


class Problem:
    """The buffers, cut into sections: what every search of one problem shares."""

    def __init__(self, items: Sequence[Buffer]):
        self.items = list(items)
        n = len(items)
        self.size = [b.size for b in items]
        cuts = sorted({b.start for b in items} | {b.end + 1 for b in items})
        self.n_sections = len(cuts) - 1
        # Buffer i lives in the sections lo[i] .. hi[i] - 1.
        self.lo = [bisect_right(cuts, b.start) - 1 for b in items]
        self.hi = [bisect_right(cuts, b.end) for b in items]
        self.overlaps = overlap_lists(items)
        self.members: list[list[int]] = [[] for _ in range(self.n_sections)]
        for i in range(n):
            for s in range(self.lo[i], self.hi[i]):
                self.members[s].append(i)
        live = [0] * max(self.n_sections, 1)
        crossing = [0] * max(self.n_sections, 1)   # buffers alive in sections s and s+1
        shared = [0] * max(self.n_sections, 1)     # and their bytes
        for i in range(n):
            for s in range(self.lo[i], self.hi[i]):
                live[s] += self.size[i]
            for s in range(self.lo[i], self.hi[i] - 1):
                crossing[s] += 1
                shared[s] += self.size[i]
        self.live, self.crossing, self.shared = live, crossing, shared
        self.lower_bound = max(live, default=0)
        self.grain = math.gcd(*self.size) if self.size else 1   # offsets are multiples
        # Partners: same size, lifetimes end to end (as two halves of a box cut across
        # time are; the "pair" fit puts them level).
        by_end: dict[tuple[int, int], list[int]] = {}
        for i, b in enumerate(items):
            by_end.setdefault((b.end, b.size), []).append(i)
        self.partners: list[list[int]] = [[] for _ in range(n)]
        for i, b in enumerate(items):
            for k in by_end.get((b.start - 1, b.size), ()):
                self.partners[i].append(k)
                self.partners[k].append(i)
        # Identical buffers: only the first unplaced one (by index) may be placed next.
        self.twin_before = [-1] * n
        last: dict[tuple[int, int, int], int] = {}
        for i, b in enumerate(items):
            key = (b.start, b.end, b.size)
            self.twin_before[i] = last.get(key, -1)
            last[key] = i
        self._ranks: dict[str, list[int]] = {}

    def ranks(self, order: str) -> list[int]:
        """rank[i]: position of buffer i in the static preorder (smaller goes first)."""
        if order in self._ranks:
            return self._ranks[order]
        fields = {"T": lambda i: max(self.live[self.lo[i]:self.hi[i]]),
                  "A": lambda i: self.size[i] * (self.items[i].end - self.items[i].start + 1),
                  "Z": lambda i: self.size[i],
                  "L": lambda i: self.items[i].end - self.items[i].start}
        keys = [fields[c] for c in order]
        by = sorted(range(len(self.items)), key=lambda i: tuple(-k(i) for k in keys) + (i,))
        rank = [0] * len(by)
        for r, i in enumerate(by):
            rank[i] = r
        self._ranks[order] = rank
        return rank


class _Branch:
    """A search node: the partition being solved (a section range and its unplaced
    buffers), its level (the offset where the next buffer goes) and the sections closed
    at that level, the moves to try in turn (a buffer to place, or -1 - s: close
    section s), the next one, and the undo record of the placement applied."""
    __slots__ = ("lo", "hi", "members", "level", "closed", "moves", "k", "undo")

    def __init__(self, lo, hi, members, level, closed, moves):
        self.lo, self.hi, self.members = lo, hi, members
        self.level, self.closed, self.moves = level, closed, moves
        self.k, self.undo = 0, None


class _Split:
    """Independent partitions solved one after the other; `done` holds the undo records
    of those solved (undone together if a later one has no plan)."""
    __slots__ = ("parts", "j", "done", "level", "closed")

    def __init__(self, parts, level, closed):
        self.parts, self.j, self.done = parts, 0, []
        self.level, self.closed = level, closed


def feasible(problem: Problem, capacity: int, strategy: Strategy, node_budget: int,
             deadline: float | None = None) -> tuple[str, list[int] | None, int]:
    """Depth-first search for a plan within `capacity`: (status, offsets, nodes used).

    status: FOUND (offsets by buffer index), INFEASIBLE (every branch was cut: a proof
    that no plan fits), ABORTED (`node_budget` spent) or TIMEOUT (past `deadline`, a
    `time.perf_counter()` value). A node is one move tried.
    """
    p = problem
    n = len(p.items)
    if n == 0:
        return FOUND, [], 0
    if capacity < p.lower_bound:
        return INFEASIBLE, None, 0
    size, lo_s, hi_s, overlaps, twin = p.size, p.lo, p.hi, p.overlaps, p.twin_before
    sect_members, grain, partners, last = p.members, p.grain, p.partners, p.n_sections - 1
    rank = p.ranks(strategy.order)
    fit, pick = strategy.fit, strategy.pick
    off = [-1] * n                  # offset of each placed buffer, -1 if unplaced
    minoff = [0] * n                # highest top among placed buffers alive with it
    floor = [0] * p.n_sections      # highest top among placed buffers in the section
    total = list(p.live)            # bytes of unplaced buffers in the section
    crossing = list(p.crossing)     # unplaced buffers alive in sections s and s + 1
    shared = list(p.shared)         # and their bytes

    def open_branch(lo, hi, members, level, closed):
        """The node for `members` (unplaced, in sections [lo, hi)) when the last buffer
        went at `level` and the sections `closed` may hold nothing more there.

        The next level is the lowest minimum offset of a buffer that may go next. Of
        the sections whose floor is at or below it, one is branched on (see `pick`):
        each buffer that can sit there, or none ("close" it: a gap). A section nobody
        can sit in is closed at once."""
        fail = _Branch(lo, hi, members, level, closed, ())
        width = hi - lo
        if closed:                  # shut[x]: closed sections among lo .. lo + x - 1
            shut = [0] * (width + 1)
            for x in range(width):
                shut[x + 1] = shut[x] + ((lo + x) in closed)

            def blocked(j):
                return shut[hi_s[j] - lo] > shut[lo_s[j] - lo]
        height = nxt = capacity + 1
        for j in members:
            m = minoff[j]
            if m + size[j] < height:
                height = m + size[j]
            if m < level or m >= nxt or (twin[j] >= 0 and off[twin[j]] < 0):
                continue
            if m == level and closed and blocked(j):
                continue
            nxt = m
        # Dominance: a buffer that fits entirely below the next level would leave a gap.
        if nxt >= height:
            return fail
        if nxt > level:
            level, closed = nxt, frozenset()
        # Every later buffer goes at or above the level.
        if level + max(total[lo:hi]) > capacity:
            return fail
        cands = [j for j in members
                 if minoff[j] == level and (twin[j] < 0 or off[twin[j]] >= 0)
                 and not (closed and blocked(j))]
        # The buffers that will sit at this level are among `cands`, side by side in
        # time. A section too full to leave a gap ("tight") must get one of them. Which
        # candidates can be part of such a row: back[x] (the row can cover [lo + x, hi)
        # with every tight section covered) and reach[x] (same for [lo, lo + x)).
        starts: dict[int, list[int]] = {}
        for j in cands:
            starts.setdefault(lo_s[j] - lo, []).append(j)
        limit = capacity - grain - level
        need = [total[s] > limit and floor[s] <= level for s in range(lo, hi)]
        for s in closed:
            need[s - lo] = False
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
            return fail
        reach = [False] * (width + 1)
        reach[0] = True
        cover = [0] * (width + 1)   # difference array: viable candidates per section
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
        # Open sections (floor at or below the level, bytes left) that no viable
        # candidate covers get a gap here.
        gaps = []
        best_x, best_c, c = -1, 0, 0
        for x in range(width):
            c += cover[x]
            s = lo + x
            if c:
                if best_x < 0 or pick == "right" or (pick == "fewest" and c < best_c) \
                        or (pick == "fewest-right" and c <= best_c):
                    best_x, best_c = x, c
            elif total[s] and floor[s] <= level and s not in closed:
                if total[s] > limit:
                    return fail
                gaps.append(s)
        if best_x < 0:
            return fail
        if gaps:
            closed = closed.union(gaps)
        s = lo + best_x
        moves = [j for j in viable if lo_s[j] <= s < hi_s[j]]
        if fit == "rank":
            moves.sort(key=rank.__getitem__)
        else:
            heights = set(floor[lo:hi])

            def key(j):
                t = level + size[j]
                a, b = lo_s[j], hi_s[j]
                flush = (a > lo and floor[a - 1] == t) + (b < hi and floor[b] == t)
                pair = 0
                if fit == "pair":
                    for k in partners[j]:
                        if off[k] == level or (off[k] < 0 and minoff[k] == level):
                            pair += 1
                        elif off[k] >= 0:
                            pair -= 1
                return -flush, -(t in heights), -pair, rank[j]
            moves.sort(key=key)
        if not need[best_x]:
            moves.append(-1 - s)
        return _Branch(lo, hi, members, level, closed, moves)

    def place(i):
        """Put buffer i at its minimum offset; return what undoes it."""
        o = minoff[i]
        top = o + size[i]
        a, b = lo_s[i], hi_s[i]
        off[i] = o
        old_floor = floor[a:b]
        floor[a:b] = [top] * (b - a)
        for s in range(a, b):
            total[s] -= size[i]
        for s in range(a, b - 1):
            crossing[s] -= 1
            shared[s] -= size[i]
        raised = []
        for j in overlaps[i]:
            if off[j] < 0 and minoff[j] < top:
                raised.append((j, minoff[j]))
                minoff[j] = top
        return (i, old_floor, raised)

    def unplace(rec):
        i, old_floor, raised = rec
        a, b = lo_s[i], hi_s[i]
        for j, m in raised:
            minoff[j] = m
        floor[a:b] = old_floor
        for s in range(a, b):
            total[s] += size[i]
        for s in range(a, b - 1):
            crossing[s] += 1
            shared[s] += size[i]
        off[i] = -1

    low = [m[0] if m else 0 for m in sect_members]   # caches, checked before use
    witness = [-1] * p.n_sections
    memo: dict[tuple[int, int, int], bool] = {}

    def fits(rec):
        """Section inference after placing a buffer: may this branch still hold a plan?"""
        i, _, raised = rec
        a, b = lo_s[i], hi_s[i]
        top = off[i] + size[i]
        if top + max(total[a:b]) > capacity:
            return False
        # The buffers alive on both sides of a step in the floors lie above the higher.
        if a > 0 and shared[a - 1] + max(top, floor[a - 1]) > capacity:
            return False
        if b <= last and shared[b - 1] + max(top, floor[b]) > capacity:
            return False
        # A section's unplaced buffers go no lower than their minimum offsets: if all
        # of them were raised too high, the bytes below the lowest are lost.
        if raised:
            a = min(lo_s[j] for j, _ in raised)
            b = max(hi_s[j] for j, _ in raised)
            for s in range(a, b):
                room = capacity - total[s]
                k = low[s]          # a buffer low enough last time
                if not total[s] or off[k] < 0 and minoff[k] <= room:
                    continue
                for k in sect_members[s]:
                    if off[k] < 0 and minoff[k] <= room:
                        low[s] = k
                        break
                else:
                    return False
        # A section that may waste nothing needs a buffer that can sit on its floor.
        near = [j for j in overlaps[i] if off[j] < 0]
        if near:
            a = min(lo_s[j] for j in near)
            b = max(hi_s[j] for j in near)
            memo.clear()
            for s in range(a, b):
                if total[s] and floor[s] + grain + total[s] > capacity and \
                        not has_bottom(s):
                    return False
        return True

    def has_bottom(s):
        """Can some unplaced buffer of section s sit right on its floor? (The one found
        last time is tried first.)"""
        f = floor[s]
        j = witness[s]
        if j >= 0 and can_sit(j, f):
            return True
        for j in sect_members[s]:
            if can_sit(j, f):
                witness[s] = j
                return True
        return False

    def can_sit(j, f):
        """Can unplaced buffer j go at offset f? Where it spans a lower section that may
        waste nothing, the step between must be filled exactly by buffers that fit
        under it (a subset sum)."""
        if off[j] >= 0 or minoff[j] > f:
            return False
        for t in range(lo_s[j], hi_s[j]):
            g = f - floor[t]
            if g and floor[t] + grain + total[t] > capacity and not exact_fill(t, g, j, f):
                return False
        return True

    def exact_fill(t, g, j, f):
        """Do some unplaced buffers of section t (not j), each fitting below f, sum to
        exactly g bytes? (Says yes when the sums get too many to follow.)"""
        key = (t, g, f)
        alone = minoff[j] + size[j] > f      # j could not be one of them anyway
        if alone and key in memo:
            return memo[key]
        parts = [size[k] for k in sect_members[t]
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

    def split(i, lo, hi, rest):
        """The section ranges of [lo, hi) that placing i made independent, each with its
        unplaced buffers (empty ranges left out); None if there are none."""
        cuts = [s for s in range(max(lo_s[i], lo), min(hi_s[i] - 1, hi - 1))
                if crossing[s] == 0]
        if not cuts:
            return None
        bounds = [lo] + [s + 1 for s in cuts] + [hi]
        parts = []
        for a, b in zip(bounds, bounds[1:]):
            mem = [j for j in rest if a <= lo_s[j] and hi_s[j] <= b]
            if mem:
                parts.append((a, b, mem))
        return parts

    def open_part(sp):
        a, b, mem = sp.parts[sp.j]
        return open_branch(a, b, mem, sp.level,
                           frozenset(s for s in sp.closed if a <= s < b))

    # The root: the whole time axis, split where no buffer crosses. `frames` is the
    # depth-first search's stack (no recursion, however many buffers).
    root = _Split(_initial_parts(p), 0, frozenset())
    frames: list = [root, open_part(root)]
    nodes = 0
    while True:
        f = frames[-1]
        if type(f) is _Split:        # a partition below it had no plan: neither has this
            for rec in reversed(f.done):
                unplace(rec)
            frames.pop()
            if not frames:
                return INFEASIBLE, None, nodes
            continue
        if f.undo is not None:
            unplace(f.undo)
            f.undo = None
        if f.k == len(f.moves):
            frames.pop()
            continue
        move = f.moves[f.k]
        f.k += 1
        nodes += 1
        if nodes > node_budget:
            return ABORTED, None, nodes - 1
        if deadline is not None and not nodes & 15 and time.perf_counter() > deadline:
            return TIMEOUT, None, nodes
        if move < 0:                 # close a section: nothing more sits at this level
            frames.append(open_branch(f.lo, f.hi, f.members, f.level,
                                      f.closed | {-1 - move}))
            continue
        rec = place(move)
        if not fits(rec):
            unplace(rec)
            continue
        f.undo = rec
        rest = [j for j in f.members if off[j] < 0]
        if rest:
            parts = split(move, f.lo, f.hi, rest)
            if parts is None:
                frames.append(open_branch(f.lo, f.hi, rest, f.level, f.closed))
            else:
                sp = _Split(parts, f.level, f.closed)
                frames.append(sp)
                frames.append(open_part(sp))
            continue
        # This partition is solved: keep its placements (their undo records go to the
        # split above, in case a later partition of it has no plan) and go on.
        carry: list = []
        while True:
            recs = []
            while type(frames[-1]) is _Branch:
                rec = frames.pop().undo
                if rec is not None:
                    recs.append(rec)
            recs.reverse()
            sp = frames[-1]
            sp.done.extend(recs + carry)
            sp.j += 1
            if sp.j < len(sp.parts):
                frames.append(open_part(sp))
                break
            frames.pop()
            if not frames:
                return FOUND, off, nodes
            carry = sp.done


def _initial_parts(p: Problem) -> list[tuple[int, int, list[int]]]:
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


def _arena(problem: Problem, offsets: Sequence[int]) -> int:
    return max((o + s for o, s in zip(offsets, problem.size)), default=0)


@register("search")
def plan_search(buffers: Sequence[Buffer], time_limit: float | None = 2.0,
                node_limit: int | None = None) -> Placement:
    """Branch and bound over canonical plans (MiniMalloc), anytime.

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
    offsets_out = {b.id: 0 for b in buffers}
    if not items:
        return Placement(offsets_out, "optimal (nothing to place)")
    problem = Problem(items)
    greedy = place_in_order(items, size_order(items))
    fitted = plan_bestfit(items).offsets
    fitted = [fitted[b.id] for b in items]
    best, plan = min((_arena(problem, greedy), greedy), (_arena(problem, fitted), fitted))
    start = best
    proved = problem.lower_bound             # no plan below it exists
    grain = problem.grain
    nodes, stopped = 0, ""
    budget = max(64, 3 * len(items) // 2)
    roomy = list(PORTFOLIO)                  # for capacities above the lower bound

    def attempt(cap: int, strategies: list[Strategy]) -> str:
        """Ask each strategy in turn for a plan within `cap` bytes (the one that finds
        it moves to the front of `strategies`)."""
        nonlocal nodes, stopped, best, plan, proved
        for k, strategy in enumerate(strategies):
            left = budget if node_limit is None else min(budget, node_limit - nodes)
            if left <= 0:
                stopped = "node limit"
                return ABORTED
            outcome, found, used = feasible(problem, cap, strategy, left, deadline)
            nodes += used
            if outcome == FOUND:
                arena = _arena(problem, found)
                if arena < best:
                    best, plan = arena, list(found)
                strategies.insert(0, strategies.pop(k))
                return FOUND
            if outcome == INFEASIBLE:     # arenas are multiples of the grain
                proved = max(proved, (cap // grain + 1) * grain)
                return INFEASIBLE
            if outcome == TIMEOUT:
                stopped = "time limit"
                return TIMEOUT
        return ABORTED

    def bisect() -> None:
        """Bisect (in grains) between the bounds down to about 0.4% of the lower bound;
        the last few grains above the lower bound are tried one by one."""
        lo, hi = proved // grain + 1, best // grain - 1
        step = max(1, proved // grain // 256)
        while lo <= hi and not stopped and best > proved:
            if hi - lo < 4:
                mid = lo
            elif hi - lo < step:
                break
            else:
                mid = (lo + hi) // 2
            if attempt(mid * grain, roomy) == FOUND:
                hi = min(hi, best // grain - 1)
            else:
                lo = max(mid + 1, proved // grain)

    while best > proved and not stopped:
        # The lower bound itself, a few strategies at a time, each batch followed by a
        # bisection (so a problem that is hard at the bound still improves early).
        for k in range(0, len(PORTFOLIO), 4):
            if best <= proved or stopped:
                break
            if attempt(proved, list(PORTFOLIO[k:k + 4])) == ABORTED:
                bisect()
        budget *= 2
    for b, o in zip(items, plan):
        offsets_out[b.id] = o
    took = time.perf_counter() - t0
    if best <= proved:
        how = ("meets the theoretical minimum" if best == problem.lower_bound
               else f"no plan below {best} B exists")
        note = f"optimal ({how})"
    else:
        note = f"gap {100.0 * (best - proved) / best:.1f}% to the lower bound {proved} B"
        if stopped:
            note += f", {stopped} reached"
    return Placement(offsets_out, f"search: {start} -> {best} B, {note}; "
                     f"{nodes} nodes, {took:.2f} s")
