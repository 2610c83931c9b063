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

That is the whole search (`feasible`, the first function below; its data, the `Problem`,
the `State` and the nodes, are in `search_state.py`). The rest cuts branches that cannot
hold a plan, each rule a named function in `search_rules.py`: a section whose
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

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..buffers import Buffer, Placement, theoretical_minimum
from . import register
from .budget import Deadline, OutOfTime, check_count, check_time_limit
from .offset import start_plans
from .search_rules import fits, independent_parts, initial_parts, open_node, open_part
from .search_state import Node, Problem, Split, State, Strategy

FOUND, INFEASIBLE, ABORTED, TIMEOUT = "found", "infeasible", "aborted", "timeout"


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
        if deadline is not None and time.perf_counter() > deadline:
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
    check_time_limit("search", time_limit, optional=True)
    if node_limit is not None:
        check_count("search", "node_limit", node_limit)
    t0 = time.perf_counter()
    deadline = Deadline.after(time_limit)
    items = [b for b in buffers if b.size]
    offsets = {b.id: 0 for b in buffers}
    if not items:
        return Placement.of(buffers, offsets, note="optimal (nothing to place)")
    lower = theoretical_minimum(items)
    plans, cut = start_plans(items, ["greedy-size", "bestfit"], deadline)
    best, plan = min((max(o + b.size for o, b in zip(p, items)), p) for _, p in plans)
    try:
        if cut:
            raise OutOfTime(cut)
        # A start at the minimum is optimal: no need to build the search's tables.
        problem = _Solved(lower) if best <= lower else Problem(items, deadline)
    except OutOfTime as stop:
        offsets.update((b.id, o) for b, o in zip(items, plan))
        gap = "optimal (meets the theoretical minimum)" if best <= lower else \
            f"gap {100.0 * (best - lower) / best:.1f}% to the lower bound {lower} B"
        return Placement.of(buffers, offsets, note=(
            f"search: {best} B, {gap}; 0 nodes, "
            f"{time.perf_counter() - t0:.2f} s ({stop.step}: the time limit was reached "
            "before the search)"))
    run = Run(problem, best, plan, lower, max(64, 3 * len(items) // 2), node_limit,
              deadline.at)
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


class _Solved(NamedTuple):
    """The stand-in for a `Problem` whose start plan meets the lower bound (nothing to
    search; `verdict` reads only the lower bound)."""
    lower_bound: int


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
