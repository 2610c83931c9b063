"""The budgets that matter for one program, computed from the program alone.

`lower`: no smaller budget can work. `safe`: the runtime never gets stuck at it. `peak`: the
arena a run without rematerialisation needs under the runtime's first-fit allocator.
`live`: the same with an ideal allocator. Each is a plain walk over the program's steps;
none builds a runtime.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ...errors import BudgetError
from .allocator import FirstFitArena
from .states import EVI, EXT, FREED, NEW, RES


class ProgramData(Protocol):
    """What the walks below read of a `Program` (program.py), which imports this module
    for `Program.bounds()`: named here rather than imported, so the two form no cycle."""
    name: str
    tensors: Sequence[Any]
    ops: Sequence[Any]
    steps: Sequence[tuple[str, int]]
    arena: Sequence[bool]
    replayable: Sequence[bool]
    external_bytes: int

    def bounds(self) -> Bounds: ...


@dataclass(frozen=True)
class Bounds:
    """Budgets that matter for one program (bytes of arena).

    `lower`: the largest single-op footprint (inputs + outputs + workspace resident at
    once) plus bytes that can never be evicted; no smaller budget can work, and the
    runtime refuses one at once. `safe`: a budget at which the runtime never gets stuck
    (every op can run with everything else evicted; it rematerialises inputs in the order
    this bound assumes, see `Program`), as long as it may compact the arena when the
    free bytes are scattered (`defrag` "first" or "last-resort"). It finishes unless the
    recomputation passes the thrash limit: at `safe` a chain of n ops recomputes O(n^2)
    ops, so with the default limit (10x the base cost) it stops with ThrashError from a
    few dozen ops on; with `thrash_limit=math.inf` it always finishes. With
    `defrag="never"` the bytes are counted but not their places: a first-fit arena can
    leave no block large enough at any budget below `peak`, and the runtime then stops
    with BudgetError (never loops: `RELIEF_SLACK`).
    `peak`: the arena this runtime needs without rematerialisation under its first-fit
    allocator (the highest address a no-evict run reaches, workspace included): arena
    ratio 1.0 never evicts. `live`: the largest sum of live bytes plus workspace (the
    same run with an ideal allocator; <= peak). `external`: bytes outside the arena that
    are never evicted (parameters, inputs, constants, graph outputs); `total` = external +
    peak, the DTR paper's "peak memory of the unmodified run"."""
    lower: int
    safe: int
    peak: int
    external: int = 0
    live: int = 0

    @property
    def total(self) -> int:
        return self.external + self.peak

    def arena_budget(self, ratio: float, ratio_of: str = "total",
                     baseline: int | None = None) -> int:
        """Arena bytes for a budget `ratio` of the total peak (the DTR paper's definition:
        ratio x total - external), with `ratio_of="arena"` of the arena peak, or with
        `ratio_of="baseline"` of the DTR authors' simulator's baseline peak (`baseline`,
        a trace's unbudgeted live peak with constants; by default external + `live`)."""
        if ratio_of == "total":
            return int(ratio * self.total) - self.external
        if ratio_of == "arena":
            return int(ratio * self.peak)
        if ratio_of == "baseline":
            base = self.live + self.external if baseline is None else baseline
            return int(ratio * base) - self.external
        raise BudgetError(f"ratio_of must be 'total', 'arena' or 'baseline', not "
                          f"{ratio_of!r}")

    def ratios(self, budget: int) -> tuple[float, float]:
        """(of total, of arena) for an arena budget in bytes."""
        return ((budget + self.external) / self.total if self.total else 1.0,
                budget / self.peak if self.peak else 1.0)

    def __repr__(self) -> str:
        return (f"Bounds(lower={self.lower}, safe={self.safe}, peak={self.peak}, "
                f"external={self.external}, live={self.live})")


def budget_bytes(budget: Any) -> int:
    """`budget` as a whole number of bytes >= 0; BudgetError naming the value for a
    negative, fractional, NaN or infinite one, or one that is not a number."""
    ok = isinstance(budget, numbers.Real) and not isinstance(budget, bool)
    if ok and math.isfinite(budget) and budget >= 0 and int(budget) == budget:
        return int(budget)
    raise BudgetError(f"a DTR budget is a whole number of bytes >= 0, not {budget!r}")


def budget_ratio(ratio: Any) -> float:
    """`ratio` as a finite number > 0; BudgetError naming the value otherwise."""
    ok = isinstance(ratio, numbers.Real) and not isinstance(ratio, bool)
    if ok and math.isfinite(ratio) and ratio > 0:
        return float(ratio)
    raise BudgetError(f"a DTR budget ratio is a finite number > 0, not {ratio!r}")


