"""Order and offsets chosen together: MODeL's integer program [Steiner 2023] for small graphs.

Every other planner places buffers whose lives a schedule has already fixed, and an order
(`topo.py`) picks lives without looking at the layout. MODeL treats both as one problem
(ROAM [Shu 2023] solves the same one on large graphs by cutting them into a tree of
subgraphs): a schedule that keeps two big tensors apart in time can beat every order a
heuristic finds, and a layout can only be as good as the lives it is given. With n nodes
run one per step (steps 0..n-1), the variables are

    r[v,t]   node v runs at step t (binary; only between v's earliest and latest step)
    l[e,t]   tensor e is alive at step t (in [0, 1]; the constraints push it up to 1)
    a_e, M   e's offset and the arena, as in the fixed-order ILP (`ilp.py`)
    z_ef     e lies below f (binary; two per pair of tensors some order keeps alive together)

and, with D_v(t) = sum over t' <= t of r[v,t'] ("v has run by step t"),

    sum_t r[v,t] = 1,  sum_v r[v,t] = 1        the schedule is a permutation
    D_v(t) <= D_u(t-1)                         u -> v: v has run by t only if u ran before
    l[e,t] >= D_p(t) - D_c(t-1)                p made e and its reader c has not run: alive
    z_ef + z_fe >= l[e,t] + l[f,t] - 1         alive together: one lies below the other
    a_e + s_e <= a_f + U (1 - z_ef)            ... and then they do not overlap
    a_e + s_e <= M,  sum_e s_e l[e,t] <= M     everything fits; each step's bytes (a cut)

Minimise M. U is the best heuristic plan over the orders of `topo.BEST_OF`, which is also
what comes back (with the gap) if the solver finds nothing better in time. The schedule is
read off r, the offsets are rebuilt as exact longest paths from the z of the tensors
alive together under that schedule (`ilp.stack_by_orders`), and the validator checks them.
Solved by HiGHS through `scipy.optimize.milp`, like `ilp.py`.

How it plugs in: a planner of `PLANNERS` sees buffers, so it cannot choose their lives;
this one takes the graph and sits in its own registry, `JOINT_PLANNERS`. `plan_memory`
asks a planner of that registry for the schedule first (`plan_jointly`), computes the
liveness of that schedule like any other, and takes the planner's offsets where a planner
of `PLANNERS` would have been called; the plan's schedule is the chosen order and it is
proved by the same validators (`validate_offsets`, `MemoryPlan.prove`). The option
`order` is not used (the ILP chooses it); in-place sharing, colours and safe mode are
refused, since each would change the problem with the schedule.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import PlanError
from ...graph import Graph
from ..buffers import Buffer, Placement, arena_size, validate_offsets
from ..clock import now
from ..liveness import check_schedule, liveness
from ..orders import ORDERS
from ..topo import BEST_OF
from . import JOINT_PLANNERS
from .engine.budget import Deadline, OutOfTime, check_time_limit
from .engine.ilp import gap_note, heuristics
from .engine.quiet import quietly
from .ilp import Rows, stack_by_orders

MAX_NODES = 40          # "a few dozen": n^2 schedule binaries, pairs x steps constraints
NAME = "model-ilp"
FIRST_LOAD_SECONDS = 1.0    # scipy.optimize's first import takes about this long
SOLVER_EXIT = 0.05          # seconds HiGHS may run past its own limit, kept for it


@dataclass(frozen=True)
class JointPlan:
    """What `plan_joint` returns: the schedule (node names), an offset per planned tensor,
    the arena, the best lower bound known over every order, the best fixed-order plan it
    started from (order name and arena), the number of tensor pairs the program orders
    (0 when it was not built), and a note ("optimal" or the gap)."""
    schedule: tuple[str, ...]
    offsets: dict[str, int]
    arena_bytes: int
    bound: int
    fixed_order: str
    fixed_arena: int
    pairs: int
    note: str

    def place(self, buffers: Sequence[Buffer], alignment: int = 1
              ) -> tuple[list[Buffer], Placement]:
        """The (buffers, placement) pair `plan_buffers` would return for the buffers of
        this schedule, checked by the same validator."""
        validate_offsets(buffers, self.offsets, alignment=alignment)
        return list(buffers), Placement.of(buffers, self.offsets, self.note)


@dataclass(frozen=True)
class _Problem:
    """The graph as the program sees it: nodes by index, predecessors, and the planned
    tensors (id, size in units of `grain`, producer, the nodes its life ends at)."""
    nodes: list[str]
    preds: list[list[int]]
    first: list[int]           # earliest step of each node (its ancestors come first)
    last: list[int]            # latest step (its descendants come after)
    ancestors: list[int]       # bitsets over node indices
    tensors: list[Buffer]      # start/end: the earliest birth, the latest death
    producer: list[int]
    readers: list[list[int]]   # the producer itself for a tensor nobody reads
    grain: int


def _problem(graph: Graph, alignment: int) -> _Problem:
    """Nodes, edges (data and control), step windows and planned tensors of `graph`."""
    nodes = [n.name for n in graph.nodes]
    idx = {v: k for k, v in enumerate(nodes)}
    preds: list[list[int]] = []
    for n in graph.nodes:
        ps = {idx[graph.tensors[i].producer] for i in n.inputs
              if graph.tensors[i].producer is not None} | {idx[d] for d in n.deps}
        preds.append(sorted(ps))
    anc = [0] * len(nodes)
    for k, ps in enumerate(preds):            # graph.nodes is a topological order
        for p in ps:
            anc[k] |= anc[p] | (1 << p)
    desc = [0] * len(nodes)
    for k in range(len(nodes)):
        for p in range(len(nodes)):
            if anc[k] >> p & 1:
                desc[p] += 1
    first = [bin(a).count("1") for a in anc]
    last = [len(nodes) - 1 - d for d in desc]
    live = liveness(graph, alignment=alignment)
    planned = [iv for iv in live.planned() if iv.bytes]
    grain = math.gcd(*(iv.bytes for iv in planned)) if planned else 1
    tensors, producer, readers = [], [], []
    for iv in planned:
        p = idx[graph.tensors[iv.name].producer]
        rs = sorted({idx[c] for c in graph.consumers[iv.name]}) or [p]
        producer.append(p)
        readers.append(rs)
        tensors.append(Buffer(iv.name, first[p], max(last[c] for c in rs), iv.bytes // grain))
    return _Problem(nodes, preds, first, last, anc, tensors, producer, readers, grain)


def _may_meet(pb: _Problem, e: int, f: int) -> bool:
    """Whether some schedule keeps tensors e and f alive at one step: not when every node
    e's life ends at is a strict ancestor of f's producer (or the other way round)."""
    def before(a: int, b: int) -> bool:
        return all(pb.ancestors[pb.producer[b]] >> c & 1 for c in pb.readers[a])
    return pb.tensors[e].overlaps_in_time(pb.tensors[f]) and not before(e, f) \
        and not before(f, e)


def _always_meet(pb: _Problem, e: int, f: int) -> bool:
    """Whether every schedule keeps e and f alive together: one node touches both."""
    touch_e = {pb.producer[e], *pb.readers[e]}
    return bool(touch_e & {pb.producer[f], *pb.readers[f]})


class _Vars:
    """Column numbers of the program's variables, allocated as they are named."""

    def __init__(self) -> None:
        self.n = 0
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.integer: list[int] = []

    def new(self, lo: float, hi: float, integer: bool) -> int:
        self.lo.append(lo)
        self.hi.append(hi)
        self.integer.append(int(integer))
        self.n += 1
        return self.n - 1


