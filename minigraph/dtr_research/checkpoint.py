"""Static rematerialisation baselines on the same cost model as DTR.

A static plan is a *sequence* of op executions (an op may appear more than once: a
recomputation). `evaluate_sequence` gives its peak arena bytes with exactly DTR's
accounting (planned tensors, aligned, plus the running op's workspace; each computed copy
lives until the last read that uses it) and its compute cost, so DTR, Chen et al.'s
sqrt(n) checkpointing and Checkmate's optimum land on one plot.

* `chen_sqrt` / `chen_curve`: Chen et al. 2016 as MXNet's memonger does it: walk the
  forward ops, add up their output bytes, and keep (checkpoint) an op's output each time
  the running sum passes a threshold; everything else is dropped after the forward pass
  and recomputed once, from the nearest checkpoints, when the backward pass first needs
  it. memonger's search tries thresholds around sqrt(saved * largest segment / 2).
* `checkmate`: the optimal rematerialisation of Jain et al. 2020 (Checkmate) as a MILP
  solved by `scipy.optimize.milp` (HiGHS) with a time limit: stage t computes op t for the
  first time and may recompute any earlier op; binary R (compute), S (keep), FREE (free
  after a use), continuous U (bytes in use); minimise total cost under the budget. Small
  graphs only (variables grow as n^2).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import BudgetError, GraphError
from ..graph import Graph
from ..memory.planners.engine.quiet import quietly
from ..runtime.dtr.program import CostSpec, Program, as_program, resolve_budget


@dataclass
class StaticResult:
    """A static rematerialisation plan evaluated on the DTR cost model."""
    method: str
    peak: int                  # arena bytes the sequence needs (DTR's accounting)
    cost: float                # total compute of the sequence
    base_cost: float           # compute of running every op once
    no_remat_peak: int         # the same accounting without rematerialisation (live bytes)
    sequence: list[str] = field(repr=False, default_factory=list)
    note: str = ""
    optimal: bool | None = None
    budget: int | None = None
    seconds: float = 0.0
    external: int = 0          # bytes outside the arena (parameters, inputs, outputs)
    dtr_total: int = 0         # DTR's total peak (`Bounds.total`): its ratios' denominator
    given_ratio: float | None = None    # the budget ratio asked for, when one was

    @property
    def overhead(self) -> float:
        return self.cost / self.base_cost if self.base_cost else 1.0

    @property
    def ratio(self) -> float:
        """Arena peak over the no-rematerialisation arena peak (`ratio_of="arena"`)."""
        return self.peak / self.no_remat_peak if self.no_remat_peak else 1.0

    @property
    def total_ratio(self) -> float:
        """(peak + external) over (no-rematerialisation peak + external): the DTR paper's
        ratio of the total peak (`ratio_of="total"`)."""
        t = self.no_remat_peak + self.external
        return (self.peak + self.external) / t if t else 1.0

    @property
    def budget_ratio(self) -> float:
        """Where this plan sits on a DTR sweep's axis: the budget ratio it was given (as a
        DTR run at that ratio is drawn), else its budget (its peak when it had none) plus
        the outside bytes over DTR's total peak (`dtr_total`), the denominator of DTR's
        own ratios; `total_ratio` without it."""
        if self.given_ratio is not None:
            return self.given_ratio
        if not self.dtr_total:
            return self.total_ratio
        at = self.peak if self.budget is None else self.budget
        return (at + self.external) / self.dtr_total

    def __repr__(self) -> str:
        return (f"StaticResult({self.method}: peak {self.peak:,} B = {self.ratio:.2f} x, "
                f"compute x{self.overhead:.3f}{', ' + self.note if self.note else ''})")


def evaluate_sequence(program: Program, seq: Sequence[int]) -> tuple[int, float]:
    """(peak arena bytes, total cost) of running op indices `seq` in order.

    Each execution makes a fresh copy of the op's outputs; a read uses the latest copy;
    a copy is alive from its execution to its last read (both inclusive). Raises
    GraphError if an op reads a tensor not computed yet, if a stateful op runs twice, or
    if some op never runs."""
    p = program
    arena, size = p.arena, [t.size for t in p.tensors]
    current: dict[int, int] = {}
    born: list[int] = []
    last: list[int] = []
    inst_size: list[int] = []
    seen_ops = [0] * len(p.ops)
    cost = 0.0
    for j, k in enumerate(seq):
        op = p.ops[k]
        seen_ops[k] += 1
        if seen_ops[k] > 1 and not op.replayable:
            raise GraphError(f"stateful op {op.name} would run twice")
        cost += op.cost
        for i in op.inputs:
            if not arena[i]:
                if p.tensors[i].producer >= 0 and not seen_ops[p.tensors[i].producer]:
                    raise GraphError(f"{op.name} reads {p.tensors[i].name} before it exists")
                continue
            if i not in current:
                raise GraphError(f"{op.name} (position {j}) reads {p.tensors[i].name}, "
                                 "which has not been computed")
            last[current[i]] = j
        for o in op.outputs:
            if arena[o]:
                current[o] = len(born)
                born.append(j)
                last.append(j)
                inst_size.append(size[o])
    missing = [p.ops[k].name for k in range(len(p.ops)) if not seen_ops[k]]
    if missing:
        raise GraphError(f"the sequence never runs {missing[0]}")
    diff = np.zeros(len(seq) + 1, dtype=np.int64)
    for b, e, s in zip(born, last, inst_size):
        diff[b] += s
        diff[e + 1] -= s
    live = np.cumsum(diff[:-1])
    ws = np.array([p.ops[k].workspace for k in seq], dtype=np.int64)
    return int((live + ws).max()) if len(seq) else 0, cost


# --- Chen et al.: sqrt(n) checkpointing, MXNet memonger style ------------------------------

def _is_forward(program: Program, k: int) -> bool:
    return program.ops[k].role == "forward"


def chen_checkpoints(program: Program, threshold: float) -> set[int]:
    """memonger's make_mirror_plan: forward ops whose outputs are kept. The running sum of
    forward output bytes restarts each time it passes `threshold`."""
    keep: set[int] = set()
    local = 0
    for k, op in enumerate(program.ops):
        if not _is_forward(program, k):
            continue
        local += sum(program.tensors[o].size for o in op.outputs if program.arena[o])
        if local > threshold or not op.replayable:
            keep.add(k)
            local = 0
    return keep


def chen_sequence(program: Program, keep: set[int]) -> list[int]:
    """The forward pass, then the backward pass with each dropped forward tensor
    recomputed (once, from the nearest kept tensors) just before its first backward use."""
    p = program
    seq: list[int] = []
    recomputed: set[int] = set()
    started = False
    for k, op in enumerate(p.ops):
        if _is_forward(p, k) and not started:
            seq.append(k)
            continue
        started = True
        if _is_forward(p, k):
            seq.append(k)
            continue
        for i in op.inputs:
            q = p.tensors[i].producer
            if not p.arena[i] or q < 0 or not _is_forward(p, q) or q in keep or \
                    q in recomputed:
                continue
            # recompute q after its own dropped forward inputs (explicit stack, post-order)
            stack = [(q, False)]
            while stack:
                x, expanded = stack.pop()
                if x in recomputed:
                    continue
                if expanded:
                    recomputed.add(x)
                    seq.append(x)
                    continue
                stack.append((x, True))
                for i2 in p.ops[x].inputs:
                    q2 = p.tensors[i2].producer
                    if p.arena[i2] and q2 >= 0 and _is_forward(p, q2) and q2 not in keep \
                            and q2 not in recomputed:
                        stack.append((q2, False))
        seq.append(k)
    return seq


def _chen_result(program: Program, threshold: float, t0: float) -> StaticResult:
    keep = chen_checkpoints(program, threshold)
    seq = chen_sequence(program, keep)
    peak, cost = evaluate_sequence(program, seq)
    return StaticResult("sqrt(n)", peak, cost, program.base_cost, program.live_peak(),
                        [program.ops[k].name for k in seq],
                        f"threshold {threshold:,.0f} B, {len(keep)} checkpoints",
                        seconds=time.perf_counter() - t0, external=program.external_bytes,
                        dtr_total=program.bounds().total)


def chen_sqrt(source: Graph | Program, *, ntrial: int = 6, schedule: Sequence[str] | None =
              None, alignment: int = 512, costs: CostSpec = "flops") -> StaticResult:
    """memonger's `search_plan`: three rounds from threshold 0 guessing
    sqrt(saved bytes * largest segment / 2), then `ntrial` thresholds up to sqrt(2) times
    the last guess; the plan with the smallest peak wins (ties: less compute)."""
    p = as_program(source, schedule, alignment, costs)
    t0 = time.perf_counter()
    history: list[StaticResult] = []
    threshold = 0.0
    min_threshold = None
    for _ in range(3):
        keep = chen_checkpoints(p, threshold)
        r = _chen_result(p, threshold, t0)
        history.append(r)
        saved = sum(p.tensors[o].size for k in keep for o in p.ops[k].outputs if p.arena[o])
        local = _largest_segment(p, keep)
        if min_threshold is None or local < min_threshold:
            min_threshold = local
        threshold = math.sqrt(saved * local / 2)
    max_threshold = threshold * math.sqrt(2)
    step = (max_threshold - min_threshold) / ntrial
    if step > 0:
        th = min_threshold + step
        for _ in range(ntrial):
            history.append(_chen_result(p, th, t0))
            th += step
    best = min(history, key=lambda r: (r.peak, r.cost))
    best.seconds = time.perf_counter() - t0
    return best


def _largest_segment(p: Program, keep: set[int]) -> int:
    best = local = 0
    for k, op in enumerate(p.ops):
        if not _is_forward(p, k):
            continue
        local += sum(p.tensors[o].size for o in op.outputs if p.arena[o])
        best = max(best, local)
        if k in keep:
            local = 0
    return best


def chen_curve(source: Graph | Program, points: int = 40, *,
               schedule: Sequence[str] | None = None, alignment: int = 512,
               costs: CostSpec = "flops") -> list[StaticResult]:
    """Chen plans over `points` thresholds from 0 (keep everything) to the total forward
    bytes (keep nothing): the (peak, compute) trade-off curve, Pareto-filtered."""
    p = as_program(source, schedule, alignment, costs)
    total = sum(p.tensors[o].size for k, op in enumerate(p.ops) if _is_forward(p, k)
                for o in op.outputs if p.arena[o])
    out = []
    for th in np.unique(np.geomspace(1, max(total, 2), points).astype(np.int64)):
        out.append(_chen_result(p, float(th), time.perf_counter()))
    out.append(_chen_result(p, 0.0, time.perf_counter()))
    out.sort(key=lambda r: (r.peak, r.cost))
    front, best_cost = [], math.inf
    for r in out:
        if r.cost < best_cost - 1e-9:
            front.append(r)
            best_cost = r.cost
    return front


def chen_at(source: Graph | Program, budget: int, **kw) -> StaticResult | None:
    """The cheapest Chen plan whose peak fits in `budget` bytes (None if none does)."""
    fits = [r for r in chen_curve(source, **kw) if r.peak <= budget]
    return min(fits, key=lambda r: r.cost) if fits else None


# --- Checkmate: the optimal rematerialisation as a MILP ----------------------------------------

def checkmate(source: Graph | Program, budget: int | None = None, *,
              ratio: float | None = None, time_limit: float = 30.0,
              schedule: Sequence[str] | None = None, alignment: int = 512,
              costs: CostSpec = "flops", max_ops: int = 120) -> StaticResult:
    """The cheapest rematerialisation sequence within `budget` bytes (Checkmate's MILP).

    Returns a StaticResult with `optimal=True` when HiGHS proved optimality within
    `time_limit` seconds, False when it stopped at the limit with a feasible plan. Raises
    BudgetError when no plan fits (or none was found in time)."""
    p = as_program(source, schedule, alignment, costs)
    n = len(p.ops)
    if n > max_ops:
        raise ValueError(f"checkmate: {n} ops is too many for the MILP (max_ops={max_ops})")
    budget = resolve_budget(p, budget, ratio)
    t0 = time.perf_counter()
    milp = _CheckmateMILP(p, budget)
    for t in range(n):
        milp.stage(t)
    res = milp.solve(time_limit)
    seconds = time.perf_counter() - t0
    if res.x is None:
        raise BudgetError(f"checkmate: no plan within {budget:,} B found ({res.message})",
                          minimum=p.bounds().lower)
    seq = [i for t in range(n) for i in range(t + 1) if res.x[milp.R(t, i)] > 0.5]
    peak, cost = evaluate_sequence(p, seq)
    optimal = res.status == 0
    return StaticResult("checkmate", peak, cost, p.base_cost, p.live_peak(),
                        [p.ops[k].name for k in seq],
                        "optimal" if optimal else f"time limit ({res.message})",
                        optimal, budget, seconds, p.external_bytes, p.bounds().total,
                        ratio)


class _CheckmateMILP:
    """Checkmate's MILP over a program's ops. Stage t computes op t for the first time
    and may recompute earlier ones. Variables: R[t,i] (op i computed at stage t), S[t,i]
    (its outputs kept from stage t-1 into t), FREE[t,i,k] (i's outputs freed after op k
    of stage t), U[t,k] (bytes in use after op k of stage t)."""

    def __init__(self, p: Program, budget: int):
        self.p, self.n, self.budget = p, len(p.ops), budget
        self.M = [sum(p.tensors[o].size for o in op.outputs if p.arena[o]) for op in p.ops]
        self.ws = [op.workspace for op in p.ops]
        self.deps: list[list[int]] = []          # producer ops of each op's arena inputs
        for op in p.ops:
            self.deps.append(sorted({p.tensors[i].producer for i in op.inputs
                                     if p.arena[i] and p.tensors[i].producer >= 0}))
        self.users: list[list[int]] = [[] for _ in range(self.n)]
        for k in range(self.n):
            for d in self.deps[k]:
                self.users[d].append(k)
        self.idx: dict[tuple, int] = {}
        self._variables()
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def _variables(self) -> None:
        idx, deps = self.idx, self.deps
        for t in range(self.n):
            for i in range(t + 1):
                idx.setdefault(("R", t, i), len(idx))
                idx.setdefault(("U", t, i), len(idx))
            for i in range(t):
                idx.setdefault(("S", t, i), len(idx))
            for k in range(t + 1):
                for i in deps[k] + [k]:
                    idx.setdefault(("F", t, i, k), len(idx))
        nv = len(idx)
        self.lb, self.ub, self.integrality = np.zeros(nv), np.ones(nv), np.ones(nv)
        for key, c in idx.items():
            if key[0] == "U":
                self.integrality[c] = 0
                self.ub[c] = self.budget

    def R(self, t: int, i: int) -> int:
        return self.idx[("R", t, i)]

    def S(self, t: int, i: int) -> int:
        return self.idx[("S", t, i)]

    def U(self, t: int, k: int) -> int:
        return self.idx[("U", t, k)]

    def F(self, t: int, i: int, k: int) -> int:
        return self.idx[("F", t, i, k)]

    def add(self, terms: list[tuple[int, float]], lb: float, ub: float) -> None:
        r = len(self.lo)
        for c, v in terms:
            self.rows.append(r)
            self.cols.append(c)
            self.vals.append(v)
        self.lo.append(lb)
        self.hi.append(ub)

    def stage(self, t: int) -> None:
        """Every constraint of stage t, in order."""
        self._compute_rows(t)
        self._keep_rows(t)
        self._free_rows(t)
        self._memory_rows(t)

    def _compute_rows(self, t: int) -> None:
        """Stage t computes op t; a stateful op runs once; an op's inputs are computed in
        the stage or kept from the one before."""
        R, S, p = self.R, self.S, self.p
        self.lb[R(t, t)] = 1
        for i in range(t + 1):
            if not p.ops[i].replayable and i != t:
                self.ub[R(t, i)] = 0
            for j in self.deps[i]:
                self.add([(R(t, i), 1)] + [(R(t, j), -1)] + ([(S(t, j), -1)] if j < t else []),
                         -np.inf, 0)

    def _keep_rows(self, t: int) -> None:
        """Only what exists at stage t can be kept into stage t + 1."""
        R, S = self.R, self.S
        if t + 1 < self.n:
            for i in range(t + 1):
                self.add([(S(t + 1, i), 1), (R(t, i), -1)] + ([(S(t, i), -1)] if i < t else []),
                         -np.inf, 0)

    def _free_rows(self, t: int) -> None:
        """FREE[t,i,k] = 1 exactly when no hazard keeps i's outputs after op k:
        hazards = (1 - R[t,k]) + S[t+1,i] + sum R[t,j] (j later users);
        FREE >= 1 - hazards ; max_h * (1 - FREE) >= hazards."""
        R, S, F = self.R, self.S, self.F
        for k in range(t + 1):
            for i in self.deps[k] + [k]:
                later = [j for j in self.users[i] if k < j <= t]
                max_h = 2 + len(later)
                s_next = [(S(t + 1, i), 1)] if t + 1 < self.n else []
                self.add([(F(t, i, k), 1), (R(t, k), -1)] + s_next +
                         [(R(t, j), 1) for j in later], 0, np.inf)
                self.add([(F(t, i, k), max_h), (R(t, k), -1)] + s_next +
                         [(R(t, j), 1) for j in later], -np.inf, max_h - 1)

    def _memory_rows(self, t: int) -> None:
        """U[t,0] = sum_i M_i S[t,i] + M_0 R[t,0]; U[t,k] = U[t,k-1] - freed + M_k R[t,k];
        U[t,k] plus op k's workspace within the budget."""
        R, S, U, F, M = self.R, self.S, self.U, self.F, self.M
        self.add([(U(t, 0), 1)] + [(S(t, i), -M[i]) for i in range(t)] + [(R(t, 0), -M[0])],
                 0, 0)
        for k in range(1, t + 1):
            freed = [(F(t, i, k - 1), M[i]) for i in self.deps[k - 1] + [k - 1]]
            self.add([(U(t, k), 1), (U(t, k - 1), -1), (R(t, k), -M[k])] + freed, 0, 0)
        for k in range(t + 1):
            if self.ws[k]:
                self.add([(U(t, k), 1), (R(t, k), self.ws[k])], -np.inf, self.budget)

    def solve(self, time_limit: float) -> Any:
        """Minimise the summed cost of every computation, with HiGHS."""
        from scipy.optimize import Bounds as LB
        from scipy.optimize import LinearConstraint, milp
        from scipy.sparse import coo_matrix
        nv = len(self.idx)
        c = np.zeros(nv)
        for key, col in self.idx.items():
            if key[0] == "R":
                c[col] = self.p.ops[key[2]].cost
        A = coo_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.lo), nv)).tocsr()
        return quietly(milp, c, constraints=LinearConstraint(A, self.lo, self.hi),
                       integrality=self.integrality, bounds=LB(self.lb, self.ub),
                       options={"time_limit": float(time_limit), "disp": False})