#: Reliefs (the runtime letting go of the inputs that waiting ops have pinned) allowed
#: during one op's call, beyond the program's number of calls. Where the free bytes are
#: scattered and may not be compacted, two waiting ops can take each other's bytes for
#: ever; a run that moves forward needs about one.
RELIEF_SLACK = 10


def stuck_error(name: str, need: int, budget: int, pinned: int, free: int, b: Bounds,
                defrag: str, cycling: bool = False) -> BudgetError:
    """The BudgetError of a run that cannot place `need` bytes (or, `cycling`, keeps
    letting go of the same inputs), saying why and at which budget it would not be."""
    where = f"DTR on {name}: " + (f"at a budget of {budget:,} B relief keeps letting go of "
                                  "the inputs that waiting ops need, without moving forward"
                                  if cycling else
                                  f"cannot place {need:,} B in a budget of {budget:,} B")
    state = f"{pinned:,} B are pinned or cannot be evicted and {free:,} B are free"
    if budget < b.safe:
        return BudgetError(f"{where}: {state}. At {b.safe:,} B it never gets stuck",
                           minimum=b.safe)
    why = (f", but scattered, and defrag={defrag!r} does not compact them (with "
           f"'last-resort' or 'first' it never gets stuck at {b.safe:,} B)"
           if defrag == "never" else "")
    return BudgetError(f"{where}, at or above the safe {b.safe:,} B: {state}{why}; without "
                       f"rematerialisation it needs {b.peak:,} B", minimum=b.peak)


def check_budget(program: ProgramData, budget: int) -> None:
    """BudgetError unless `budget` is at least the program's `Bounds.lower`."""
    b = program.bounds()
    if budget < b.lower:
        raise BudgetError(
            f"budget {budget:,} B is below the smallest budget that could work for "
            f"{program.name}: {b.lower:,} B (the largest op footprint, inputs + "
            f"outputs + workspace resident at once, plus bytes that can never be "
            f"evicted)", minimum=b.lower)


def program_bounds(p: ProgramData) -> tuple[Bounds, list[list[int]], list[int]]:
    """The `Bounds` of `p`, the order in which each op's inputs are made resident, and the
    order of the final "get" steps (both as `safe` assumes them; the runtime follows them).

    safe: R(op) = max(footprint(op), max_j (bytes of inputs before j + R(producer of
    input j))), inputs sorted by R - size, largest first (as Sethi-Ullman order
    registers): the memory a replay needs when everything unpinned may be evicted.
    """
    lower, safe, order, replay_need = _op_bounds(p)
    gets, lower, safe = _get_bounds(p, replay_need, lower, safe)
    capacity = sum(p.tensors[o].size for s, k in p.steps if s == "call"
                   for o in p.ops[k].outputs if p.arena[o])
    capacity += sum(p.ops[k].workspace for s, k in p.steps if s == "call")
    peak = no_evict_peak(p, max(capacity, lower))
    return Bounds(lower, max(safe, lower), peak, p.external_bytes, live_peak(p)), order, gets


def _pinned_total(p: ProgramData) -> int:
    """Arena bytes that can never be evicted (outputs of stateful ops, a trace's constants)."""
    return sum(t.size for k, t in enumerate(p.tensors) if p.arena[k] and not p.replayable[k])


def _pinned_before(p: ProgramData) -> list[int]:
    """Per op: the never-evicted arena bytes made by it and the ops before it (a trace's
    constant is there only from its own line)."""
    out, total = [], 0
    for op in p.ops:
        total += sum(p.tensors[o].size for o in op.outputs if p.arena[o] and
                     not p.replayable[o])
        out.append(total)
    return out


def _op_bounds(p: ProgramData) -> tuple[int, int, list[list[int]], list[int]]:
    """lower and safe over the ops, each op's input order, and R per op."""
    arena, size, replayable = p.arena, [t.size for t in p.tensors], p.replayable
    pinned_before = _pinned_before(p)
    R = [0] * len(p.ops)
    lower = safe = 0
    order = []
    for k, op in enumerate(p.ops):
        ext = [i for i in op.inputs if not arena[i]]
        ins = [i for i in op.inputs if arena[i]]

        def r(i: int) -> int:
            return R[p.tensors[i].producer] if replayable[i] else 0
        ins.sort(key=lambda i: size[i] - r(i))
        order.append(ext + ins)
        outs = [o for o in op.outputs if arena[o]]
        fp = sum(size[i] for i in ins) + sum(size[o] for o in outs) + op.workspace
        need, prefix = fp, 0
        for i in ins:
            need = max(need, prefix + r(i))
            prefix += size[i]
        R[k] = need
        own_pinned = sum(size[t] for t in ins + outs if not replayable[t])
        pinned = pinned_before[k]
        lower = max(lower, fp + pinned - own_pinned)
        safe = max(safe, need + pinned - own_pinned)
    return lower, safe, order, R


