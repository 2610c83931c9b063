"""Every technique on one graph, side by side: the rows behind the comparison bars of the
widget, the tour and lesson 00. One row per planner of the `PLANNERS` registry (so a new
planner is one more bar), the reference points (no reuse, in-place alone, two colours),
and DTR, the dynamic technique, at one budget (`dtr_row`) or over a sweep of budgets
(`dtr_sweep`). Each static row is `plan_memory(graph, options)`, validated; the pictures
of these rows are `minigraph.viz.plots.plot_comparison` and `plot_dtr_sweep`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import BudgetError, ThrashError
from ..graph import Graph, fmt_bytes
from ..memory.api import MemoryOptions, MemoryReport, plan_memory
from ..memory.liveness import liveness
from ..memory.orders import schedule
from ..memory.planners import PLANNERS, options_for
from ..runtime.dtr import budget_bounds, simulate
from .dtr import SweepRow, smallest_budget, sweep

# Planners that may run for seconds (a progress bar in the widget, opt-in in comparisons).
SLOW_PLANNERS = ("ilp", "anneal")

# How each registry entry is named on a bar; an entry missing here shows its own name.
LABELS = {"none": "no reuse", "refcount": "refcount (MXNet)", "ge": "GE two-level",
          "ge-max": "GE max-block", "ge-binary": "GE binary-block",
          "ge-hybrid": "GE hybrid", "bestfit": "best-fit (Chainer-Opt)",
          "greedy-size": "greedy by size", "anneal": "annealing (DSA-SA)",
          "ilp": "ILP (optimal layout)"}


def _family(name: str) -> str:
    if name == "none":
        return "baseline"
    if name == "refcount" or name.startswith("ge"):
        return "block"
    return "offset"


@dataclass
class TechniqueRow:
    """One bar: a technique's bytes against no reuse and the theoretical minimum.

    Counted as every technique is (`minigraph/memory/footprint.py`): `bytes` is the
    arena (the planned tensors), `workspace` the largest op's scratch held beside it,
    `outside` the inputs, parameters and outputs; `working` = arena + workspace, against
    `working_minimum`. A DTR row holds tensors and workspace in one budget: its `bytes`
    and `working` are both that budget (`shared`), and `reached` is the most it used."""
    label: str
    technique: str
    bytes: int
    no_reuse_bytes: int
    theoretical_minimum: int
    seconds: float = 0.0
    family: str = "block"
    note: str = ""
    options: MemoryOptions | None = None
    report: MemoryReport | None = field(default=None, repr=False)
    status: str = "ok"       # else what stopped the run ("thrashed", ...): no saving to show
    workspace: int = 0
    outside: int = 0
    working_minimum: int = 0
    shared: bool = False     # arena and workspace share one budget (DTR)
    reached: int | None = None

    @property
    def working(self) -> int:
        """Arena + workspace at worst (a shared budget: the budget itself)."""
        return self.bytes if self.shared else self.bytes + self.workspace

    @property
    def saved_percent(self) -> float:
        n = self.no_reuse_bytes
        return 100.0 * (n - self.bytes) / n if n else 0.0

    @property
    def working_saved_percent(self) -> float:
        """Working memory saved against no reuse (its arena + the same workspace)."""
        n = self.no_reuse_bytes + self.workspace
        return 100.0 * (n - self.working) / n if n else 0.0

    @property
    def ratio_to_minimum(self) -> float:
        m = self.theoretical_minimum
        return self.bytes / m if m else 1.0

    def __str__(self) -> str:
        if self.shared:
            reached = "" if self.reached is None else f", used {fmt_bytes(self.reached)}"
            return (f"{self.label:34} working {fmt_bytes(self.working):>11} (one budget for "
                    f"arena and workspace{reached}; working minimum "
                    f"{fmt_bytes(self.working_minimum)})" + (f"  {self.note}" if self.note
                                                           else ""))
        return (f"{self.label:34} {fmt_bytes(self.bytes):>12}  saved {self.saved_percent:5.1f}%"
                f"  x{self.ratio_to_minimum:.3f} of minimum  {self.seconds * 1000:7.1f} ms"
                + (f"  {self.note}" if self.note else ""))


FAMILY_ORDER = ("baseline", "in-place", "block", "colouring", "offset", "dynamic")


def technique_options(base: MemoryOptions | None = None, planners: Iterable[str] | None = None,
                      slow: bool = True, time_limit: float | None = None
                      ) -> list[tuple[str, str, str, MemoryOptions]]:
    """(label, technique, family, options) of every bar: no reuse, in-place alone, each
    registered planner under `base`'s switches, and 2-colour refcount (parallel-safe).
    `time_limit` (seconds) goes to the ILP alone."""
    base = base or MemoryOptions(inplace=True)
    names = list(planners) if planners is not None else [
        p for p in PLANNERS if p != "none" and (slow or p not in SLOW_PLANNERS)]
    out = [("no reuse", "none", "baseline",
            base.replace(planner="none", inplace=False, colors=1, planner_args={}))]
    out.append(("in-place only", "none+inplace", "in-place",
                base.replace(planner="none", inplace=base.inplace or True, colors=1,
                             planner_args={})))
    suffix = " + in-place" if base.inplace else ""
    for p in names:
        args = options_for(p, base.planner_args)     # each planner takes its own
        if p == "ilp" and time_limit is not None:
            args["time_limit"] = time_limit
        out.append((LABELS.get(p, p) + suffix, p, _family(p),
                    base.replace(planner=p, planner_args=args)))
    if "refcount" in PLANNERS and base.colors == 1 and "refcount" in names:
        out.append((f"refcount, 2 colours{suffix}", "refcount+colors", "colouring",
                    base.replace(planner="refcount", colors=2)))
    rank = {f: k for k, f in enumerate(FAMILY_ORDER)}
    return sorted(out, key=lambda row: rank.get(row[2], len(rank)))   # stable within family


Progress = Callable[[int, int, str], None]


def compare_techniques(graph: Graph, options: MemoryOptions | None = None,
                       planners: Iterable[str] | None = None, slow: bool = True,
                       time_limit: float | None = None,
                       dtr_budget: int | float | None = None,
                       progress: Progress | None = None,
                       plan: Callable[..., MemoryReport] | None = None) -> list[TechniqueRow]:
    """One row per technique, each from `mg.plan_memory(graph, options)`.

    `options` gives the shared switches (order, in-place, alignment, colours);
    `slow=False` leaves out the planners of `SLOW_PLANNERS`; `time_limit` bounds the ILP;
    `dtr_budget` (bytes of working memory, or a float <= 1: a fraction of the total peak
    without rematerialisation) adds DTR's bar (`dtr_row`); every row carries its working
    memory, the quantity a DTR bar can be compared in. `progress(i, n, label)`
    is called before each row (the widget's progress bar).
    """
    plan = plan or plan_memory
    todo = technique_options(options, planners, slow, time_limit)
    n = len(todo) + (dtr_budget is not None)
    rows: list[TechniqueRow] = []
    for i, (label, tech, family, opts) in enumerate(todo):
        if progress is not None:
            progress(i, n, label)
        rep = plan(graph, opts)
        rows.append(TechniqueRow(label, tech, rep.arena_bytes, rep.no_reuse_bytes,
                                 rep.theoretical_minimum, rep.seconds, family,
                                 rep.plan.note, opts, rep, workspace=rep.workspace_bytes,
                                 outside=rep.outside_bytes,
                                 working_minimum=rep.working_minimum))
    if dtr_budget is not None:
        if progress is not None:
            progress(len(todo), n, "DTR")
        rows.append(dtr_row(graph, dtr_budget, options,
                            min(r.working_minimum for r in rows),
                            rows[0].no_reuse_bytes, workspace=rows[0].workspace))
    if progress is not None:
        progress(n, n, "done")
    return rows


def _dtr_kw(graph: Graph, options: MemoryOptions | None) -> dict:
    """DTR runs the same schedule and alignment as the static plans it is compared with."""
    options = options or MemoryOptions()
    return {"schedule": schedule(graph, options.order), "alignment": options.alignment}


def dtr_row(graph: Graph, budget: int | float, options: MemoryOptions | None = None,
            minimum: int = 0, no_reuse_bytes: int | None = None,
            heuristic: str = "dtr", workspace: int = 0) -> TechniqueRow:
    """DTR's bar: the working memory it is given (`budget` bytes, or a float <= 1: that
    fraction of the total peak without rematerialisation, parameters and inputs included,
    as in the DTR paper), with the compute it pays in the note. Simulated mode (op costs,
    no kernels). A budget DTR cannot finish in (below the smallest that can work, or
    thrashing) gives a row whose note says so, not an exception.

    DTR's budget holds the planned tensors *and* the running op's workspace (`shared`),
    so the row is comparable with the static rows' working memory (arena + workspace),
    against `minimum`, the working minimum (`footprint.py`); `workspace` is the static
    rows' (for the no-reuse baseline of the saving). DTR has no arena of its own to set
    against the theoretical minimum: its `theoretical_minimum` is 0."""
    kw = _dtr_kw(graph, options)
    t0 = time.perf_counter()
    ratio = isinstance(budget, float) and budget <= 1
    label = f"DTR at {budget:.0%} budget" if ratio else f"DTR at {fmt_bytes(int(budget))}"
    if no_reuse_bytes is None:
        no_reuse_bytes = plan_memory(graph, options or MemoryOptions()).no_reuse_bytes
    bounds = budget_bounds(graph, **kw)
    common = dict(workspace=workspace, outside=bounds.external,
                  working_minimum=minimum or bounds.live, shared=True)
    try:
        trace = simulate(graph, ratio=budget, heuristic=heuristic, **kw) if ratio else \
            simulate(graph, budget=int(budget), heuristic=heuristic, **kw)
    except (BudgetError, ThrashError) as e:
        arena = int(budget) if not ratio else max(0, bounds.arena_budget(float(budget)))
        what = "thrashes" if isinstance(e, ThrashError) else "cannot run"
        status = "thrashed" if isinstance(e, ThrashError) else \
            "below smallest budget" if arena < bounds.lower else "stuck"
        return TechniqueRow(label, "dtr", arena, no_reuse_bytes, 0,
                            time.perf_counter() - t0, "dynamic",
                            f"{what}: {str(e)[:120]}", None, None, status, **common)
    below = trace.max_used < common["working_minimum"]
    return TechniqueRow(label, "dtr", trace.budget, no_reuse_bytes, 0,
                        time.perf_counter() - t0, "dynamic",
                        f"compute x{trace.overhead:.2f}" +
                        (", below the working minimum" if below else ""),
                        None, None, reached=trace.max_used, **common)


def dtr_sweep(graph: Graph, ratios: Sequence[float] | None = None,
              options: MemoryOptions | None = None, heuristics: Sequence[str] = ("dtr",),
              progress: Progress | None = None) -> list[Any]:
    """DTR at each budget ratio of the total peak (default: 1.0 down to its lower bound,
    8 points), one `SweepRow` each (`minigraph.experiments.dtr.sweep`); a run that thrashes
    or cannot fit is a row with that status and its message; `progress(i, n, label)`."""
    kw = _dtr_kw(graph, options)
    if ratios is None:
        b = budget_bounds(graph, **kw)
        low = (b.lower + b.external) / b.total if b.total else 1.0
        ratios = [1.0 - k * (1.0 - low) / 7 for k in range(8)]
    cb = None
    if progress is not None:
        def cb(done: int, total: int, row: Any) -> None:
            progress(done, total, f"DTR {row.heuristic} at {row.ratio:.0%}")
    try:
        return sweep(graph, list(ratios), list(heuristics), progress=cb, **kw)
    except (BudgetError, ThrashError) as e:
        status = "thrash" if isinstance(e, ThrashError) else "budget"
        return [SweepRow(graph.name, h, r, 0, "sim", status, error=str(e)[:200])
                for h in heuristics for r in ratios]


# Static plans and DTR in one counting: the floors and DTR's smallest budget.

@dataclass
class Counted:
    """One graph in the one counting (`minigraph/memory/footprint.py`), all bytes of one
    schedule and alignment: the theoretical minimum (arena) and the working minimum (arena
    + the running op's workspace), both with in-place; the best static plan's arena and
    working memory (best-fit + in-place: arena + the largest workspace beside it); the
    bytes outside; DTR's smallest budget that finishes (`smallest_budget`), the working
    memory it used there and the compute it paid. `below` says whether DTR went under
    the working minimum, which only recomputation can do."""
    name: str
    nodes: int
    theoretical_minimum: int
    working_minimum: int
    static_arena: int
    static_working: int
    outside: int
    dtr_lower: int
    dtr_budget: int
    dtr_used: int | None
    dtr_overhead: float | None

    @property
    def below(self) -> bool:
        return self.dtr_used is not None and self.dtr_budget < self.working_minimum


def same_counting(graph: Graph, name: str | None = None, alignment: int = 512,
                  points: int = 40) -> Counted:
    """Static plans and DTR on `graph` (program order), counted the same way: `Counted`."""
    rep = plan_memory(graph, MemoryOptions(inplace=True, planner="bestfit",
                                           alignment=alignment))
    kw = {"schedule": rep.plan.schedule, "alignment": alignment}
    budget, trace = smallest_budget(graph, points, timeline=False, **kw)
    return Counted(name or graph.name, len(graph.nodes), rep.theoretical_minimum,
                   rep.working_minimum, rep.arena_bytes, rep.working_bytes,
                   rep.outside_bytes, budget_bounds(graph, **kw).lower, budget,
                   None if trace is None else trace.max_used,
                   None if trace is None else trace.overhead)


# The tour's table: every technique switched on in turn, each planner with in-place.

@dataclass
class Row:
    """One line of the memory table (`report` is None for a skipped or failed planner)."""
    label: str
    options: MemoryOptions
    report: Any = None
    note: str = ""


def technique_rows(graph: Graph, time_limit: float = 0.5, ilp_max_buffers: int = 60,
                   anneal_max_buffers: int = 2000, alignment: int = 512,
                   progress: Progress | None = None) -> list[Row]:
    """Plan `graph` with each technique in turn (each via `plan_memory`, each validated).
    The searching planners get `time_limit` seconds; the ILP is skipped above
    `ilp_max_buffers` buffers, annealing above `anneal_max_buffers`.
    `progress(i, n, label)` is called before each row (the tour's progress bar)."""
    base = MemoryOptions(alignment=alignment)
    rows = [
        Row("no reuse", base),
        Row("in-place alone", base.replace(inplace=True)),
        Row("refcount (MXNet)", base.replace(planner="refcount")),
        Row("refcount + in-place", base.replace(planner="refcount", inplace=True)),
        Row("refcount + in-place, 2 colours", base.replace(planner="refcount", inplace=True,
                                                           colors=2)),
    ]
    for name in sorted(PLANNERS):
        if name in ("none", "refcount"):
            continue
        rows.append(Row(f"{name} + in-place", base.replace(
            planner=name, inplace=True,
            planner_args=options_for(name, {"time_limit": time_limit, "seed": 0}))))
    n_buffers = len(liveness(graph, alignment=alignment).planned())
    for i, row in enumerate(rows):
        if progress is not None:
            progress(i, len(rows), row.label)
        limit = {"ilp": ilp_max_buffers, "anneal": anneal_max_buffers}.get(
            row.options.planner)
        if limit is not None and n_buffers > limit:
            row.note = f"skipped: {n_buffers} buffers > {limit}"
            continue
        try:
            row.report = plan_memory(graph, row.options)
        except Exception as e:  # a planner that fails is reported, not fatal
            row.note = f"failed: {type(e).__name__}: {e}"     # whole: the tour wraps it
    return rows
