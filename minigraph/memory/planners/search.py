"""Exact search for the 2D picture of seed 002: branch and bound over canonical plans.

DSA is strip packing with the x position of every box fixed (seed 002, paper 1): only the
offsets are free. This planner follows MiniMalloc (Moffitt, ASPLOS 2023), which searches
a small part of the space that still contains an optimal plan:

- **Canonical plans.** Drop every buffer as low as it goes: it then rests on the floor or
  on a buffer below it. Such a plan, read in order of offset, is rebuilt by placing each
  buffer at its *minimum offset*, the highest top among the placed buffers that overlap
  it in time. So the search places buffers one at a time in non-decreasing offset order
  (ties by a fixed preorder rank) and never chooses an offset: only which buffer is next.
- **Sections.** Time is cut where the set of live buffers changes. A section keeps its
  floor (the top of the placed buffers in it) and the bytes of its unplaced buffers.
  Since every later buffer lies at or above the current offset, `max(floor, offset) +
  unplaced bytes` must fit under the capacity in every section, or the branch is cut.
  With the capacity at the theoretical minimum this means no byte may be wasted: the
  lowest section must be filled next, by a buffer that starts right on its floor.
- **Dominance.** A candidate whose minimum offset lies at or above some unplaced buffer's
  minimum offset + size would leave a gap that buffer fits into; skip it.
  Identical buffers (same steps and size) are placed in one fixed order.
- **Decomposition.** When no unplaced buffer crosses some step boundary, the two sides
  are independent: each is solved alone, and when one side has no plan, the other
  side's alternatives are not tried (that is what makes guillotine-cut problems easy).

The search answers a yes/no question, "is there a plan within capacity C?". The planner
starts from the best of greedy-size and bestfit (an upper bound), asks first for C = the
theoretical minimum (where it proves optimality at once if it succeeds), then
bisects between the lower bound and the best plan found, with node budgets doubling
each round and the preorder heuristics taken in turn. A "no" is a proof only when the
search ran out of branches within its budget. The depth-first search keeps its own
stack of frames: a thousand buffers deep is no problem for Python.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Sequence

from ...errors import PlanError
from ..buffers import Buffer, Placement, theoretical_minimum
from . import register
from .anneal import overlap_lists
from .offset import place_in_order, plan_bestfit, size_order

# Preorder ranks (ties of the dynamic order "lowest minimum offset first"), as in
# MiniMalloc: T = the most bytes alive in any section of the buffer, A = area
# (bytes x steps), Z = size, L = lifetime. Larger first; the index breaks ties.
CHOICE = 0
ALIGN = 0
HEURISTICS = ("TAZ", "ATZ", "ZTA", "LTZ")

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
        # Partners: same size, lifetimes end to end (one box cut across time).
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

    def ranks(self, heuristic: str) -> list[int]:
        """rank[i]: position of buffer i in the static preorder (smaller goes first)."""
        fields = {"T": lambda i: max(self.live[self.lo[i]:self.hi[i]]),
                  "A": lambda i: self.size[i] * (self.items[i].end - self.items[i].start + 1),
                  "Z": lambda i: self.size[i],
                  "L": lambda i: self.items[i].end - self.items[i].start}
        keys = [fields[c] for c in heuristic]
        order = sorted(range(len(self.items)), key=lambda i: tuple(-k(i) for k in keys) + (i,))
        rank = [0] * len(order)
        for r, i in enumerate(order):
            rank[i] = r
        return rank


class _Branch:
    """A search node: the partition being solved (a section range and its unplaced
    buffers), its level (the offset where the next buffer goes) and the sections closed
    at that level, the moves to try in turn, the next one, and the undo record of the
    placement applied (None for none, or for a closing move)."""
    __slots__ = ("lo", "hi", "members", "level", "closed", "moves", "k", "undo", "later",
                 "rlo", "rhi")

    def __init__(self, lo, hi, members, level, closed, moves):
        self.lo, self.hi, self.members = lo, hi, members
        self.level, self.closed, self.moves = level, closed, moves
        self.k, self.undo, self.later = 0, None, set()
        self.rlo, self.rhi = hi, lo      # where the failures below it happened


class _Split:
    """Independent partitions solved one after the other; `done` holds the undo records
    of those solved (undone together if a later one has no plan)."""
    __slots__ = ("parts", "j", "done", "level", "closed")

    def __init__(self, parts, level, closed):
        self.parts, self.j, self.done = parts, 0, []
        self.level, self.closed = level, closed


def feasible(problem: Problem, capacity: int, rank: list[int], node_budget: int,
             deadline: float | None = None, soft: int | None = None, jump: bool = False
             ) -> tuple[str, list[int] | None, int]:
    """Depth-first search for a plan within `capacity`: (status, offsets, nodes used).

    status: FOUND (offsets by index), INFEASIBLE (every branch was cut: a proof),
    ABORTED (node budget spent) or TIMEOUT (past `deadline`, a `perf_counter` time).
    """
    p = problem
    n = len(p.items)
    if n == 0:
        return FOUND, [], 0
    if capacity < p.lower_bound:
        return INFEASIBLE, None, 0
    size, lo_s, hi_s, overlaps, twin = p.size, p.lo, p.hi, p.overlaps, p.twin_before
    sect_members, grain = p.members, p.grain
    partners = p.partners
    off = [-1] * n
    minoff = [0] * n
    floor = [0] * p.n_sections
    total = list(p.live)
    crossing = list(p.crossing)
    shared = list(p.shared)
    last = p.n_sections - 1

    def open_branch(lo, hi, members, level, closed):
        """The node for `members` (unplaced, in sections [lo, hi)) when the last buffer
        went at `level` and the sections `closed` may hold nothing more there.

        The next level is the lowest minimum offset of a buffer that may go next. Of
        the sections whose floor is at or below it, the one with the fewest buffers
        able to sit there is branched on: each of those buffers, or none ("close" it,
        leaving a gap). A section nobody can sit in is closed at once."""
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
        if closed:
            for s in closed:
                need[s - lo] = False
        back = [False] * (width + 1)
        back[width] = True
        for x in range(width - 1, -1, -1):
            if need[x]:
                ok = False
                for j in starts.get(x, ()):
                    if back[hi_s[j] - lo]:
                        ok = True
                        break
                back[x] = ok
            else:
                back[x] = back[x + 1] or any(back[hi_s[j] - lo] for j in starts.get(x, ()))
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
        # candidate covers get a gap here; the one with the fewest candidates is chosen.
        gaps = []
        best_x, best_c, c = -1, 0, 0
        for x in range(width):
            c += cover[x]
            s = lo + x
            if c:
                if CHOICE == 4:
                    key = (min(crossing[s - 1] if s > lo else n, crossing[s] if s < hi - 1
                               else n), c)
                    if best_x < 0 or key < best_c:
                        best_x, best_c = x, key
                elif best_x < 0 or (CHOICE == 0 and c < best_c) or CHOICE == 2 \
                        or (CHOICE == 3 and c <= best_c):
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
        if ALIGN in (6, 7, 8):
            heights = set(floor[lo:hi])

            def fit(j):
                t = level + size[j]
                a, b = lo_s[j], hi_s[j]
                top = (a > lo and floor[a - 1] == t) + (b < hi and floor[b] == t)
                neck = min(crossing[a:b - 1], default=n)
                if ALIGN == 6:
                    return neck, -top, -(t in heights), rank[j]
                if ALIGN == 7:
                    return -top, neck, -(t in heights), rank[j]
                return -top, -(t in heights), neck, rank[j]
            moves.sort(key=fit)
        elif ALIGN in (4, 5):
            heights = set(floor[lo:hi])

            def fit(j):
                t = level + size[j]
                a, b = lo_s[j], hi_s[j]
                pair = 0
                for k in partners[j]:
                    if off[k] == level or (off[k] < 0 and minoff[k] == level):
                        pair += 1
                    elif off[k] >= 0:
                        pair -= 1
                top = (a > lo and floor[a - 1] == t) + (b < hi and floor[b] == t)
                if ALIGN == 4:
                    return -pair, -top, -(t in heights), rank[j]
                return -top, -(t in heights), -pair, rank[j]
            moves.sort(key=fit)
        elif ALIGN == 3:
            heights = set(floor[lo:hi])

            def fit(j):
                t = level + size[j]
                a, b = lo_s[j], hi_s[j]
                pair = 0
                for k in partners[j]:
                    if off[k] == level or (off[k] < 0 and minoff[k] == level):
                        pair = 1
                return -((a > lo and floor[a - 1] == t) + (b < hi and floor[b] == t)), \
                    -pair, -(t in heights), rank[j]
            moves.sort(key=fit)
        elif ALIGN == 2:
            heights = set(floor[lo:hi])

            def fit(j):
                t = level + size[j]
                a, b = lo_s[j], hi_s[j]
                return -((a > lo and floor[a - 1] == t) + (b < hi and floor[b] == t)), \
                    -(t in heights), rank[j]
            moves.sort(key=fit)
        elif ALIGN:
            def fit(j):
                t = level + size[j]
                a, b = lo_s[j], hi_s[j]
                return -((a > lo and floor[a - 1] == t) + (b < hi and floor[b] == t)), rank[j]
            moves.sort(key=fit)
        else:
            moves.sort(key=rank.__getitem__)
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
        nonlocal filled
        i, old_floor, raised = rec
        filled -= area[i]
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

    cap_now = capacity
    why = (0, 0)

    def fits(rec, cap):
        """Section inference after a placement: each section must hold its unplaced
        bytes above its floor, and above the lowest minimum offset of those buffers."""
        nonlocal cap_now, why
        cap_now = cap
        i, _, raised = rec
        a, b = lo_s[i], hi_s[i]
        why = (a, b)
        top = off[i] + size[i]
        if top + max(total[a:b]) > cap_now:
            return False
        # The buffers alive on both sides of a step where the floor changes lie above
        # the higher floor.
        if a > 0 and shared[a - 1] + max(top, floor[a - 1]) > cap_now:
            return False
        if b <= last and shared[b - 1] + max(top, floor[b]) > cap_now:
            return False
        # A section's unplaced buffers can go no lower than their minimum offsets: if
        # all of them were raised, the bytes below the lowest are lost.
        if raised:
            a = min(lo_s[j] for j, _ in raised)
            b = max(hi_s[j] for j, _ in raised)
            for s in range(a, b):
                room = cap_now - total[s]
                k = low[s]          # a buffer low enough last time
                if off[k] < 0 and minoff[k] <= room or not total[s]:
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
            a = min(a, min(lo_s[j] for j in near))
            b = max(b, max(hi_s[j] for j in near))
            why = (a, b)
            memo.clear()
            for s in range(a, b):
                if total[s] and floor[s] + grain + total[s] > cap_now and \
                        not has_bottom(s):
                    return False
        return True

    memo: dict[tuple[int, int, int], bool] = {}
    witness = [-1] * p.n_sections
    low = [m[0] if m else 0 for m in sect_members]
    area = [size[i] * (p.items[i].end - p.items[i].start + 1) for i in range(n)]
    filled, best_filled, best_partial = 0, -1, None

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
            if g and floor[t] + grain + total[t] > cap_now and not exact_fill(t, g, j, f):
                return False
        return True

    def exact_fill(t, g, j, f):
        """Do some unplaced buffers of section t (not j), each fitting below f, sum to
        exactly g bytes? (Says yes when the sums get too many to follow.)"""
        key = (t, g, f)
        if minoff[j] + size[j] > f:      # j could not be one of them anyway
            known = memo.get(key)
            if known is not None:
                return known
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
        if minoff[j] + size[j] > f:
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

    def jump_back(g):
        """Conflict-directed backjumping (incomplete): after node g failed, skip the
        nodes above it whose last decision lies outside where its failures happened."""
        a, b = g.rlo, g.rhi
        for m in g.moves:
            x, y = (lo_s[m], hi_s[m]) if m >= 0 else (-1 - m, -m)
            a, b = min(a, x), max(b, y)
        if not g.moves:
            a, b = g.lo, g.hi
        a, b = a - 1, b + 1
        while len(frames) > 1:
            f = frames[-1]
            if type(f) is _Split:
                return
            m = f.moves[f.k - 1]
            x, y = (lo_s[m], hi_s[m]) if m >= 0 else (-1 - m, -m)
            if x < b and a < y:
                f.rlo, f.rhi = min(f.rlo, a), max(f.rhi, b)
                return
            frames.pop()
            if f.undo is not None:
                unplace(f.undo)

    # The root: the whole time axis, split where no buffer crosses.
    root = _Split(_initial_parts(p, crossing), 0, frozenset())
    frames: list = [root, open_part(root)]
    nodes = 0
    while True:
        f = frames[-1]
        if type(f) is _Split:        # a partition below it had no plan: neither has this
            for rec in reversed(f.done):
                unplace(rec)
            frames.pop()
            if not frames:         # (backjumping may skip plans: no proof then)
                return (ABORTED if jump else INFEASIBLE), best_partial, nodes
            continue
        if f.undo is not None:
            unplace(f.undo)
            f.undo = None
        if f.k == len(f.moves):
            frames.pop()
            if jump:
                jump_back(f)
            continue
        move = f.moves[f.k]
        f.k += 1
        nodes += 1
        if nodes > node_budget:
            return ABORTED, best_partial, nodes - 1
        if deadline is not None and not nodes & 255 and time.perf_counter() > deadline:
            return TIMEOUT, best_partial, nodes
        if move < 0:                 # close a section: nothing more sits at this level
            frames.append(open_branch(f.lo, f.hi, f.members, f.level,
                                      f.closed | {-1 - move}))
            continue
        rec = place(move)
        if not fits(rec, capacity):
            unplace(rec)
            if why[0] < f.rlo:
                f.rlo = why[0]
            if why[1] > f.rhi:
                f.rhi = why[1]
            continue
        if soft is not None and soft < capacity and move not in f.later and not fits(rec, soft):
            unplace(rec)            # wastes bytes: try it after the moves that do not
            f.moves.append(move)
            f.later.add(move)
            continue
        f.undo = rec
        filled += area[move]
        if filled > best_filled:
            best_filled, best_partial = filled, off[:]
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


def _initial_parts(p: Problem, crossing: list[int]) -> list[tuple[int, int, list[int]]]:
    """Section ranges that no buffer crosses, each with its buffers."""
    by_lo: dict[int, list[int]] = {}
    for i in range(len(p.items)):
        by_lo.setdefault(p.lo[i], []).append(i)
    parts, start, mem = [], 0, []
    for s in range(p.n_sections):
        mem += by_lo.get(s, [])
        if s == p.n_sections - 1 or crossing[s] == 0:
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
    `node_limit` bounds the nodes of all searches together (the result is then a function
    of the input alone); `time_limit` (seconds, None for none) stops earlier, and the note
    says so. The note says "optimal" when the plan meets the theoretical minimum or a
    search proved that one byte less has no plan; otherwise the gap to the best bound.
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
    lower = problem.lower_bound
    assert lower == theoretical_minimum(items)
    greedy = place_in_order(items, size_order(items))
    fitted = plan_bestfit(items).offsets
    fitted = [fitted[b.id] for b in items]
    best, start = min((_arena(problem, greedy), greedy), (_arena(problem, fitted), fitted))
    start_arena = best
    nodes, stopped, proved = 0, "", lower     # proved: no plan below it exists
    heuristics = [problem.ranks(h) for h in HEURISTICS]
    budget = max(64, 2 * len(items))
    while best > proved and not stopped:
        lo, hi = proved, best - 1             # bisect [lo, hi] with this round's budget
        while lo <= hi and not stopped:
            cap = lo if lo == proved else (lo + hi) // 2
            outcome = ABORTED
            for rank in heuristics:
                left = budget if node_limit is None else min(budget, node_limit - nodes)
                if left <= 0:
                    stopped = "node limit"
                    break
                outcome, found, used = feasible(problem, cap, rank, left, deadline)
                nodes += used
                if outcome == TIMEOUT:
                    stopped = "time limit"
                if outcome != ABORTED:
                    break
            if outcome == FOUND:
                arena = _arena(problem, found)
                if arena < best:
                    best, start = arena, list(found)
                hi = min(hi, arena - 1)
            elif outcome == INFEASIBLE:
                proved = lo = cap + 1
            else:
                lo = cap + 1
        budget *= 2
    for b, o in zip(items, start):
        offsets_out[b.id] = o
    took = time.perf_counter() - t0
    if best <= proved:
        how = ("meets the theoretical minimum" if best == lower
               else f"no plan of {best - 1} B exists")
        note = f"optimal ({how})"
    else:
        note = f"gap {100.0 * (best - proved) / best:.1f}% to the lower bound {proved} B"
        if stopped:
            note += f", {stopped} reached"
    return Placement(offsets_out, f"search: {start_arena} -> {best} B, {note}; "
                     f"{nodes} nodes, {took:.2f} s")