def _get_bounds(p: ProgramData, R: list[int], lower: int, safe: int) -> tuple[list[int], int, int]:
    """"get" steps (a trace's outputs) are made resident one after the other and stay
    pinned: they are fetched in the same order as an op's inputs."""
    size, pinned_total = [t.size for t in p.tensors], _pinned_total(p)
    gets = [t for s, t in p.steps if s == "get" and p.arena[t]]

    def rg(t: int) -> int:
        return R[p.tensors[t].producer] if p.replayable[t] else 0
    gets.sort(key=lambda t: size[t] - rg(t))
    prefix = 0
    for t in gets:
        safe = max(safe, prefix + rg(t) + pinned_total)
        prefix += size[t]
    return gets, max(lower, prefix), max(safe, prefix + pinned_total)


def live_peak(p: ProgramData) -> int:
    """The largest sum of live planned bytes plus the running op's workspace (= the
    liveness theoretical minimum of `minigraph.memory` when no op declares workspace):
    the no-rematerialisation peak with an ideal allocator, <= `peak`."""
    live = best = 0
    alive = [False] * len(p.tensors)
    for s, x in p.steps:
        if s == "call":
            op = p.ops[x]
            for o in op.outputs:
                if p.arena[o] and not alive[o]:
                    alive[o] = True
                    live += p.tensors[o].size
            best = max(best, live + op.workspace)
        elif s == "release" and alive[x]:
            alive[x] = False
            live -= p.tensors[x].size
    return best


def no_evict_peak(p: ProgramData, capacity: int) -> int:
    """The highest address the runtime's first-fit arena reaches in a run that never
    evicts (`capacity` large enough): the runtime's own allocations, in its order.

    A call places its outputs, then its workspace, which it gives back after the kernel.
    A release gives the bytes back at once (a free, or a fake delete that keeps the
    metadata for a recomputation) unless the tensor cannot be recomputed and something
    computed from it still could be; such a tensor goes when the last of those is freed
    for good (the runtime's `hold` counts). A run with exactly this budget makes the same
    allocations at the same offsets, so it never evicts either."""
    arena = FirstFitArena(capacity)
    n = len(p.tensors)
    state = [EXT if t.external else NEW for t in p.tensors]
    addr, hold, dead = [-1] * n, [0] * n, [False] * n
    for kind, x in p.steps:
        if kind == "call":
            _no_evict_call(p, x, arena, state, addr, hold, dead)
        elif kind == "release" and state[x] != EXT:
            dead[x] = True
            if state[x] == RES and hold[x] and p.replayable[x]:
                arena.free(addr[x])                # fake delete: the metadata stays
                state[x] = EVI
            elif state[x] in (RES, EVI) and hold[x] == 0:
                _free(p, x, arena, state, addr, hold, dead)
    return arena.high_water


def _no_evict_call(p: ProgramData, k: int, arena: FirstFitArena, state: list[int],
                   addr: list[int], hold: list[int], dead: list[bool]) -> None:
    op = p.ops[k]
    placed = []
    for o in op.outputs:
        if p.arena[o] and state[o] != RES:
            addr[o] = arena.alloc(p.tensors[o].size, o)
            placed.append((o, state[o]))
    if op.workspace:
        arena.free(arena.alloc(op.workspace, ("ws", k)))
    for o, st in placed:
        if st == FREED:                            # written, not wanted
            arena.free(addr[o])
            continue
        state[o] = RES
        if st == NEW and p.replayable[o]:
            for i in op.inputs:
                hold[i] += 1
        elif st == EVI and dead[o] and hold[o] == 0:
            _free(p, o, arena, state, addr, hold, dead)


def _free(p: ProgramData, t: int, arena: FirstFitArena, state: list[int], addr: list[int],
          hold: list[int], dead: list[bool]) -> None:
    """Free t for good, then every dead tensor it was the last to hold (the runtime's
    `_free`)."""
    work = [t]
    while work:
        x = work.pop()
        if state[x] not in (RES, EVI):
            continue
        if state[x] == RES:
            arena.free(addr[x])
        state[x] = FREED
        if p.replayable[x]:
            for i in p.ops[p.tensors[x].producer].inputs:
                hold[i] -= 1
                if hold[i] == 0 and dead[i] and state[i] in (RES, EVI):
                    work.append(i)
