"""Swap beside recomputation, in one accounting: the rows of lesson 07d and
`benchmarks/swap.py`.

- `compare(graph, fraction)`: at a device budget of `fraction` x the no-swap arena, the
  static plan alone, swap (`plan_swap`), DTR (`simulate`, the same working memory, op
  costs in the same seconds) and DTR+swap (DTR choosing per victim between dropping and
  swapping it, the cheaper, Capuchin's choice [Peng 2020]): device working memory, host
  bytes, bytes moved each way and the predicted step time of each.
- `largest_batch(model, memory)`: the largest batch each technique fits in a fixed device
  memory, as Capuchin reports it [Peng 2020].
- `mlp_chain(widths, batch)`: a stack of dense layers as a `Chain`, for the dynamic program
  that combines swap and recomputation [Beaumont 2021] (`chain_rows`).
Device memory here is working memory (arena + workspace, `memory/footprint.py`); inputs,
parameters and outputs are outside and the same for every technique.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import BudgetError, SwapError, ThrashError
from ..graph import Graph
from ..memory.api import MemoryOptions, plan_memory
from ..memory.planners.engine.swap_remat import KINDS, Chain, best_schedule, evaluate
from ..memory.swap import Machine, op_seconds
from ..memory.swap_plan import lowest_swap_plan, machine_of, plan_swap
from ..runtime.dtr import simulate


@dataclass(frozen=True)
class Row:
    """One technique at one budget: `device` working bytes (None: does not fit), `host`
    bytes, `moved` bytes each way (DTR+swap: (out, in), a tensor swapped out need not come
    back), `seconds` predicted, `baseline` seconds without it."""
    technique: str
    budget: int
    device: int | None
    host: int
    moved: int | tuple[int, int]
    seconds: float | None
    baseline: float

    @property
    def overhead(self) -> float | None:
        return None if self.seconds is None else self.seconds / self.baseline - 1.0


def compare(graph: Graph, fraction: float, machine: Machine | str = "pcie4",
            planner: str = "greedy-size") -> list[Row]:
    """Static, swap, DTR and DTR+swap at a working budget of `fraction` x the static plan's
    working memory (arena + its largest workspace). DTR's costs are the ops' seconds, so a
    second of copying costs 1 (`cost_rate=1.0`); DTR+swap is `evict="cheaper"` over
    `machine`, its copies on the one stream, each charged in full (an upper bound)."""
    machine = machine_of(machine)
    static = plan_memory(graph, MemoryOptions(planner=planner))
    sched = static.plan.schedule
    secs = op_seconds(graph, sched, machine)
    base = sum(secs)
    budget = int(fraction * static.working_bytes)
    rows = [Row("static", budget, static.working_bytes if static.working_bytes <= budget
                else None, 0, 0, base if static.working_bytes <= budget else None, base)]
    try:
        s = plan_swap(graph, budget - static.workspace_bytes, MemoryOptions(planner=planner),
                      machine=machine)
        rows.append(Row("swap", budget, s.working_bytes, s.host_bytes, s.moved,
                        s.timing.seconds, base))
    except SwapError:
        rows.append(Row("swap", budget, None, 0, 0, None, base))
    costs = dict(zip(sched, secs))
    try:
        t = simulate(graph, budget, costs=costs, schedule=sched)
        rows.append(Row("DTR", budget, t.max_used, 0, 0, t.total_cost, base))
    except (BudgetError, ThrashError):
        rows.append(Row("DTR", budget, None, 0, 0, None, base))
    try:
        t = simulate(graph, budget, costs=costs, schedule=sched, evict="cheaper",
                     machine=machine, cost_rate=1.0)
        rows.append(Row("DTR+swap", budget, t.max_used, t.host_peak, (t.bytes_out, t.bytes_in),
                        t.total_cost, base))
    except (BudgetError, ThrashError):
        rows.append(Row("DTR+swap", budget, None, 0, 0, None, base))
    return rows


def fits(technique: str, graph: Graph, memory: int, machine: Machine | str = "pcie4") -> bool:
    """Whether `technique` ("static", "swap", "DTR", "DTR+swap") runs `graph` in `memory`
    working bytes (DTR with its FLOP costs; DTR+swap choosing the cheaper per victim over
    `machine`); SwapError for another name."""
    static = plan_memory(graph, MemoryOptions(planner="greedy-size"))
    if technique == "static":
        return static.working_bytes <= memory
    if technique == "swap":
        low = lowest_swap_plan(graph, MemoryOptions(planner="greedy-size"), machine=machine)
        return low.working_bytes <= memory
    if technique not in ("DTR", "DTR+swap"):
        raise SwapError(f"technique must be static, swap, DTR or DTR+swap, not {technique!r}")
    swap = {"evict": "cheaper", "machine": machine} if technique == "DTR+swap" else {}
    try:
        simulate(graph, memory, schedule=static.plan.schedule, **swap)
        return True
    except (BudgetError, ThrashError):
        return False


def largest_batch(build: Callable[[int], Graph], memory: int, technique: str,
                  batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
                  machine: Machine | str = "pcie4") -> int:
    """The largest of `batches` whose graph `build(batch)` fits `memory` with `technique`
    (0: none fits). Batches are tried in order; the first that does not fit ends the search."""
    best = 0
    for b in batches:
        if not fits(technique, build(b), memory, machine):
            break
        best = b
    return best


def mlp_chain(widths: Sequence[int], batch: int, machine: Machine | str = "pcie4",
              itemsize: int = 4) -> Chain:
    """A stack of dense layers (`widths[0]` in, each next width out) as a `Chain`: a[i] of
    batch x widths[i] values, forward 2 x batch x in x out FLOP at the machine's rate plus a
    launch, backward twice the forward (two products)."""
    machine = machine_of(machine)
    sizes = (0, *(batch * w * itemsize for w in widths[1:]))
    fw = tuple(machine.launch + 2 * batch * a * b / machine.compute
               for a, b in zip(widths, widths[1:]))
    return Chain(sizes, fw, tuple(2 * t for t in fw))


def chain_rows(chain: Chain, fraction: float, machine: Machine | str = "pcie4"
               ) -> dict[str, tuple[int, float] | None]:
    """At `fraction` x the chain's peak with everything kept: each kind's (peak, overhead)
    from the dynamic program ("both", "swap", "recompute"), None where nothing fits."""
    machine = machine_of(machine)
    top, _ = evaluate(chain, "K" * (chain.n - 1), machine)
    budget = int(fraction * top)
    out: dict[str, tuple[int, float] | None] = {}
    for allow in KINDS:
        try:
            p = best_schedule(chain, budget, machine, allow)
            out[allow] = (p.peak, p.overhead)
        except SwapError:
            out[allow] = None
    return out


def largest_chain_batch(widths: Sequence[int], memory: int, allow: str,
                        batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
                        machine: Machine | str = "pcie4") -> int:
    """The largest of `batches` at which the dense stack `widths` fits `memory` bytes of
    activations with the kinds `allow` names ("keep" for keeping everything)."""
    best = 0
    for b in batches:
        chain = mlp_chain(widths, b, machine)
        try:
            if allow == "keep":
                if evaluate(chain, "K" * (chain.n - 1), machine_of(machine))[0] > memory:
                    break
            else:
                best_schedule(chain, memory, machine_of(machine), allow)
        except SwapError:
            break
        best = b
    return best
