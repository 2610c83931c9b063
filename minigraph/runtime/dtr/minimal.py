"""The DTR loop in one file, the textbook version [Kirisame 2021]: read it top to bottom.

Run a program op by op under a byte budget. To place an output, *evict* resident tensors,
the lowest score first; when an op needs an evicted input, *recompute* it by re-running
its producer, whose own evicted inputs are recomputed first (recursion). Memory is an
*ideal allocator*: the sum of the resident bytes, no addresses, no fragmentation. What it
runs and counts comes from program.py (the `Program`), bounds.py (the budget check),
states.py (a tensor's five states) and neighbourhood.py (MegEngine's evicted classes).

    run = run_minimal(step_graph, ratio=0.5, score="dtr")   # or a Program, budget= bytes

The engine room, runtime.py with its `DTROptions`, adds a first-fit arena (and MegEngine's
defragmentation), Coop's window and recomputable in-place [Zhang 2023], more scores, rules
against thrashing, an explicit stack for long chains; tests/test_dtr_minimal.py holds the
two equal: with those switched off, the same evictions at the same overhead.
"""

from __future__ import annotations

from typing import Any

from ...errors import BudgetError
from .bounds import check_budget
from .heuristics import DTROptionError
from .neighbourhood import DSU
from .program import Program, as_program, resolve_budget
from .states import EVI, EXT, FREED, NEW, RES


def run_minimal(source: Any, budget: int | None = None, *, ratio: float | None = None,
                score: Any = "dtr") -> MinimalDTR:
    """Run a graph or `Program` under `budget` bytes of arena (or `ratio`, as `simulate`
    reads them) with `score` "dtr" (h_DTR), "megengine" (eval_func) or `fn(dtr, t)`.
    Returns the finished run: `evicted` (names, in order), `replays`, `overhead`, `peak`."""
    program = as_program(source)
    return MinimalDTR(program, resolve_budget(program, budget, ratio), score).run()


class MinimalDTR:
    """One run and its state. Every list is indexed by tensor, as in the `Program`."""

    def __init__(self, program: Program, budget: int, score: Any = "dtr"):
        p = self.p = program
        check_budget(p, budget)          # nothing works below the largest op's footprint
        if isinstance(score, str) and score not in SCORES:
            raise DTROptionError(f"unknown score {score!r}; minimal.py has {', '.join(SCORES)}")
        self.budget, self.score = budget, SCORES.get(score, score)
        n = len(p.tensors)
        self.state = [NEW if p.arena[t] else EXT for t in range(n)]    # states.py
        self.used = self.peak = 0        # bytes resident: the ideal allocator
        self.resident: dict[int, None] = {}    # the resident tensors that may be evicted
        self.pins = [0] * n              # > 0 while a running op needs it
        self.last = [0.0] * n            # the clock at its last read or write
        self.dead = [False] * n          # its last reader has run
        self.hold = [0] * n              # tensors computed from it that may be recomputed
        self.recomputes = [0] * n
        self.now, self.replays, self.extra_cost = 0.0, 0, 0.0
        self.evicted: list[str] = []         # names, in the order they were evicted
        self.classes = DSU(n, p.cost_t)  # MegEngine's classes of evicted neighbours

    def run(self) -> MinimalDTR:
        for kind, x in self.p.steps:
            if kind == "call":
                self.compute(x)
            elif kind == "release":
                self.release(x)
        for t in self.p.get_order:       # a trace's outputs: fetched at the end, kept
            self.fetch(t)
        return self

    @property
    def overhead(self) -> float:
        """Total compute / base compute (1.0: nothing was recomputed)."""
        base = self.p.base_cost
        return (base + self.extra_cost) / base if base else 1.0

    # Running an op: its inputs resident (recomputing them), room for its outputs ---------
    def fetch(self, i: int) -> None:
        """Make input i resident, recomputing it if it was evicted, and pin it."""
        if self.state[i] == EVI:
            self.compute(self.p.tensors[i].producer, wanted=i)
        if self.p.arena[i]:
            self.pins[i] += 1
        self.last[i] = self.now

    def compute(self, k: int, wanted: int | None = None) -> None:
        """Run op k: the first time, or again to get back `wanted`, an evicted output."""
        p, op = self.p, self.p.ops[k]
        for i in p.order[k]:             # in the order bounds.py's `safe` budget assumes
            self.fetch(i)                # pinned: nothing evicts it until op k has run
        before = []                      # each output's state as the op writes it
        for o in op.outputs:             # (placing one may evict a resident sibling)
            before.append(self.state[o])
            if before[-1] != EXT:
                if before[-1] != RES:    # an op writes every output, wanted or not
                    self.place(p.tensors[o].size)
                self.pins[o] += 1
        self.place(op.workspace)
        self.now += op.cost              # the clock that staleness is measured on
        if wanted is not None:
            self.replays += 1
            self.extra_cost += op.cost
        self.used -= op.workspace
        for o, st in zip(op.outputs, before):
            if st != EXT:
                self.written(k, o, st, wanted)
        for i in p.order[k]:             # unpinned: a dead one nothing holds is forgotten
            if p.arena[i]:
                self.pins[i] -= 1
                if not self.pins[i] and self.dead[i] and self.state[i] == RES and \
                        not self.hold[i]:
                    self.free(i)

    def place(self, nbytes: int) -> None:
        while self.used + nbytes > self.budget:      # make room: evict the lowest score
            candidates = [t for t in self.resident if not self.pins[t]]
            if not candidates:
                raise BudgetError(f"DTR on {self.p.name}: no room for {nbytes:,} B in "
                                  f"{self.budget:,} B, nothing left to evict",
                                  minimum=self.p.bounds().safe)
            self.evict(min(candidates, key=lambda t: self.score(self, t)))
        self.used += nbytes
        self.peak = max(self.peak, self.used)

    def written(self, k: int, o: int, before: int, wanted: int | None) -> None:
        """Op k wrote its output o, whose state was `before`."""
        p = self.p
        self.pins[o] -= 1
        self.last[o] = self.now
        if before == FREED:              # nothing needs it: its bytes go back at once
            self.used -= p.tensors[o].size
        elif before == NEW:
            self.state[o] = RES
            if p.replayable[o]:          # a stateful op's output is never evicted
                self.resident[o] = None
                for i in p.ops[k].inputs:
                    self.hold[i] += 1    # recomputing o may need i
        elif before == EVI:              # recomputed
            self.state[o] = RES
            self.resident[o] = None
            self.recomputes[o] += 1
            self.classes.remove(o)
            if self.dead[o] and o != wanted and not self.pins[o] and not self.hold[o]:
                self.free(o)

    # Evicting, releasing, forgetting ----------------------------------------------------
    def evict(self, t: int, fake: bool = False) -> None:
        """Give t's bytes back and keep its record: it can be recomputed."""
        self.used -= self.p.tensors[t].size
        self.state[t] = EVI
        del self.resident[t]
        self.classes.add(t, neighbours(self.p, t))
        if not fake:
            self.evicted.append(self.p.tensors[t].name)

    def release(self, t: int) -> None:
        """t's last reader ran: forgotten at once if nothing computed from it may need it,
        else a *fake delete* [MegEngine 2021], evicted with its record kept."""
        if self.state[t] == EXT:
            return
        self.dead[t] = True
        if self.state[t] == RES and self.pins[t] == 0:
            if self.hold[t] == 0:
                self.free(t)
            elif self.p.replayable[t]:
                self.evict(t, fake=True)
        elif self.state[t] == EVI and self.hold[t] == 0:
            self.free(t)

    def free(self, t: int) -> None:
        """Forget t for good, then every dead input of it that nothing holds any more."""
        p, work = self.p, [t]
        while work:
            x = work.pop()
            if self.state[x] == RES and not self.pins[x]:
                self.used -= p.tensors[x].size
                self.resident.pop(x, None)
            elif self.state[x] == EVI:
                self.classes.remove(x)
            else:
                continue
            self.state[x] = FREED
            if p.replayable[x]:
                for i in p.ops[p.tensors[x].producer].inputs:
                    self.hold[i] -= 1
                    if self.hold[i] == 0 and self.dead[i] and self.state[i] in (RES, EVI):
                        work.append(i)


