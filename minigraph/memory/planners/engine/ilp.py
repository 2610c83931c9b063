"""The registry's "ilp": ilp.py's model [Sekiyama 2018] with one time limit and a note
of the proved gap.

ilp.py is the textbook ("ilp:textbook"): the best heuristic, the model, one solve. This
wrapper builds and solves the same model and changes only what a tool needs around it:

- the time limit covers the whole call: the heuristics run through the engine's
  deadline-aware versions (`heuristics`), the model's loops check the deadline, the solver
  gets what is left;
- above `MAX_PAIRS` overlapping pairs the model is not built (the heuristic's plan, with
  its gap, is returned);
- the note gives the gap to the best bound known (the solver's dual bound or the
  theoretical minimum) whenever the answer is not proved optimal, and which step the
  time limit cut;
- the solver's C++ prints go to stderr (`quiet.py`), so `minigraph plan` keeps stdout for
  its numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...buffers import Buffer, Placement, arena_size, theoretical_minimum
from ...clock import now
from .. import register
from ..anneal import overlapping_pairs
from ..ilp import SCALE_ABOVE, checked_plan, layout_model
from .anneal import timed_overlap_lists
from .budget import Deadline, OutOfTime, check_count, check_time_limit
from .heuristics import ge_offsets, start_plans
from .quiet import quietly

MAX_PAIRS = 200_000        # above this the model is too big to build; keep the heuristic


def heuristics(buffers: Sequence[Buffer], deadline: Deadline) -> tuple[str, dict, int, str]:
    """ilp.py's `best_heuristic` by the engine's heuristics, within `deadline`: (name,
    offsets by id, arena, what the deadline cut, "" when nothing). Greedy-size always
    comes back (see `start_plans`); bestfit and GE only if they finish. Ties go to the
    first of greedy-size, bestfit, GE."""
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
def plan_ilp(buffers: Sequence[Buffer], *, time_limit: float = 10.0,
             node_limit: int | None = None) -> Placement:
    """ilp.py's model, solved within `time_limit` seconds (the whole call) and, given
    `node_limit`, within that many branch-and-bound nodes of the solver (HiGHS's
    `mip_max_nodes`, through `scipy.optimize.milp`'s `node_limit`): a work budget, so the
    same input gives the same plan at any load, where the time limit stays far away.

    The note says "optimal" when the solver proves it (or the plan meets the theoretical
    minimum), else the gap to the best lower bound known. If the solver finds no plan in
    time, or one that the validator refuses (the solver's tolerances on a problem of
    very unequal sizes), the best heuristic plan is returned, with its gap.
    """
    check_time_limit("ilp", time_limit)
    if node_limit is not None:
        check_count("ilp", "node_limit", node_limit)
    t0 = now()
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
        nbrs = timed_overlap_lists(items, deadline)
        pairs = [(i, j) for i in range(len(items)) for j in nbrs[i] if i < j]
        grain = math.gcd(*(b.size for b in items)) if upper > SCALE_ABOVE else 1
        model = layout_model(items, pairs, lower, upper, deadline.check, grain)
        deadline.check("loading the solver")
        from scipy.optimize import milp
    except OutOfTime as stop:
        return Placement.of(buffers, offsets, f"ilp not solved ({stop.step}: time limit "
                            f"reached); {h_name}: {gap_note(upper, lower)}")
    left = max(time_limit - (now() - t0), 0.1)
    budget = {"time_limit": left, "disp": False}
    if node_limit is not None:
        budget["node_limit"] = node_limit
    res = quietly(milp, **model, options=budget)
    bound = lower
    if res.get("mip_dual_bound") is not None and np.isfinite(res.mip_dual_bound):
        bound = max(bound, int(np.ceil(res.mip_dual_bound - 1e-6)) * grain)
    # HiGHS reports its node limit as "solution limit reached": within the time left, it
    # was the nodes that stopped it.
    by_nodes = node_limit is not None and now() - t0 < time_limit
    limit = f"{node_limit:,} nodes" if by_nodes else f"{time_limit:g} s"
    if res.x is None:
        return Placement.of(buffers, offsets, f"ilp found no plan in {limit}; "
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
    note += f" (ilp, {len(pairs)} pairs, {now() - t0:.2f} s)"
    if not note.startswith("optimal") and res.status != 0:     # the solver hit a limit
        note += "; the solver's " + ("node" if by_nodes else "time") + " limit stopped it"
    return Placement.of(buffers, offsets, note)
