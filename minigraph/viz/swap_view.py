"""The widget's swap toggle: a swap plan at a device budget, its headline and its transfers.

Swap [Rhu 2016] splits a tensor's life in two (`minigraph/memory/swap.py`); `plan_swap`
packs the halves with the planner chosen in the widget, so the toggle composes with every
planner `plan_swap` takes. The budget is a fraction of the theoretical minimum without
swap (the most bytes alive at one step: no static plan of this schedule goes below it);
with no fraction asked for, the toggle starts at the lowest budget swapping reaches with
this planner (`lowest_swap_plan`), rounded up to the slider's grid.

Every number shown is the `SwapReport`'s: the arena (device peak of the planned tensors),
`host_bytes`, `moved` each way, and the copy stream's `timing` (step time against the step
without swapping, and the copies an op waited for, `timing.waits`). The timeline marks
each offload just after its tensor's last use before the gap (`Swap.after`) and each
prefetch from the step it starts (`Swap.back`) to its reader; a late copy is red.
A budget that cannot be met is a `SwapError`, shown as its one line.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ArgumentError
from ..graph import Graph
from ..memory.api import MemoryOptions
from ..memory.swap_plan import MACHINES, SwapReport, lowest_swap_plan, plan_swap
from . import plots

SWAP_STEP = 0.005          # the budget slider's grid (a fraction of the minimum)
LINKS = tuple(MACHINES)    # the link dropdown: "pcie4", "pcie5", "nvlink-c2c"
OFFLOAD_COLOR, PREFETCH_COLOR, LATE_COLOR, HOST_COLOR = "#17becf", "#9467bd", "#d62728", \
    "#8c564b"


def check_swap_budget(fraction: Any) -> float:
    """A budget fraction is a number in (0, 2] (a planner that packs worse than the
    minimum may need more than 1); else one ArgumentError naming it."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
            or not 0 < fraction <= 2:
        raise ArgumentError(f"swap_budget must be a fraction in (0, 2] of the theoretical "
                            f"minimum without swap, not {fraction!r}")
    return float(fraction)


def budget_bytes(fraction: float, minimum: int) -> int:
    """The device budget in bytes: `fraction` of `minimum` (the no-swap minimum)."""
    return round(fraction * minimum)


def lowest_fraction(graph: Graph, options: MemoryOptions, minimum: int, link: str
                    ) -> float:
    """The smallest fraction on the slider's grid at or above the lowest budget swapping
    reaches with this planner (SwapError when it reaches none)."""
    low = lowest_swap_plan(graph, options, machine=link).budget
    return math.ceil(low / max(minimum, 1) / SWAP_STEP - 1e-9) * SWAP_STEP


def swap_at(graph: Graph, options: MemoryOptions, minimum: int, fraction: float,
            link: str) -> SwapReport:
    """`plan_swap(graph, fraction x minimum, options, machine=link)`."""
    return plan_swap(graph, budget_bytes(fraction, minimum), options, machine=link)


def swap_headline(report: SwapReport, unit: str, fraction: float | None = None) -> str:
    """"swap on (pcie4, budget B = 75% of the minimum without swap): device peak X, host
    peak H, moved M each way; step T us against T0 us without swapping (+p%), k of n
    transfers hidden", every number the report's."""
    t = report.timing
    f = f" = {100 * fraction:.1f}% of the minimum without swap" if fraction else ""
    name = next((k for k, m in MACHINES.items() if m == report.machine), "link")
    late = len(report.swaps) - len(report.hidden())
    return (f"swap on ({name}, {report.options.planner}, budget "
            f"{plots.fmt_in(report.budget, unit)}{f}): device peak (arena) "
            f"{plots.fmt_in(report.arena_bytes, unit)}, host peak "
            f"{plots.fmt_in(report.host_bytes, unit)}, moved "
            f"{plots.fmt_in(report.moved, unit)} each way, {len(report.swaps)} tensors "
            f"swapped; step {t.seconds * 1e6:.1f} us against {t.baseline * 1e6:.1f} us "
            f"without swapping (+{100 * t.overhead:.1f}%), {len(report.hidden())} of "
            f"{len(report.swaps)} transfers hidden, {late} late")


def host_per_step(report: SwapReport) -> list[int]:
    """Bytes of the swapped tensors held only in host memory at each step: from the step
    after their front ends to the step before their back starts."""
    out = [0] * report.plan.liveness.steps
    for s in report.swaps:
        for k in range(s.until + 1, s.back):
            out[k] += s.bytes
    return out


def mark_transfers(ax: Any, report: SwapReport, unit: str) -> None:
    """On a timeline's axes: each offload (a down arrow after step `after`, its tensor's
    last use before the gap) and prefetch (an up arrow from step `back` to its reader),
    the late ones (`report.timing.waits`) in red, and the bytes only in host memory."""
    div = plots.UNIT_DIV[unit]
    waits = report.timing.waits if report.timing else {}
    host = host_per_step(report)
    ax.step(range(len(host)), [h / div for h in host], where="mid", color=HOST_COLOR,
            linewidth=1.4, linestyle="-.", gid="host",
            label=f"in host memory (host peak {plots.fmt_in(report.host_bytes, unit)})")
    y = ax.get_ylim()[1] * 0.97
    for kind, color, marker in (("offload", OFFLOAD_COLOR, "v"),
                                ("prefetch", PREFETCH_COLOR, "^")):
        xs = [s.after + 0.5 if kind == "offload" else s.back - 0.5 for s in report.swaps]
        ax.scatter(xs, [y] * len(xs), marker=marker, s=28, color=color, zorder=5,
                   gid=kind, label=f"{kind} ({len(xs)}; {plots.fmt_in(report.moved, unit)})")
        if kind == "prefetch":
            for s in report.swaps:       # the prefetch runs from step back to its reader
                ax.plot([s.back - 0.5, s.reader - 0.5], [y * 0.985] * 2, color=color,
                        linewidth=0.8, alpha=0.6)
    late = [s for s in report.swaps if s.tensor in waits]
    if late:
        ax.scatter([s.reader for s in late], [y * 0.94] * len(late), marker="x", s=30,
                   color=LATE_COLOR, zorder=6, gid="late",
                   label=f"late copy: an op waits ({len(late)})")
