"""`plan_swap(graph, budget)`: a static plan whose arena fits `budget`, by swapping.

The textbook (`swap.py`) chooses which tensors go to host memory and when; this module
turns that choice into a plan the one validator proves and the executor runs: the
planner of `options.planner` packs the split buffers (`swap.split`), a `SwapPlan` records
each tensor's front offset (as any `MemoryPlan`) and its back offset, and a `SwapReport`
counts device, host and moved bytes and the step time the copy stream predicts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import PlanError, SwapError
from ..graph import Graph, as_graph, fmt_bytes
from .api import MemoryOptions, MemoryReport, planning_buffers
from .buffers import arena_size, theoretical_minimum, validate_offsets
from .footprint import Footprint, outside_bytes, step_workspace, working_minimum
from .inplace import inplace_refusal
from .liveness import itemsize, liveness
from .orders import schedule
from .plan import MemoryPlan, offset_alignment
from .planners import JOINT_PLANNERS, plan_buffers
from .swap import Machine, Swap, Timing, choose_swaps, copy_stream, op_seconds, split, uses

# Host-device links, one direction, effective bytes per second (docs/references.md):
# PCIe 4.0 x16 about 25 GB/s of its 32 GB/s raw [PCI-SIG 2017], PCIe 5.0 x16 about 50 GB/s
# [PCI-SIG 2019], NVLink-C2C 450 GB/s each way (900 GB/s both) [NVIDIA 2023].
MACHINES: dict[str, Machine] = {
    "pcie4": Machine(bandwidth=25e9, latency=10e-6),
    "pcie5": Machine(bandwidth=50e9, latency=10e-6),
    "nvlink-c2c": Machine(bandwidth=450e9, latency=5e-6),
}


def machine_of(machine: Machine | str) -> Machine:
    """A `Machine`, or the name of one of `MACHINES`; SwapError names anything else."""
    if isinstance(machine, Machine):
        return machine
    if isinstance(machine, str) and machine in MACHINES:
        return MACHINES[machine]
    raise SwapError(f"unknown machine {machine!r}; known: {', '.join(MACHINES)} (or a Machine)")


@dataclass
class SwapPlan(MemoryPlan):
    """A `MemoryPlan` whose `swaps` leave the device between two uses: `offsets` hold each
    tensor's (front) offset, `back_offsets` the offset its prefetch writes to. `buffers()`
    is the split problem, which the one validator proves."""
    swaps: list[Swap] = field(default_factory=list)
    back_offsets: dict[str, int] = field(default_factory=dict)

    def buffers(self) -> list:
        return split(super().buffers(), self.swaps)

    def prove(self, graph: Graph | None) -> SwapPlan:
        """`MemoryPlan.prove` over the split buffers, after `check_swaps`."""
        self._offsets_name_planned_tensors()
        self._check_rule()
        self.check_swaps(graph)
        if graph is not None:
            self.check_itemsizes(graph)
        for a, b in self.inplace if graph is not None else ():
            why = inplace_refusal(graph, self.liveness, a, b, self.colors, self.inplace_rule)
            if why:
                raise PlanError(f"in-place {a} -> {b} is refused ({self.inplace_rule} rule): "
                                f"{why}")
        validate_offsets(self.buffers(), {**self.offsets, **{
            s.back_id: self.back_offsets.get(s.tensor) for s in self.swaps}},
            self.arena_bytes, self.alignment, self.inplace)
        return self

    def check_swaps(self, graph: Graph | None) -> None:
        """Each swap names a planned tensor with a back offset, is in no in-place pair,
        keeps its front until after step `after` and frees at least one step before
        `back`, and (with the graph) no op uses it while it is off the device."""
        ivs = self.liveness.intervals
        paired = {t for p in self.inplace for t in p}
        steps = uses(graph, self.schedule) if graph is not None else {}
        for s in self.swaps:
            iv = ivs.get(s.tensor)
            if iv is None or not iv.planned or s.tensor not in self.back_offsets:
                raise PlanError(f"swap of {s.tensor}: not a planned tensor with a back offset")
            if s.tensor in paired:
                raise PlanError(f"swap of {s.tensor}: it is in an in-place hand-over")
            if not iv.start <= s.after <= s.until < s.back - 1 < s.reader <= iv.end:
                raise PlanError(f"swap of {s.tensor}: steps after {s.after}, until {s.until}, "
                                f"back {s.back}, reader {s.reader} are not in order within "
                                f"its life [{iv.start}, {iv.end}]")
            inside = [k for k in steps.get(s.tensor, ()) if s.after < k < s.reader]
            if inside:
                raise PlanError(f"swap of {s.tensor}: step {inside[0]} uses it while it is "
                                "in host memory")

    def check_itemsizes(self, graph: Graph) -> SwapPlan:
        super().check_itemsizes(graph)
        for name, off in self.back_offsets.items():
            k = itemsize(graph.tensors[name].dtype)
            if off % k:
                raise PlanError(f"tensor {name}: back offset {off} is not a multiple of its "
                                f"itemsize {k}")
        return self


@dataclass
class SwapReport(MemoryReport):
    """A `MemoryReport` with what swapping adds: the `budget`, the `machine`, the copy
    stream's `timing`, `host_bytes` (one host buffer per swapped tensor, exact bytes),
    `moved` (bytes each way) and `no_swap_minimum` (the floor without swapping)."""
    budget: int = 0
    machine: Machine = field(default_factory=Machine)
    timing: Timing | None = None
    host_bytes: int = 0
    moved: int = 0
    no_swap_minimum: int = 0

    @property
    def swaps(self) -> list[Swap]:
        return self.plan.swaps

    @property
    def footprint(self) -> Footprint:
        return Footprint(self.arena_bytes, self.workspace_bytes, self.outside_bytes,
                         host=self.host_bytes)

    def hidden(self) -> list[str]:
        """The swapped tensors no op waited for: their copies ran under compute."""
        waited = self.timing.waits if self.timing else {}
        return [s.tensor for s in self.swaps if s.tensor not in waited]

    def summary(self) -> str:
        t = self.timing
        return (f"swap ({self.options.planner}): budget {fmt_bytes(self.budget)}, arena "
                f"{fmt_bytes(self.arena_bytes)} (without swap at least "
                f"{fmt_bytes(self.no_swap_minimum)}), {len(self.swaps)} tensors swapped, host "
                f"{fmt_bytes(self.host_bytes)}, moved {fmt_bytes(self.moved)} each way; step "
                f"{t.seconds * 1e6:.1f} us against {t.baseline * 1e6:.1f} us without swap "
                f"(+{100 * t.overhead:.1f}%), {len(self.hidden())} of {len(self.swaps)} "
                "transfers hidden")


def plan_swap(graph: Graph, budget: int, options: MemoryOptions | None = None, *,
              machine: Machine | str = "pcie4", host_limit: int | None = None,
              chooser: Any = choose_swaps) -> SwapReport:
    """Plan `graph` so that its arena fits `budget` bytes, swapping what the chooser picks
    (the textbook `choose_swaps`, or the engine room's `swap_engine.choose_swaps_fast`).

    The planner packs the split buffers; if its arena is above the budget (a planner is
    not the minimum) the chooser is asked again for the difference, up to 32 times.
    SwapError: a budget that is not a whole number >= 0 or below what swapping reaches, a
    machine with a bandwidth <= 0, swapped bytes above `host_limit`."""
    graph = as_graph(graph)
    options = options or MemoryOptions(planner="greedy-size")
    machine = machine_of(machine)
    if isinstance(budget, bool) or not hasattr(type(budget), "__index__") or budget < 0:
        raise SwapError(f"plan_swap: budget must be a whole number of bytes >= 0, not "
                        f"{budget!r}")
    if options.planner in JOINT_PLANNERS or options.safe or options.colors > 1:
        raise SwapError(f"plan_swap: planner {options.planner!r} with safe={options.safe}, "
                        f"colors={options.colors} is not supported; use a planner of PLANNERS")
    t0 = time.perf_counter()
    at = offset_alignment(graph, options.alignment)
    live = liveness(graph, schedule(graph, options.order), options.alignment)
    merged, group, pairs, colors = planning_buffers(graph, live, options)
    paired = {t for p in pairs for t in p}
    aliased = {t.alias_of for t in graph.tensors.values() if t.alias_of}
    swappable = {b.id for b in merged if b.size and b.id not in paired and b.id not in aliased}
    seconds = op_seconds(graph, live.schedule, machine)
    steps = uses(graph, live.schedule)
    target, best = budget, None
    for _ in range(32):
        try:
            swaps = chooser(merged, steps, seconds, machine, target, swappable)
        except SwapError as e:
            if best is None:        # the budget itself is below what swapping reaches
                raise
            raise SwapError(f"plan_swap: budget {budget} B is below what planner "
                            f"{options.planner} packs with swapping (at best an arena of "
                            f"{best} B)", best) from e
        _, placement = plan_buffers(split(merged, swaps), options.planner, at,
                                    **options.planner_args)
        if placement.arena_bytes <= budget:
            break
        best = min(best or placement.arena_bytes, placement.arena_bytes)
        target -= max(placement.arena_bytes - budget, at)
    else:
        raise SwapError(f"plan_swap: budget {budget} B is below what planner "
                        f"{options.planner} packs with swapping (at best an arena of {best} B "
                        "after 32 tries)", best)
    host = sum(graph.tensors[s.tensor].nbytes for s in swaps)
    if host_limit is not None and host > host_limit:
        raise SwapError(f"plan_swap: host memory too small: the swaps need {host} B, "
                        f"host_limit is {host_limit} B")
    offsets = {name: placement.offsets[gid] for name, gid in group.items()}
    plan = SwapPlan(live, offsets, 0, pairs, options.planner, placement.note, colors, graph,
                    options.inplace_rule, swaps=list(swaps),
                    back_offsets={s.tensor: placement.offsets[s.back_id] for s in swaps})
    plan.arena_bytes = arena_size(plan.buffers(), {**offsets, **{
        s.back_id: plan.back_offsets[s.tensor] for s in swaps}})
    plan.prove(graph)
    workspace = step_workspace(graph, live.schedule, options.alignment)
    return SwapReport(plan, options, theoretical_minimum(split(merged, swaps)),
                      live.no_reuse_bytes(), time.perf_counter() - t0, live.unplanned_bytes(),
                      max(workspace, default=0), working_minimum(split(merged, swaps), workspace),
                      outside_bytes(graph), budget=int(budget), machine=machine,
                      timing=copy_stream(seconds, swaps, machine), host_bytes=host,
                      moved=host, no_swap_minimum=theoretical_minimum(merged))


def lowest_swap_plan(graph: Graph, options: MemoryOptions | None = None, *,
                     machine: Machine | str = "pcie4", chooser: Any = choose_swaps
                     ) -> SwapReport:
    """The swap plan at the lowest budget `plan_swap` meets: asked for 0 bytes, each
    SwapError names the lowest peak or arena reached, and that is asked next (a planner
    that packs worse than the minimum may need a few rounds, each a few bytes higher)."""
    graph = as_graph(graph)
    budget = 0
    for _ in range(16):
        try:
            return plan_swap(graph, budget, options, machine=machine, chooser=chooser)
        except SwapError as e:
            if e.minimum is None:
                raise
            budget = max(e.minimum, budget + 512)
    return plan_swap(graph, budget, options, machine=machine, chooser=chooser)
