"""The exact answer for small problems: a mixed-integer program (Chainer-Opt's
MIP for small DSA instances [Sekiyama 2018]; MODeL and ROAM use the same layout constraints).

Variables: an offset x_i per buffer, the arena M, and for every pair of buffers alive at
a common step a binary z_ij ("i lies below j"). Minimise M subject to

    x_i + s_i <= M                                   every buffer fits in the arena
    x_i + s_i <= x_j + U (1 - z_ij)                  z_ij = 1: i below j
    x_j + s_j <= x_i + U z_ij                        z_ij = 0: j below i

with U the arena of the best heuristic plan (an upper bound, also M's), and M at least
the theoretical minimum (a lower bound). One pair's orientation is fixed: flipping a plan
upside down gives another plan, so half the tree is the mirror of the other half. Clique
cuts (the buffers alive at one step are stacked) tighten the relaxation. Solved by HiGHS
through `scipy.optimize.milp`; the offsets are recomputed from the solver's pairwise
orders as exact integers (`stack_by_orders`), and a plan the one validator refuses gives
way to the best heuristic.

This file is registered as "ilp:textbook": `plan_ilp` below, the model solved once. The
registry's "ilp" (`engine/ilp.py`) solves this very model with what a tool needs around
it (one time limit over the whole call, a size past which it keeps the heuristic, the
proved gap in its note); where both finish, the same arena (tests/test_planner_tiers.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from ...errors import PlanError
from ..buffers import Buffer, Placement, arena_size, theoretical_minimum, validate_offsets
from . import register
from .anneal import overlap_lists
from .bestfit import bestfit_offsets
from .ge import ge_offsets
from .greedy import place_in_order, size_order

MAX_CUT_TERMS = 500_000    # clique cuts are left out when they would be larger than this
# Above this many bytes the model counts in units of the sizes' gcd: the solver's
# tolerances (about 1e-9 of the big U) would otherwise let buffers overlap by bytes.
SCALE_ABOVE = 1 << 24


def no_check(step: str) -> None:
    """The `check` of a model built without a deadline: every step goes on (the engine
    passes a deadline's check, which stops a step that runs past it)."""


def best_heuristic(buffers: Sequence[Buffer]) -> tuple[str, Placement, int]:
    """The smallest of greedy-size, bestfit and GE two-level (the first on ties):
    (name, placement, arena). Its arena is the model's U."""
    items = [b for b in buffers if b.size]
    runs = [("greedy-size", place_in_order(items, size_order(items))),
            ("bestfit", bestfit_offsets(items))]
    plans = [(name, {b.id: o for b, o in zip(items, off)}) for name, off in runs]
    plans.append(("ge", ge_offsets(items, 1, True)[0]))
    name, offsets = min(plans, key=lambda p: arena_size(items, p[1]))
    placed = Placement.of(buffers, {**{b.id: 0 for b in buffers}, **offsets})
    return name, placed, arena_size(items, offsets)


@register("ilp:textbook")
def plan_ilp(buffers: Sequence[Buffer], *, time_limit: float = 10.0) -> Placement:
    """Minimise the arena exactly: the best heuristic gives U, the model is built and
    solved (the solver stops after `time_limit` seconds), and the solver's orders become
    offsets. "optimal" when the solver proves it (or the heuristic meets the theoretical
    minimum); without a valid plan from the solver, the best heuristic's plan."""
    if not (isinstance(time_limit, (int, float)) and 0 < time_limit < math.inf):
        raise PlanError(f"ilp: time_limit must be a positive number of seconds, not "
                        f"{time_limit!r}")
    from scipy.optimize import milp  # an optional package (SciPy), loaded when solving
    items = [b for b in buffers if b.size]
    name, placed, upper = best_heuristic(buffers)
    lower = theoretical_minimum(items)
    if upper <= lower:
        return Placement.of(buffers, placed.offsets, f"optimal ({name} meets the "
                            "theoretical minimum)")
    nbrs = overlap_lists(items)
    pairs = [(i, j) for i in range(len(items)) for j in nbrs[i] if i < j]
    grain = math.gcd(*(b.size for b in items)) if upper > SCALE_ABOVE else 1
    res = milp(**layout_model(items, pairs, lower, upper, grain=grain),
               options={"time_limit": time_limit, "disp": False})
    exact = None if res.x is None else checked_plan(items, pairs, res.x)
    if exact is None:
        return Placement.of(buffers, placed.offsets, f"ilp: no valid plan; {name}'s plan")
    proved = res.status == 0 and arena_size(items, exact) <= (res.x[len(items)] + 0.5) * grain
    return Placement.of(buffers, {**placed.offsets, **exact},
                        ("optimal" if proved else "not proved optimal") + " (ilp)")


def checked_plan(items: Sequence[Buffer], pairs: list[tuple[int, int]], x: np.ndarray
                 ) -> dict[Hashable, int] | None:
    """The exact offsets of the solver's pairwise orders (z = 1: i below j), or None when
    those orders hold a cycle or the validator refuses the plan."""
    n = len(items)
    below = [(i, j) if x[n + 1 + k] > 0.5 else (j, i) for k, (i, j) in enumerate(pairs)]
    exact = stack_by_orders(items, below, x[:n])
    if exact is None:
        return None
    try:
        validate_offsets(items, exact)
    except PlanError:
        return None
    return exact


def layout_model(items: Sequence[Buffer], pairs: list[tuple[int, int]], lower: int,
                 upper: int, check: Callable[[str], None] = no_check, grain: int = 1) -> dict:
    """The program above as `scipy.optimize.milp` arguments. Variables x_0..x_{n-1}, M,
    then one z per pair; M between `lower` and `upper`, which is also the big U. Bytes
    are counted in units of `grain`, a divisor of every size (`SCALE_ABOVE`)."""
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
            check("building the model")
        z = n + 1 + k
        m.add([i, j, z], [1.0, -1.0, big], big - s[i])    # x_i - x_j + U z <= U - s_i
        m.add([j, i, z], [1.0, -1.0, -big], -s[j])        # x_j - x_i - U z <= -s_j
    _clique_cuts(m, items, pairs, s, check)
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
                 s: np.ndarray, check: Callable[[str], None] = no_check) -> None:
    """Cuts that tighten the relaxation: the buffers alive at one step are stacked, so
    everything of that step lying below i fits under x_i, and everything above it fits
    between x_i + s_i and M (left out when they would be too many terms)."""
    n = len(items)
    pid = {p: k for k, p in enumerate(pairs)}
    cliques = live_sets(items, check)
    if sum(len(c) ** 2 for c in cliques) > MAX_CUT_TERMS:
        return
    for clique in cliques:
        check("clique cuts")
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
        self.rows, self.cols, self.vals, self.lo, self.hi = [], [], [], [], []

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


def live_sets(items: Sequence[Buffer], check: Callable[[str], None] = no_check) -> list[list[int]]:
    """The maximal sets of buffers alive together at one step (indices into `items`): the
    cliques of the time-overlap graph. A sweep over start times; the set at a start is
    maximal when one of its buffers ends before the next start."""
    by_start = sorted(range(len(items)), key=lambda k: items[k].start)
    times = sorted({b.start for b in items})
    out, active, p = [], [], 0
    for k, t in enumerate(times):
        check("live sets")
        active = [i for i in active if items[i].end >= t]
        while p < len(by_start) and items[by_start[p]].start == t:
            active.append(by_start[p])
            p += 1
        nxt = times[k + 1] if k + 1 < len(times) else None
        if len(active) > 1 and (nxt is None or any(items[i].end < nxt for i in active)):
            out.append(sorted(active))
    return out


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