def _done_by(pb: _Problem, r: dict, v: int, t: int) -> tuple[list[int], float]:
    """D_v(t) as (columns, constant): v has run by step t."""
    if t < pb.first[v]:
        return [], 0.0
    if t >= pb.last[v]:
        return [], 1.0
    return [r[v, s] for s in range(pb.first[v], t + 1)], 0.0


def _schedule_rows(pb: _Problem, var: _Vars, rows: Rows, deadline: Deadline) -> dict:
    """The r variables, the permutation rows and the precedence rows; returns r."""
    n = len(pb.nodes)
    r = {(v, t): var.new(0, 1, True) for v in range(n)
         for t in range(pb.first[v], pb.last[v] + 1)}
    for v in range(n):                                   # each node runs once
        cols = [r[v, t] for t in range(pb.first[v], pb.last[v] + 1)]
        rows.add(cols, [1.0] * len(cols), 1.0)
        rows.add(cols, [-1.0] * len(cols), -1.0)
    for t in range(n):                                   # one node per step
        cols = [r[v, t] for v in range(n) if (v, t) in r]
        rows.add(cols, [1.0] * len(cols), 1.0)
        rows.add(cols, [-1.0] * len(cols), -1.0)
    for v in range(n):
        deadline.check("building the model")
        for u in pb.preds[v]:
            for t in range(pb.first[v], pb.last[v]):     # D_v(t) - D_u(t-1) <= 0
                cv, _ = _done_by(pb, r, v, t)
                cu, ku = _done_by(pb, r, u, t - 1)
                if ku < 1.0:
                    rows.add(cv + cu, [1.0] * len(cv) + [-1.0] * len(cu), ku)
    return r


