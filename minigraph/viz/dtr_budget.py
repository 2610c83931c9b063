"""DTR in the widget: one run at a budget ratio, what it came to, and the slider's range.

The slider holds a fraction of the total peak without rematerialisation (working peak +
outside, the DTR paper's ratio [Kirisame 2021]); the budget it gives is working memory
(the planned tensors and the running op's workspace in one range), the quantity DTR's bar
is drawn in, beside the static plans' arena + workspace (`minigraph/memory/footprint.py`).
It runs from the smallest ratio that could work (`low_ratio`: `Bounds.lower`, the largest
op footprint) to 100%, and starts at the smallest ratio at
which DTR finishes (`default_ratio`). A run never raises for a budget that is too small:
`run_at` records what stopped it, and the pictures draw such a run as failed, never
with a saving.

The evict control (`DTROptions.evict`, runtime/dtr/hostswap.py) says what an eviction
does: "drop" (recompute it later, DTR as in lesson 07, the default), "swap" (copy it to
host memory over the link while there is room) or "cheaper" (whichever costs less,
Capuchin's choice [Peng 2020]); such a run weighs op seconds on the link's machine
against the copies (`seconds_program`, the costs of `experiments.swap.compare`), a drop
run FLOPs. A run that swapped counts its victims apart: `swapped`
copied to host memory, `dropped` recomputed, `host_peak` the host bytes (`footprint.host`),
and keeps its trace for the timeline that marks each copy (`plots.plot_dtr_timeline`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import BudgetError, ThrashError
from ..experiments.techniques import TechniqueRow
from ..graph import Graph, fmt_bytes
from ..memory.api import MemoryReport
from ..memory.swap import op_seconds
from ..memory.swap_plan import machine_of
from ..runtime.dtr import Bounds, DTROptions, Program, program_from_graph, simulate
from ..runtime.dtr.bounds import budget_ratio
from .plots import fmt_in

BUDGET_STEP = 0.01                         # the slider's step (a ratio of the peak)

# What a DTR run at one budget came to (`DTRRun.status`).
DTR_OK, DTR_THRASHED, DTR_BELOW, DTR_STUCK = "ok", "thrashed", "below smallest budget", "stuck"


@dataclass(frozen=True)
class DTRRun:
    """DTR at one budget: `ratio` of the total peak, `budget` bytes of working memory,
    `status` ok / thrashed / below smallest budget / stuck, the compute it paid
    (`overhead`, ok only), `used` (the most working memory it held, ok only), `lower`,
    the smallest budget that could work (`Bounds.lower`), and `live`, the working minimum
    (no run that recomputes nothing holds less). `evict` is what an eviction did ("drop",
    "swap", "cheaper"); an ok run counts its evictions `swapped` to host memory and
    `dropped`, the `host_peak` bytes, and keeps its `trace` (`DTRTrace`, for the timeline)."""
    ratio: float
    budget: int
    status: str
    lower: int
    overhead: float | None = None
    error: str = ""
    used: int | None = None
    live: int = 0
    evict: str = "drop"
    swapped: int = 0
    dropped: int = 0
    host_peak: int = 0
    trace: Any = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == DTR_OK

    @property
    def label(self) -> str:
        how = "" if self.evict == "drop" else f" ({self.evict})"
        return f"DTR{how} at {self.ratio:.0%} budget"

    def _swap_words(self, size: Callable[[int], str]) -> str:
        """", 12 evictions swapped (host peak X), 3 dropped" (ok runs with evict other
        than drop; "" otherwise)."""
        if self.evict == "drop" or not self.ok:
            return ""
        return (f", {self.swapped} evictions swapped (host peak {size(self.host_peak)}), "
                f"{self.dropped} dropped")

    def describe(self, unit: str | None = None, working_minimum: int | None = None) -> str:
        """"DTR at 53% budget: 415.04 KiB working memory, compute x8.06" or what stopped
        it; byte counts in `unit` (one of `plots.UNIT_DIV`) or else `fmt_bytes`'s; set
        against `working_minimum` (default: the program's, `live`)."""
        size = (lambda n: fmt_in(n, unit)) if unit else fmt_bytes
        head = f"{self.label}: {size(self.budget)} working memory"
        wm = self.live if working_minimum is None else working_minimum
        if self.status == DTR_OK:
            where = "below" if self.budget < wm else "not below"
            return (f"{head}, compute x{self.overhead:.2f}{self._swap_words(size)}, {where} "
                    f"the working minimum {size(wm)}")
        if self.status == DTR_BELOW:
            return (f"{head}, below smallest budget {size(self.lower)} (the largest "
                    f"op footprint): not run")
        if self.status == DTR_STUCK:
            return f"{head}, stuck: what cannot be evicted left no room for an op"
        return (f"{head}, thrashed: recomputation passed the thrash limit "
                f"({DTROptions().thrash_limit:g}x the base compute), stopped")

    def technique_row(self, report: MemoryReport, minimum: int) -> TechniqueRow:
        """DTR's bar among the static ones, in working memory (its budget holds tensors
        and workspace, `shared`) against `minimum`, the working minimum; a failed run is
        drawn hatched, with no saving, by `plots.plot_comparison`; the note says what an
        ok run paid."""
        note = ""
        if self.ok:
            note = f"compute x{self.overhead:.2f}" + self._swap_words(fmt_bytes) + \
                (", below the working minimum" if self.budget < minimum else "")
        return TechniqueRow(self.label, "dtr", self.budget, report.no_reuse_bytes, 0,
                            0.0, "dynamic", note, status=self.status,
                            workspace=report.workspace_bytes, outside=report.outside_bytes,
                            working_minimum=minimum, shared=True, reached=self.used)


def run_at(program: Program, bounds: Bounds, ratio: float, evict: str = "drop",
           link: str = "pcie4") -> DTRRun:
    """DTR (simulated, the DTR paper's heuristic) at `ratio` of the total peak, each
    eviction as `evict` says; a budget below `bounds.lower` is not run, a thrashing or
    stuck run says so. With evict other than drop a swap's copies go over `link` (a name
    of `memory.swap_plan.MACHINES`) and `program`'s costs are seconds (`seconds_program`),
    so a second of copying costs 1 (`cost_rate=1.0`), as in `experiments.swap.compare`."""
    budget = bounds.arena_budget(ratio)
    if budget < bounds.lower:
        return DTRRun(ratio, max(budget, 0), DTR_BELOW, bounds.lower, live=bounds.live,
                      evict=evict)
    swap = {} if evict == "drop" else {"evict": evict, "machine": link, "cost_rate": 1.0}
    try:
        trace = simulate(program, budget=budget, heuristic="dtr", **swap)
    except ThrashError as e:
        return DTRRun(ratio, budget, DTR_THRASHED, bounds.lower, error=str(e),
                      live=bounds.live, evict=evict)
    except BudgetError as e:     # stuck: the pinned bytes left no room
        return DTRRun(ratio, budget, DTR_STUCK, bounds.lower, error=str(e), live=bounds.live,
                      evict=evict)
    return DTRRun(ratio, budget, DTR_OK, bounds.lower, trace.overhead, used=trace.max_used,
                  live=bounds.live, evict=evict, swapped=len(trace.swapped),
                  dropped=len(trace.evicted) - len(trace.swapped),
                  host_peak=trace.host_peak, trace=trace)


def seconds_program(graph: Graph, order: Sequence[str], alignment: int, link: str
                    ) -> Program:
    """The program of `graph` in `order` whose op costs are seconds on `link`'s machine
    (its FLOPs at the machine's compute plus a launch, `memory.swap.op_seconds`): the
    costs a swapping run weighs its copies against."""
    secs = op_seconds(graph, order, machine_of(link))
    return program_from_graph(graph, order, alignment, costs=dict(zip(order, secs)))


def low_ratio(bounds: Bounds) -> float:
    """The smallest ratio on the slider's grid whose budget reaches `bounds.lower`;
    below it DTR refuses to start."""
    ratio = ceil_step((bounds.lower + bounds.external) / bounds.total if bounds.total else 1.0)
    while ratio < 1.0 and bounds.arena_budget(ratio) < bounds.lower:
        ratio = round(ratio + BUDGET_STEP, 2)
    return min(ratio, 1.0)


def default_ratio(sweep: Sequence[Any], low: float, finishes: Callable[[float], bool]) -> float:
    """The slider's first value: `low` if DTR finishes there, else the smallest ratio of
    the sweep at which it finished, rounded up to the grid and run again (`finishes`) to
    be sure (DTR is not monotone in the budget); 100% if none is smaller."""
    ok = sorted({min(ceil_step(r.ratio), 1.0) for r in sweep if r.status == "ok"})
    return next((ratio for ratio in [low, *(r for r in ok if r > low)] if finishes(ratio)),
                1.0)


def check_budget_ratio(ratio: Any) -> float:
    """A DTR budget ratio as the slider holds it: a finite number in (0, 1]; BudgetError
    naming the value otherwise."""
    ratio = budget_ratio(ratio)
    if ratio > 1:
        raise BudgetError(f"a DTR budget is a fraction of the total peak, at most 1.0 "
                          f"(100%), not {ratio!r}")
    return ratio


def ceil_step(ratio: float) -> float:
    """`ratio` rounded up to the slider's grid (0.01)."""
    return round(math.ceil(ratio / BUDGET_STEP - 1e-9) * BUDGET_STEP, 2)