# The scores: the lowest is evicted first (ties: the tensor resident longest) -----------
def evicted_reach(dtr: MinimalDTR, t: int, edges: list[list[int]], total: float) -> float:
    """`total` plus the cost of every evicted tensor reachable from t along `edges`
    through evicted tensors only."""
    seen, stack = {t}, [t]
    while stack:
        for y in edges[stack.pop()]:
            if y not in seen:
                seen.add(y)
                if dtr.state[y] == EVI:
                    total += dtr.p.cost_t[y]
                    stack.append(y)
    return total


def h_dtr(dtr: MinimalDTR, t: int) -> float:
    """h_DTR = (c0 + e*) / (bytes x staleness) [Kirisame 2021], e* the exact evicted
    neighbourhood: the evicted ancestors that recomputing t needs plus the evicted
    descendants that would need t (not the paper's union-find version, h_DTR-eq)."""
    p = dtr.p
    e = evicted_reach(dtr, t, p.children, evicted_reach(dtr, t, p.parents, 0.0))
    return (p.cost_t[t] + e) / (p.tensors[t].size * (dtr.now - dtr.last[t] + 1e-3))


def neighbours(p: Program, t: int) -> list[int]:
    """MegEngine's neighbours of t: its producer's inputs and t's siblings (in the arena)."""
    op = p.ops[p.tensors[t].producer]
    return [i for i in op.inputs if p.arena[i]] + \
        [s for s in op.outputs if p.arena[s] and s != t]


def eval_func(dtr: MinimalDTR, t: int, a: float = 1.0, b: float = 1.0, c: float = 1.0,
              r: float = 1.0001) -> float:
    """MegEngine 1.4's eval_func [MegEngine 2021]: (cost + 1e-3)^a r^recomputes /
    (MiB^b (staleness + 1e-3)^c). cost: for each evicted neighbour, its class's cost (at
    least its own), not t's own; no free bytes beside t here (no addresses)."""
    cost, classes = 0.0, dtr.classes
    for n in neighbours(dtr.p, t):
        if classes.node[n] >= 0:
            cost += max(classes.class_cost(n), dtr.p.cost_t[n])
    mem = dtr.p.tensors[t].size / (1024.0 * 1024.0)
    stale = dtr.now - dtr.last[t] + 1e-3
    return (cost + 1e-3) ** a * r ** dtr.recomputes[t] / (mem ** b * stale ** c)


SCORES = {"dtr": h_dtr, "megengine": eval_func}