def _life_rows(pb: _Problem, var: _Vars, rows: Rows, r: dict, deadline: Deadline) -> dict:
    """The l variables (alive or not, per tensor and step of its window) and their rows."""
    life = {}
    for e, b in enumerate(pb.tensors):
        deadline.check("building the model")
        p = pb.producer[e]
        for t in range(b.start, b.end + 1):
            life[e, t] = var.new(0, 1, False)
            cp, kp = _done_by(pb, r, p, t)
            for c in pb.readers[e]:                       # D_p(t) - D_c(t-1) - l <= 0
                cc, kc = _done_by(pb, r, c, t - 1)
                rows.add(cp + cc + [life[e, t]],
                         [1.0] * len(cp) + [-1.0] * len(cc) + [-1.0], kc - kp)
    return life


def _layout_rows(pb: _Problem, var: _Vars, rows: Rows, life: dict, upper: int,
                 lower: int, deadline: Deadline) -> tuple[list[int], int, dict]:
    """Offsets, the arena M, the pair binaries and their rows, and each step's bytes cut.
    Returns (offset columns, M's column, {(e, f): column of z_ef})."""
    s = [b.size for b in pb.tensors]
    a = [var.new(0, upper - size, False) for size in s]
    m = var.new(lower, upper, False)
    for e in range(len(s)):
        rows.add([a[e], m], [1.0, -1.0], -s[e])
    z: dict[tuple[int, int], int] = {}
    pairs = [(e, f) for e in range(len(s)) for f in range(e + 1, len(s)) if _may_meet(pb, e, f)]
    always = {(e, f) for e, f in pairs if _always_meet(pb, e, f)}
    mirror = max(always, key=lambda p: (s[p[0]] + s[p[1]], -p[0], -p[1]), default=None)
    for e, f in pairs:
        deadline.check("building the model")
        z[e, f] = var.new(1 if (e, f) == mirror else 0, 1, True)   # a plan's mirror is one
        z[f, e] = var.new(0, 0 if (e, f) == mirror else 1, True)
        rows.add([z[e, f], z[f, e]], [1.0, 1.0], 1.0)
        if (e, f) in always:                             # alive together in any order
            rows.add([z[e, f], z[f, e]], [-1.0, -1.0], -1.0)
        for t in range(max(pb.tensors[e].start, pb.tensors[f].start),
                       min(pb.tensors[e].end, pb.tensors[f].end) + 1):
            rows.add([life[e, t], life[f, t], z[e, f], z[f, e]], [1.0, 1.0, -1.0, -1.0], 1.0)
        rows.add([a[e], a[f], z[e, f]], [1.0, -1.0, float(upper)], upper - s[e])
        rows.add([a[f], a[e], z[f, e]], [1.0, -1.0, float(upper)], upper - s[f])
    for t in range(len(pb.nodes)):                       # a step's live bytes fit in M
        cols = [(life[e, t], s[e]) for e in range(len(s)) if (e, t) in life]
        rows.add([c for c, _ in cols] + [m], [float(v) for _, v in cols] + [-1.0], 0.0)
    return a, m, z


