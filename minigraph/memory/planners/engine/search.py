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
each strategy of `PORTFOLIO` a small node budget in turn, doubling the budgets each round,
and adds random restarts (`restarts`: the same strategies with their ties broken at random,
since a depth-first search's time is heavy-tailed [Gomes 2000]).
It starts from bestfit (and greedy-size, if bestfit misses the theoretical minimum),
looks for a bound above the theoretical minimum in small time windows solved exactly
(`window_proof`: a window with no plan within C bytes proves the whole problem has
none), builds a plan around those windows (`plan_around_window`: what a window holds is
planned alone and stands in the rest as one block, opened up afterwards), asks for a
plan at the best lower bound (success proves optimality), then bisects between it and
the best plan. The time limit covers all of it, the start included.

A problem too large for its tables to be built in the time left (a training step of
tens of thousands of buffers) is not searched: its start plan is repaired around the
steps that set its arena until the time limit or the bound (`repair.py`: ruin and
recreate, every kept plan valid by construction); a problem of `REPAIR_FROM` buffers or
more gets a share of its time in that repair before the rounds.

Every plan comes with the best lower bound proved on every plan of the problem: the
theoretical minimum, a window's proof, or a capacity the search exhausted. The note
reads "optimal (...)" when the plan meets it, else "within x% of a proved bound (lower
bound B B: what proves it)" (`bound_note`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ...buffers import Buffer, Placement, theoretical_minimum
from ...clock import now
from .. import register
from ..anneal import overlapping_pairs
from .budget import Deadline, OutOfTime, check_count, check_time_limit
from .heuristics import plain_offsets
from .repair import Repair
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
    `planning clock's `now()` value). A node is one move tried. The loop below is this
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
        if deadline is not None and now() > deadline:
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
    spent, why it stopped ("" while it goes on), and the next random-restart seed of the
    bisection (`seed`; those of the rounds start at 1)."""
    problem: Problem
    best: int
    plan: list[int]
    proved: int
    budget: int
    node_limit: int | None
    deadline: float | None
    nodes: int = 0
    stopped: str = ""
    why_bound: str = ""
    window: tuple[int, int] | None = None       # the sections [a, b) that proved it
    seed: int = 1000
    roomy: list[Strategy] = field(default_factory=lambda: list(PORTFOLIO))


@register("search")
def plan_search(buffers: Sequence[Buffer], *, time_limit: float | None = 2.0,
                node_limit: int | None = None) -> Placement:
    """Branch and bound over canonical plans [Moffitt 2023], anytime.

    Starts from bestfit (and greedy-size, when bestfit misses the theoretical minimum),
    so it is never worse than either. A bound stronger than the theoretical minimum is
    looked for in small time windows (`window_proof`), and a plan built around the
    windows that prove it (`plan_around_window`). Then each round gives the
    strategies of `PORTFOLIO` (four, then `RESTARTS` random restarts, then the rest) a
    node budget to find a plan at the lower bound, the later batches each followed by a
    bisection between the lower bound and the best plan so far; budgets double from
    round to round. Restart seeds are fixed, so with `node_limit` the result is still a
    function of the input. `node_limit` bounds the nodes of all
    searches together (the result is then a function of the input alone); `time_limit`
    (seconds, None for none) covers the whole call, and the note says when it stopped
    the search. A problem whose tables would not be built in the time left is not
    searched: its start plan is repaired (`repair_at_scale`) for the time left, and the
    note says so. The note says "optimal" when the plan meets the theoretical minimum
    or a search proved that no smaller plan exists; otherwise "within x% of a proved
    bound (lower bound B B: why)", the best lower bound proved (`bound_note`).
    """
    check_time_limit("search", time_limit, optional=True)
    if node_limit is not None:
        check_count("search", "node_limit", node_limit)
    return searched(buffers, time_limit, node_limit)[0]


def searched(buffers: Sequence[Buffer], time_limit: float | None, node_limit: int | None
             ) -> tuple[Placement, int]:
    """`plan_search`'s plan and the nodes it searched (a nested search counts them)."""
    t0 = now()
    deadline = Deadline.after(time_limit)
    items = [b for b in buffers if b.size]
    offsets = {b.id: 0 for b in buffers}
    if not items:
        return Placement.of(buffers, offsets, note="optimal (nothing to place)"), 0
    lower = theoretical_minimum(items)
    name, best, plan, cut = start_plan(items, lower, deadline)
    start, moves, why = best, 0, ""
    try:
        if cut:
            raise OutOfTime(cut)
        if best <= lower:   # optimal already: no need to build the search's tables
            problem = _Solved(lower)
        else:
            too_big(items, deadline, node_limit)
            problem = Problem(items, deadline)
    except OutOfTime as stop:
        if not cut:         # at scale: no tables, but the time left goes to repair
            best, plan, moves = repair_at_scale(items, plan, lower, deadline, node_limit)
        offsets.update((b.id, o) for b, o in zip(items, plan))
        stopped = "time limit reached" if deadline.passed() else ""
        if cut:
            why = f"{name}'s plan kept ({stop.step})"
        else:
            why = f"{name}'s plan repaired, {moves} moves ({stop.step})"
        note = f"search: {start} -> {best} B, " \
            f"{bound_note(best, lower, lower, 'the theoretical minimum', stopped)}; " \
            f"0 nodes, {why}, {now() - t0:.2f} s"
        return Placement.of(buffers, offsets, note=note), 0
    run = Run(problem, best, plan, lower, max(64, 3 * len(items) // 2), node_limit,
              deadline.at)
    if run.best > run.proved:
        prove_bound(run, time_limit)
    if run.best > run.proved and run.window is not None:
        plan_around_window(run, items)
    if run.best > run.proved and len(items) >= REPAIR_FROM:
        repair_phase(run, items)
    search_rounds(run)
    for b, o in zip(items, run.plan):
        offsets[b.id] = o
    took = now() - t0
    note = f"search: {start} -> {run.best} B, {verdict(run)}; {run.nodes} nodes, {took:.2f} s"
    return Placement.of(buffers, offsets, note=note), run.nodes


# ---------------------------------------------------------------------------------------
# At scale: local repair around the steps that set the arena (repair.py).
# ---------------------------------------------------------------------------------------

REPAIR_FROM = 1000        # buffers from which the search repairs its start plan first
REPAIR_SHARE = 0.1        # the share of the time left for that repair
REPAIR_MOVES = 2000       # its ruins, with no time limit (a function of the input alone)


def repair_at_scale(items: Sequence[Buffer], plan: list[int], bound: int,
                    deadline: Deadline, node_limit: int | None
                    ) -> tuple[int, list[int], int]:
    """A problem too large for the search's tables: its start plan, repaired
    (`repair.Repair`) until the deadline or until it meets `bound` (a proved lower bound).
    `node_limit`, when given, bounds its ruins (with or without a deadline: the work
    budget holds at any load); with neither, `REPAIR_MOVES` ruins. Returns
    (arena, offsets, ruins tried)."""
    grain = math.gcd(*(b.size for b in items))
    fix = Repair(items, plan, grain)
    moves = node_limit if node_limit is not None else \
        (None if deadline.at is not None else REPAIR_MOVES)   # a work budget bounds it too
    fix.run(deadline.at, moves, floor=bound)
    return fix.arena, [int(o) for o in fix.off], fix.moves


def repair_phase(run: Run, items: Sequence[Buffer]) -> None:
    """Before the search's rounds, on a large problem: repair the best plan
    (`repair.Repair`) for `REPAIR_SHARE` of the time left (`REPAIR_MOVES` ruins with no
    time limit or with a `node_limit`); a training step's plan is often too high at one
    turn only, which the repair lowers in a few moves, where the search would need its
    rounds."""
    until = None if run.deadline is None else \
        now() + REPAIR_SHARE * max(run.deadline - now(), 0.0)
    fix = Repair(items, run.plan, run.problem.grain)
    fixed = until is None or run.node_limit is not None    # a work budget: fixed ruins
    fix.run(until, REPAIR_MOVES if fixed else None, floor=run.proved)
    if fix.arena < run.best:
        run.best, run.plan = fix.arena, [int(o) for o in fix.off]


def search_rounds(run: Run) -> None:
    """The rounds of `plan_search`: the lower bound itself, a few strategies at a time,
    then `RESTARTS` random restarts (`restarts`), each batch followed by a bisection (so a
    problem that is hard at the bound still improves early); the node budgets double
    from round to round. When a window proved the theoretical minimum wrong, the first
    batch is followed by a bisection too: the optimum of such a problem usually lies
    above the proved bound as well (each window proves one grain more, not what its own
    plan needs), so time spent at the bound alone is mostly lost (on the 450-buffer
    challenging instances: 3% above the bound in 60 s without, under 1% with it)."""
    seed = 1
    while run.best > run.proved and not run.stopped:
        batches = [list(PORTFOLIO[:4]), restarts(seed, RESTARTS), list(PORTFOLIO[4:])]
        seed += RESTARTS
        for k, batch in enumerate(batches):
            if run.best <= run.proved or run.stopped:
                break
            if attempt(run, run.proved, batch) == ABORTED and (k or run.window):
                bisect(run)
        run.budget *= 2


# Random restarts: these strategies with their ties broken at random (`Strategy.seed`).
# A depth-first search's time is heavy-tailed [Gomes 2000]: on a 450-buffer tiling where
# every strategy of `PORTFOLIO` spends thousands of nodes in vain, some restarts find the
# plan at once (within one node per buffer).
RESTART_BASES = (Strategy("T", "flat", "fewest"), Strategy("T", "pair", "fewest"),
                 Strategy("TAZ", "flat", "fewest"))
RESTARTS = 16             # restarts a round
BISECT_RESTARTS = 11      # restarts per capacity the bisection tries


def restarts(first: int, count: int) -> list[Strategy]:
    """`count` restart strategies, seeds first .. first + count - 1, bases in turn."""
    return [RESTART_BASES[s % len(RESTART_BASES)]._replace(seed=s)
            for s in range(first, first + count)]


def start_plan(items: Sequence[Buffer], lower: int, deadline: Deadline
               ) -> tuple[str, int, list[int], str]:
    """The plan the search starts from: bestfit's, or greedy-size's or GE's when smaller
    (those two run only when bestfit misses `lower`). They always run to their end, past
    the time limit if need be, so the search never returns a plan above the best plain
    heuristic, at any size. (name, arena, offsets, the note's word on the time limit: ""
    unless the start plans alone took it all.)"""
    def arena_of(plan: list[int]) -> int:
        return max(o + b.size for o, b in zip(plan, items))
    name, plan = "bestfit", plain_offsets(items, "bestfit")
    arena = arena_of(plan)
    if arena > lower:
        for other in ("greedy-size", "ge"):
            off = plain_offsets(items, other)
            if arena_of(off) < arena:
                name, plan, arena = other, off, arena_of(off)
    cut = "the start plans used up the time limit" if deadline.passed() else ""
    return name, arena, plan, cut


# The search's tables (overlap lists, section members) are built at about this many
# entries a second, measured on this machine with room to spare.
TABLE_ENTRIES_PER_SECOND = 1_000_000
# With a work budget the choice may not depend on the clock (the same budget, the same
# plan, at any load): the tables are built up to this many entries (about 0.5 GB of
# Python lists), what a 60 s limit allows at the rate above.
TABLE_ENTRIES_MAX = 30_000_000


def table_entries(items: Sequence[Buffer]) -> int:
    """Entries of the search's tables, counted in O(n log n) without building them: two
    per pair of buffers alive together (the overlap lists), one per buffer and section
    it lives in (the section members)."""
    cuts = sorted({b.start for b in items} | {b.end + 1 for b in items})
    spans = sum(bisect_right(cuts, b.end) - bisect_right(cuts, b.start) + 1 for b in items)
    return 2 * overlapping_pairs(items) + spans


def too_big(items: Sequence[Buffer], deadline: Deadline, node_limit: int | None = None
            ) -> None:
    """OutOfTime when the search's tables would take more than half the time left (the
    other half is for the search itself); with a `node_limit`, when they would hold more
    than TABLE_ENTRIES_MAX entries, whatever the clock says (a wall-clock cap beside the
    budget still stops the building itself)."""
    entries = table_entries(items)
    if node_limit is not None:
        if entries > TABLE_ENTRIES_MAX:
            raise OutOfTime(f"the search's tables would hold {entries:,} entries, more "
                            f"than the {TABLE_ENTRIES_MAX:,} a work budget builds")
    elif entries > TABLE_ENTRIES_PER_SECOND * deadline.left() / 2:
        raise OutOfTime(f"the search's tables would hold {entries:,} entries, more than "
                        f"{deadline.left():.1f} s left allow")


# ---------------------------------------------------------------------------------------
# Lower bounds above the theoretical minimum: small time windows, solved exactly.
# ---------------------------------------------------------------------------------------

PROOF_SHARE = 0.1         # the share of the time left (or of node_limit) for the windows
PROOF_NODES = 400_000     # the most nodes for the windows, with no limits given
WINDOW_BUFFERS = 24       # the most buffers a window's problem may hold
WINDOW_NODES = 20_000     # node budget of one window's proof
WINDOW_WIDTH = 16         # the most sections a window spans


def window_problem(p: Problem, a: int, b: int) -> tuple[list[Buffer], int]:
    """The buffers alive in sections [a, b), cut to them (a section is a step), less those
    alive in all of them; and the bytes of those left out.

    Why a plan of these, plus the bytes left out, bounds the whole problem: a plan of the
    whole problem, read at the window's steps only, places the cut buffers; a buffer alive
    at every step of the window holds the same bytes at each, so taking it out and closing
    its bytes up leaves a plan of the rest that is its size lower. So no plan of the cut
    buffers within C - left-out bytes means no plan of the whole problem within C."""
    seen: set[int] = set()
    cut, full = [], 0
    for s in range(a, b):
        for j in p.members[s]:
            if j in seen:
                continue
            seen.add(j)
            if p.lo[j] <= a and p.hi[j] >= b:
                full += p.size[j]
            else:
                cut.append(Buffer(j, max(p.lo[j], a), min(p.hi[j], b) - 1, p.size[j]))
                if len(cut) > WINDOW_BUFFERS:
                    return cut, full
    return cut, full


def window_proof(p: Problem, cap: int, nodes: list[int], deadline: float | None,
                 fits_at: dict[tuple[int, int], int]) -> tuple[int, int] | None:
    """A window of sections [a, b) around a section where the most bytes are alive whose
    buffers (`window_problem`) have no plan within `cap` bytes: a proof that the whole
    problem has none. Narrow windows first; `nodes[0]` is the node budget left (spent
    here); `fits_at` remembers the capacities where a window has a plan."""
    peaks = [s for s in range(p.n_sections) if p.live[s] == p.lower_bound]
    for width in range(2, min(WINDOW_WIDTH, p.n_sections) + 1):
        for a in sorted({x for s in peaks for x in range(s - width + 1, s + 1)
                         if 0 <= x and x + width <= p.n_sections}):
            b = a + width
            if fits_at.get((a, b), cap + 1) <= cap:
                continue
            bufs, full = window_problem(p, a, b)
            if len(bufs) > WINDOW_BUFFERS or len(bufs) < 2:
                continue
            sub = Problem(bufs)
            budget = min(WINDOW_NODES, nodes[0])
            status, _, used = feasible(sub, (cap - full) // sub.grain * sub.grain,
                                       PORTFOLIO[0], budget, deadline)
            nodes[0] -= used
            if status == INFEASIBLE:
                return a, b
            if status == FOUND:
                fits_at[(a, b)] = cap
            if nodes[0] <= 0 or status == TIMEOUT:
                return None
    return None


def prove_bound(run: Run, time_limit: float | None) -> None:
    """Raise `run.proved` above the theoretical minimum while a window proves it
    (`window_proof`), within `PROOF_SHARE` of the time and of the node limit."""
    p, grain = run.problem, run.problem.grain
    total = PROOF_NODES if run.node_limit is None else int(PROOF_SHARE * run.node_limit)
    nodes = [total]
    until = None if run.deadline is None else \
        now() + PROOF_SHARE * max(run.deadline - now(), 0.0)
    fits_at: dict[tuple[int, int], int] = {}
    while run.proved < run.best and nodes[0] > 0:
        window = window_proof(p, run.proved, nodes, until, fits_at)
        if window is None:
            break
        a, b = run.window = window
        run.proved = (run.proved // grain + 1) * grain
        run.why_bound = f"steps {p.cuts[a]}..{p.cuts[b] - 1} alone have no plan below it"
    run.nodes += total - nodes[0]


# ---------------------------------------------------------------------------------------
# An upper bound from the same window: plan its own buffers apart, the rest around them.
# ---------------------------------------------------------------------------------------

AROUND_SHARE = 0.5        # the share of the time (or of node_limit) left for it
AROUND_NODES = 100        # the most nodes a buffer for planning the problem of blocks


def plan_around_window(run: Run, items: Sequence[Buffer]) -> None:
    """A plan built around the windows that prove bounds (the constructive side of
    `window_proof`). The buffers alive only near the window (`private_buffers`: their own
    plan needs H bytes, more than their minimum h) are planned alone and replaced by one
    block of h bytes over their steps; the same is done around the window that proves
    the new problem's minimum wrong, while there is one. The problem of blocks is then
    planned by the search, and each block is opened to H bytes: every box at or above its
    top moves up H - h bytes, which keeps the plan valid (two boxes that did not collide
    cannot collide once all those above some offset moved up alike), and the block's
    buffers take their plan where it was. Kept when smaller than `run.best`."""
    left = None if run.deadline is None else run.deadline - now()
    nodes = None if run.node_limit is None else \
        int(AROUND_SHARE * (run.node_limit - run.nodes))
    if left is not None and left < 0.1 or nodes is not None and nodes < 2:
        return
    start = run.nodes
    boxes = [Buffer(i, b.start, b.end, b.size) for i, b in enumerate(items)]
    try:
        boxes, blocks = _blocks(run, boxes)
    except OutOfTime:                       # a problem of blocks took too long to build
        return
    if not blocks:
        return
    share = None if left is None else AROUND_SHARE * (run.deadline - now())
    if share is not None and share < 0.05:
        return
    budget = AROUND_NODES * len(boxes)      # a tiling is found fast or not at all
    if nodes is not None:
        budget = max(min(budget, nodes - (run.nodes - start)), 2)
    around, used = searched(boxes, share, budget)
    run.nodes += used
    placed = around.offsets
    for k, (ids, alone, h) in enumerate(blocks):
        top, lift = placed[-k - 1] + h, alone.arena_bytes - h
        placed = {i: o + lift * (o >= top) for i, o in placed.items()}
        placed.update((i, placed[-k - 1] + alone.offsets[j]) for j, i in enumerate(ids))
    plan = [placed[i] for i in range(len(items))]
    arena = _arena(run.problem, plan)
    if arena < run.best:
        run.best, run.plan = arena, plan


def _blocks(run: Run, boxes: list[Buffer]) -> tuple[list[Buffer], list]:
    """The boxes with each proving window's own buffers replaced by a block (ids -1, -2,
    ...), and per block: the ids it holds, their plan alone, its height."""
    problem, window, blocks = run.problem, run.window, []
    while window is not None:
        private = private_buffers(run, problem, boxes, window)
        if private is None or any(boxes[k].id < 0 for k in private):
            break
        inner = [Buffer(k, boxes[i].start, boxes[i].end, boxes[i].size)
                 for k, i in enumerate(private)]
        alone = plan_search(inner, time_limit=None, node_limit=WINDOW_NODES)
        h = theoretical_minimum(inner)
        blocks.append(([boxes[i].id for i in private], alone, h))
        mine = set(private)
        boxes = [b for k, b in enumerate(boxes) if k not in mine] + [
            Buffer(-len(blocks), min(b.start for b in inner), max(b.end for b in inner), h)]
        problem = Problem(boxes, Deadline(run.deadline))
        budget = [WINDOW_NODES]
        window = window_proof(problem, problem.lower_bound, budget, run.deadline, {})
        run.nodes += WINDOW_NODES - budget[0]
    return boxes, blocks


def private_buffers(run: Run, p: Problem, boxes: Sequence[Buffer], window: tuple[int, int]
                    ) -> list[int] | None:
    """The buffers (indices into `boxes`, those of problem `p`) alive only within the
    window widened by k sections, for the least k at which they alone have no plan within
    their own minimum (so they hold what raised the bound); None when none does with at
    most `WINDOW_BUFFERS`."""
    a, b = window
    for k in range(WINDOW_WIDTH + 1):
        first, last = p.cuts[max(a - k, 0)], p.cuts[min(b + k, p.n_sections)] - 1
        inside = [i for i, x in enumerate(boxes) if first <= x.start and x.end <= last]
        if len(inside) > WINDOW_BUFFERS:
            return None
        if len(inside) < 2:
            continue
        sub = Problem([boxes[i] for i in inside])
        status, _, used = feasible(sub, sub.lower_bound, PORTFOLIO[0], WINDOW_NODES,
                                   run.deadline)
        run.nodes += used
        if status == INFEASIBLE:
            return inside
        if status == TIMEOUT:
            return None
    return None


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
            if (cap // grain + 1) * grain > run.proved:
                run.proved = (cap // grain + 1) * grain
                run.why_bound = f"the search found no plan within {cap} B"
            return INFEASIBLE
        if outcome == TIMEOUT:
            run.stopped = "time limit"
            return TIMEOUT
    return ABORTED


def bisect(run: Run) -> None:
    """Bisect (in grains) between the bounds down to about 0.4% of the lower bound; the
    last few grains above the lower bound are tried one by one. Each capacity gets the
    strategy that last found a plan and `BISECT_RESTARTS` fresh random restarts."""
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
        tries = run.roomy[:1] + restarts(run.seed, BISECT_RESTARTS)
        run.seed += BISECT_RESTARTS
        if attempt(run, mid * grain, tries) == FOUND:
            hi = min(hi, run.best // grain - 1)
        else:
            lo = max(mid + 1, run.proved // grain)


def verdict(run: Run) -> str:
    """`bound_note` of the run: "optimal (why)", or how far the plan is from the best
    lower bound proved (and why the search stopped)."""
    why = run.why_bound or "the theoretical minimum"
    return bound_note(run.best, run.proved, run.problem.lower_bound, why,
                      f"{run.stopped} reached" if run.stopped else "")


def bound_note(arena: int, bound: int, minimum: int, why: str, stopped: str = "") -> str:
    """What a plan of `arena` bytes is worth, given a proved lower `bound` on every plan
    (`minimum`: the theoretical minimum; `why`: what proves the bound): "optimal (meets
    the theoretical minimum)", "optimal (no plan below B B exists)", or "within x% of a
    proved bound (lower bound B B: why)", x = 100 (arena - bound) / bound, rounded up
    (so that "within" holds), or "within x% of max-live (...)" when no bound above the
    theoretical minimum was proved; `stopped` (why the search stopped) is added after it."""
    if arena <= bound:
        how = "meets the theoretical minimum" if arena <= minimum else \
            f"no plan below {arena} B exists"
        return f"optimal ({how})"
    pct = math.ceil(10000.0 * (arena - bound) / bound) / 100
    what = "max-live" if bound <= minimum else "a proved bound"   # max-live: nothing more
    note = f"within {pct:.2f}% of {what} (lower bound {bound} B: {why})"
    return note + (f", {stopped}" if stopped else "")


def _arena(problem: Problem, offsets: Sequence[int]) -> int:
    return max((o + s for o, s in zip(offsets, problem.size)), default=0)
