"""The exact answer for small problems: a mixed-integer program (Chainer-Opt's
MIP for small DSA instances [Sekiyama 2018]; MODeL and ROAM use the same layout constraints).

Variables: an offset x_i per buffer, the arena M, and for every pair of buffers alive at
a common step a binary z_ij ("i lies below j"). Minimise M subject to

    x_i + s_i <= M                                   every buffer fits in the arena
    x_i + s_i <= x_j + U (1 - z_ij)                  z_ij = 1: i below j
    x_j + s_j <= x_i + U z_ij                        z_ij = 0: j below i

with U the arena of the best heuristic plan (an upper bound, also M's), and M at least
the theoretical minimum (a lower bound). One pair's orientation is fixed: flipping a plan
upside down gives another plan, so half the tree is the mirror of the other half.
Solved by HiGHS through `scipy.optimize.milp` (silent: `quietly`). The offsets returned are
recomputed from the solver's pairwise orders as longest paths (in a topological order of
the orders, not of the solver's offsets, which a tolerance may leave inconsistent), so
they are exact integers; the one validator checks them, and a plan it refuses gives way
to the best heuristic, with a note. Large problems count bytes in units of the sizes'
gcd, so that a huge buffer does not make U big enough for tolerances to matter. The time
limit covers the whole call: heuristics, model and solver.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Sequence

import numpy as np

from ...errors import PlanError
from ..buffers import Buffer, Placement, arena_size, theoretical_minimum, validate_offsets
from . import register
from .anneal import overlap_lists, overlapping_pairs
from .engine.budget import NEVER, Deadline, OutOfTime, check_time_limit
from .engine.heuristics import ge_offsets, start_plans
from .engine.quiet import quietly

MAX_PAIRS = 200_000        # above this the model is too big to build; keep the heuristic
MAX_CUT_TERMS = 500_000    # clique cuts are left out when they would be larger than this
# Above this many bytes the model counts in units of the sizes' gcd: the solver's
# tolerances (about 1e-9 of the big U) would otherwise let buffers overlap by bytes.
SCALE_ABOVE = 1 << 24


def best_heuristic(buffers: Sequence[Buffer], deadline: Deadline = NEVER
                   ) -> tuple[str, Placement, int]:
    """The smallest of greedy-size, bestfit and GE two-level: (name, placement, arena)."""
    name, offsets, arena, _ = heuristics(buffers, deadline)
    return name, Placement.of(buffers, offsets), arena


def heuristics(buffers: Sequence[Buffer], deadline: Deadline) -> tuple[str, dict, int, str]:
    """`best_heuristic` within `deadline`: (name, offsets by id, arena, what the deadline
    cut, "" when nothing). Greedy-size always comes back (see `start_plans`); bestfit
    and GE only if they finish. Ties go to the first of greedy-size, bestfit, GE."""
    plans, cut = start_plans(buffers, ["greedy-size", "bestfit"], deadline)
    runs = [(name, {b.id: o for b, o in zip(buffers, off)}) for name, off in plans]
    if not cut:
        try:
            runs.append(("ge", ge_offsets(buffers, 1, True, deadline)[0]))
        except OutOfTime:
            cut = "ge left out: time limit reached"
    arenas = [arena_size(buffers, off) for _, off in runs]
    k = min(range(len(runs)), key=lambda k: arenas[k])
    return runs[k][0], runs[k][1], arenas[k], cut


def gap_note(arena: int, bound: int) -> str:
    """"optimal" when the arena meets the bound, else the gap in percent of the arena."""
    return "optimal" if arena <= bound else f"gap {100.0 * (arena - bound) / arena:.1f}%"


@register("ilp")
def plan_ilp(buffers: Sequence[Buffer], *, time_limit: float = 10.0) -> Placement:
    """Minimise the arena exactly (within `time_limit` seconds, the whole call).

    The note says "optimal" when the solver proves it (or the plan meets the theoretical
    minimum), else the gap to the best lower bound known. If the solver finds no plan in
    time, or one that the validator refuses (the solver's tolerances on a problem of
    very unequal sizes), the best heuristic plan is returned, with its gap.
    """
    check_time_limit("ilp", time_limit)
    t0 = time.perf_counter()
    deadline = Deadline.after(time_limit)
    items = [b for b in buffers if b.size]
    offsets = {b.id: 0 for b in buffers}
    lower = theoretical_minimum(items)
    h_name, h_offsets, upper, cut = heuristics(items, deadline) if items else \
        ("none", {}, 0, "")
    offsets.update(h_offsets)
    if upper <= lower:
        return Placement.of(buffers, offsets, f"optimal ({h_name} meets the theoretical "
                            "minimum)")
    n_pairs = overlapping_pairs(items)
    if n_pairs > MAX_PAIRS:
        return Placement.of(buffers, offsets, f"ilp skipped ({n_pairs} pairs > "
                            f"{MAX_PAIRS}); {h_name}: {gap_note(upper, lower)}")
    try:
        if cut:
            raise OutOfTime(cut)
        nbrs = overlap_lists(items, deadline)
        pairs = [(i, j) for i in range(len(items)) for j in nbrs[i] if i < j]
        grain = math.gcd(*(b.size for b in items)) if upper > SCALE_ABOVE else 1
        model = layout_model(items, pairs, lower, upper, deadline, grain)
        deadline.check("loading the solver")
        from scipy.optimize import milp
    except OutOfTime as stop:
        return Placement.of(buffers, offsets, f"ilp not solved ({stop.step}: time limit "
                            f"reached); {h_name}: {gap_note(upper, lower)}")
    left = max(time_limit - (time.perf_counter() - t0), 0.1)
    res = quietly(milp, **model, options={"time_limit": left, "disp": False})
    bound = lower
    if res.get("mip_dual_bound") is not None and np.isfinite(res.mip_dual_bound):
        bound = max(bound, int(np.ceil(res.mip_dual_bound - 1e-6)) * grain)
    if res.x is None:
        return Placement.of(buffers, offsets, f"ilp found no plan in {time_limit:g} s; "
                            f"{h_name}: {gap_note(upper, bound)}")
    exact = checked_plan(items, pairs, res.x)
    if exact is None:
        return Placement.of(buffers, offsets, f"ilp plan refused (the solver's orders "
                            f"overlap); {h_name}: {gap_note(upper, bound)}")
    arena = arena_size(items, exact)
    if arena > upper:                      # cannot happen with M <= U, but stay safe
        return Placement.of(buffers, offsets, f"ilp no better than {h_name}: "
                            f"{gap_note(upper, bound)}")
    offsets.update(exact)
    # "Proved" only if the exact plan is the solver's (not rounded up from a tolerance).
    proved = res.status == 0 and arena <= (res.x[len(items)] + 0.5) * grain
    note = "optimal" if proved or arena <= bound else gap_note(arena, bound)
    return Placement.of(buffers, offsets, note + f" (ilp, {len(pairs)} pairs, "
                        f"{time.perf_counter() - t0:.2f} s)")


def checked_plan(items: Sequence[Buffer], pairs: list[tuple[int, int]], x: np.ndarray
                 ) -> dict[Hashable, int] | None:
    """The exact offsets of the solver's pairwise orders (`_longest_paths`), or None when
    those orders hold a cycle or the validator refuses the plan."""
    exact = _longest_paths(items, pairs, x, len(items))
    if exact is None:
        return None
    try:
        validate_offsets(items, exact)
    except PlanError:
        return None
    return exact


def layout_model(items: Sequence[Buffer], pairs: list[tuple[int, int]], lower: int,
                 upper: int, deadline: Deadline = NEVER, grain: int = 1) -> dict:
    """The program above as `scipy.optimize.milp` arguments. Variables x_0..x_{n-1}, M,
    then one z per pair; M between `lower` and `upper`, which is also the big U. Bytes
    are counted in units of `grain` (a divisor of every size): a huge buffer among small
    ones keeps U small enough for the solver's tolerances."""
    from scipy.optimize import Bounds, LinearConstraint

    n = len(items)
    s = np.array([b.size // grain for b in items], dtype=float)
    big = float(upper // grain)
    nv = n + 1 + len(pairs)
    m = Rows()
    for i in range(n):                                   # x_i - M <= -s_i
        m.add([i, n], [1.0, -1.0], -s[i])
    for k, (i, j) in enumerate(pairs):
        if not k & 1023:
            deadline.check("building the model")
        z = n + 1 + k
        m.add([i, j, z], [1.0, -1.0, big], big - s[i])    # x_i - x_j + U z <= U - s_i
        m.add([j, i, z], [1.0, -1.0, -big], -s[j])        # x_j - x_i - U z <= -s_j
    _clique_cuts(m, items, pairs, s, deadline)
    lb, ub = np.zeros(nv), np.ones(nv)
    ub[:n] = big - s
    lb[n], ub[n] = float(lower // grain), big
    if pairs:                              # mirror symmetry: the largest pair, i below j
        k0 = max(range(len(pairs)), key=lambda k: (s[pairs[k][0]] + s[pairs[k][1]], -k))
        lb[n + 1 + k0] = 1.0
    c = np.zeros(nv)
    c[n] = 1.0
    integrality = np.zeros(nv)
    integrality[n + 1:] = 1
    return {"c": c, "integrality": integrality, "bounds": Bounds(lb, ub),
            "constraints": LinearConstraint(m.matrix(nv), m.lo, m.hi)}


def _clique_cuts(m: Rows, items: Sequence[Buffer], pairs: list[tuple[int, int]],
                 s: np.ndarray, deadline: Deadline = NEVER) -> None:
    """Cuts that tighten the relaxation: the buffers alive at one step are stacked, so
    everything of that step lying below i fits under x_i, and everything above it fits
    between x_i + s_i and M (left out when they would be too many terms)."""
    n = len(items)
    pid = {p: k for k, p in enumerate(pairs)}
    cliques = live_sets(items, deadline)
    if sum(len(c) ** 2 for c in cliques) > MAX_CUT_TERMS:
        return
    for clique in cliques:
        deadline.check("clique cuts")
        for i in clique:
            under_cols, under_vals, under_rhs = [i], [-1.0], 0.0
            over_cols, over_vals, over_rhs = [i, n], [1.0, -1.0], -s[i]
            for j in clique:
                if j == i:
                    continue
                z = n + 1 + pid[(min(i, j), max(i, j))]
                # z = 1 means min(i, j) lies below max(i, j).
                sign = 1.0 if j < i else -1.0           # "j below i" is z, or 1 - z
                under_cols.append(z)
                under_vals.append(sign * s[j])
                over_cols.append(z)
                over_vals.append(-sign * s[j])
                if j > i:
                    under_rhs -= s[j]                   # s_j (1 - z) below i
                else:
                    over_rhs -= s[j]                    # s_j (1 - z) above i
            m.add(under_cols, under_vals, under_rhs)
            m.add(over_cols, over_vals, over_rhs)


class Rows:
    """A sparse constraint matrix built one row at a time, each row `... <= hi`."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def add(self, cols: list[int], vals: list[float], hi: float) -> None:
        r = len(self.hi)
        self.rows += [r] * len(cols)
        self.cols += cols
        self.vals += vals
        self.lo.append(-np.inf)
        self.hi.append(hi)

    def matrix(self, nv: int):
        from scipy.sparse import coo_matrix
        return coo_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.hi), nv)).tocsr()


def live_sets(items: Sequence[Buffer], deadline: Deadline = NEVER) -> list[list[int]]:
    """The maximal sets of buffers alive together at one step (indices into `items`): the
    cliques of the time-overlap graph. A sweep over start times; the set at a start is
    maximal when one of its buffers ends before the next start."""
    by_start = sorted(range(len(items)), key=lambda k: items[k].start)
    times = sorted({b.start for b in items})
    out, active, p = [], [], 0
    for k, t in enumerate(times):
        deadline.check("live sets")
        active = [i for i in active if items[i].end >= t]
        while p < len(by_start) and items[by_start[p]].start == t:
            active.append(by_start[p])
            p += 1
        nxt = times[k + 1] if k + 1 < len(times) else None
        if len(active) > 1 and (nxt is None or any(items[i].end < nxt for i in active)):
            out.append(sorted(active))
    return out


def _longest_paths(items: Sequence[Buffer], pairs: list[tuple[int, int]], x: np.ndarray,
                   n: int) -> dict | None:
    """Integer offsets from the solver's orders (`stack_by_orders`; z = 1: i below j)."""
    below = [(i, j) if x[n + 1 + k] > 0.5 else (j, i) for k, (i, j) in enumerate(pairs)]
    return stack_by_orders(items, below, x[:n])


def stack_by_orders(items: Sequence[Buffer], below: Sequence[tuple[int, int]],
                    hint: Sequence[float]) -> dict | None:
    """Integer offsets from pairwise orders, `(lo, hi)`: lo lies below hi (indices into
    `items`). Each buffer sits right on top of the highest buffer ordered below it, taken
    in a topological order of "below" (a solver's offsets, `hint`, only break ties: with a
    tolerance they may disagree with its orders). None when the orders hold a cycle."""
    n = len(items)
    under: list[list[int]] = [[] for _ in range(n)]
    above: list[list[int]] = [[] for _ in range(n)]
    for lo, hi in below:
        under[hi].append(lo)
        above[lo].append(hi)
    waiting = [len(b) for b in under]
    ready = sorted((i for i in range(n) if not waiting[i]), key=lambda i: (hint[i], i),
                   reverse=True)
    off, done = [0] * n, 0
    while ready:
        j = ready.pop()
        done += 1
        off[j] = max((off[i] + items[i].size for i in under[j]), default=0)
        for k in above[j]:
            waiting[k] -= 1
            if not waiting[k]:
                ready.append(k)
    if done < n:
        return None
    return {items[i].id: off[i] for i in range(n)}