def _lower_bound(graph: Graph, alignment: int) -> int:
    """Bytes no schedule goes below: a node's planned inputs and outputs are all alive at
    its step."""
    live = liveness(graph, alignment=alignment).intervals
    best = 0
    for n in graph.nodes:
        names = {t for t in (*n.inputs, *n.outputs) if live[t].planned}
        best = max(best, sum(live[t].bytes for t in names))
    return best


def _best_fixed(graph: Graph, alignment: int, deadline: Deadline
                ) -> tuple[str, tuple[str, ...], dict[str, int], int]:
    """The smallest heuristic plan (greedy-size, bestfit, GE) over the orders of BEST_OF:
    (order name, schedule, offsets, arena)."""
    best = None
    for name in BEST_OF:
        sched = tuple(ORDERS[name](graph))
        items = _nonempty(graph, sched, alignment)
        _, offsets, arena, _ = heuristics(items, deadline) if items else ("", {}, 0, "")
        if best is None or arena < best[3]:
            best = (name, sched, offsets, arena)
        if deadline.passed():
            break
    assert best is not None
    return best


def _solve(pb: _Problem, lower: int, upper: int, deadline: Deadline
           ) -> tuple[Any, list[int], dict, dict]:
    """Build the program (bytes in units of `pb.grain`) and run HiGHS until the deadline:
    (scipy's result, offset columns, r columns, z columns)."""
    var, rows = _Vars(), Rows()
    r = _schedule_rows(pb, var, rows, deadline)
    life = _life_rows(pb, var, rows, r, deadline)
    lo, hi = -(-lower // pb.grain), upper // pb.grain
    a, m, z = _layout_rows(pb, var, rows, life, hi, min(lo, hi), deadline)
    if "scipy.optimize" not in sys.modules and deadline.left() < FIRST_LOAD_SECONDS:
        raise OutOfTime("loading the solver")             # an import cannot be cut short
    from scipy.optimize import Bounds, LinearConstraint, milp
    deadline.check("loading the solver")
    c = np.zeros(var.n)
    c[m] = 1.0
    res = quietly(milp, c, integrality=np.array(var.integer), bounds=Bounds(var.lo, var.hi),
                  constraints=LinearConstraint(rows.matrix(var.n), rows.lo, rows.hi),
                  options={"time_limit": max(deadline.left() - SOLVER_EXIT, 1e-3),
                           "disp": False})
    return res, a, r, z


def _read_plan(graph: Graph, pb: _Problem, alignment: int, x: np.ndarray, a: list[int],
               r: dict, z: dict) -> tuple[tuple[str, ...], dict[str, int]] | None:
    """The solver's schedule and exact offsets, or None when the validators refuse them.
    Offsets: longest paths over "below" for every pair alive together under the schedule
    (z where the program has it, else the solver's offsets)."""
    step = {}
    for v in range(len(pb.nodes)):
        window = range(pb.first[v], pb.last[v] + 1)
        step[v] = max(window, key=lambda t: x[r[v, t]])
    sched = tuple(pb.nodes[v] for v in sorted(step, key=lambda v: (step[v], v)))
    try:
        check_schedule(graph, sched)
    except PlanError:
        return None
    items = _nonempty(graph, sched, alignment)
    index = {b.id: e for e, b in enumerate(pb.tensors)}
    hint = [x[a[index[b.id]]] for b in items]
    below = []
    for i, bi in enumerate(items):
        for j in range(i + 1, len(items)):
            if not bi.overlaps_in_time(items[j]):
                continue
            e, f = index[bi.id], index[items[j].id]
            if (e, f) in z and x[z[e, f]] > 0.5:
                below.append((i, j))              # the program put e below f
            elif (e, f) in z and x[z[f, e]] > 0.5:
                below.append((j, i))
            else:                                 # not ordered: the solver's offsets
                below.append((i, j) if hint[i] <= hint[j] else (j, i))
    offsets = stack_by_orders(items, below, hint)
    if offsets is None:
        return None
    try:
        validate_offsets(items, offsets)
    except PlanError:
        return None
    return sched, offsets


def plan_joint(graph: Graph, *, alignment: int = 1, time_limit: float = 10.0) -> JointPlan:
    """The schedule and offsets of the smallest arena MODeL's program finds for `graph`
    within `time_limit` seconds (the whole call), with the gap to the best bound known.

    It starts from the best heuristic plan over the orders of BEST_OF and returns that
    plan (with its gap) when the solver finds nothing smaller in time. PlanError for a
    graph of more than MAX_NODES nodes (n^2 schedule binaries, a row per pair and step)
    or a bad time limit."""
    check_time_limit(NAME, time_limit)
    t0 = now()
    deadline = Deadline.after(time_limit)
    n = len(graph.nodes)
    if n > MAX_NODES:
        raise PlanError(f"{NAME}: graph {graph.name!r} has {n} nodes, more than the "
                        f"{MAX_NODES} this program is for; plan it with a fixed order "
                        "(planner 'ilp'), or by subgraphs as ROAM does [Shu 2023]")
    pb = _problem(graph, alignment)
    bound = _lower_bound(graph, alignment)
    name, sched, offsets, upper = _best_fixed(graph, alignment, deadline)
    arena, how, pairs = upper, f"the heuristic plan of order {name}", 0
    if upper > bound:
        try:
            res, a, r, z = _solve(pb, bound, upper, deadline)
        except OutOfTime as stop:
            how += f" (ILP not solved: {stop.step}, time limit reached)"
        else:
            pairs = len(z) // 2
            if res.get("mip_dual_bound") is not None and np.isfinite(res.mip_dual_bound):
                bound = max(bound, math.ceil(res.mip_dual_bound - 1e-6) * pb.grain)
            found = _read_plan(graph, pb, alignment, res.x, a, r, z) \
                if res.x is not None else None
            size = arena_size(_nonempty(graph, found[0], alignment), found[1]) \
                if found is not None else upper
            if found is not None and size < upper:
                (sched, offsets), arena, how = found, size, "the ILP's order and offsets"
            elif res.x is None:
                how += " (the ILP found none smaller in time)"
            elif found is None:
                how += " (the ILP's plan was refused by the validator)"
    every = {iv.name: 0 for iv in liveness(graph, sched, alignment).planned()}
    every.update(offsets)                     # tensors of 0 bytes at 0
    bound = min(bound, arena)
    note = (f"{gap_note(arena, bound)} over every order, bound {bound} B: {how}; start: "
            f"order {name}, {upper} B ({NAME}: {n} nodes, {pairs} pairs, "
            f"{now() - t0:.2f} s)")
    return JointPlan(tuple(sched), every, arena, bound, name, upper, pairs, note)


def _nonempty(graph: Graph, sched: Sequence[str], alignment: int) -> list[Buffer]:
    """The planned tensors of more than 0 bytes, as buffers of schedule `sched`."""
    return [b for b in liveness(graph, sched, alignment).buffers() if b.size]


JOINT_PLANNERS[NAME] = plan_joint


def plan_jointly(graph: Graph, options: Any) -> JointPlan:
    """What `plan_memory` calls for a planner of `JOINT_PLANNERS`: the planner's options
    checked (PlanError names an option it does not take, in-place, colours or safe
    mode), then the planner run with the options' alignment."""
    fn: Callable[..., JointPlan] = JOINT_PLANNERS[options.planner]
    accepted = [p for p in list(inspect.signature(fn).parameters)[1:] if p != "alignment"]
    unknown = sorted(k for k in options.planner_args if k not in accepted)
    if unknown:
        raise PlanError(f"planner {options.planner!r} has no option "
                        f"{', '.join(map(repr, unknown))}; its options are "
                        f"{', '.join(accepted)}")
    for what, value, plain in (("inplace", options.inplace, False),
                               ("colors", options.colors, 1),
                               ("safe", getattr(options, "safe", False), False)):
        if value != plain:
            raise PlanError(f"planner {options.planner!r} chooses the schedule, and {what}="
                            f"{value!r} would change the problem with it: plan with "
                            f"{what}={plain!r}")
    return fn(graph, alignment=options.alignment, **options.planner_args)
