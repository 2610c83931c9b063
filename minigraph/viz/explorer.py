"""The widget without the widget: controls in, plan, rows, headline and figures out.

`MemoryExplorer` (no ipywidgets, tested without a browser): from a `WidgetState` (the
value of every control of `minigraph.viz.widget`) it builds the graph, plans it with
`mg.plan_memory`, compares every technique (`techniques.compare_techniques`), optionally
runs DTR [Kirisame 2021], and writes the headline "peak X -> Y, saved Z% (theoretical
minimum W)". Same options, same numbers as a script.

One view, one unit (`view_unit`: B, KiB, MiB or GiB, powers of two, picked by the
largest planned number shown): the headline and every picture print their byte counts
in it, so one number reads the same everywhere.

One view, one theoretical minimum (`view_minimum`): the most bytes alive at one step of
this schedule with in-place outputs sharing their input's bytes, at this alignment. It is
the lowest of the minimums of the rows compared (the no-reuse row, without in-place, and
a two-colour row, whose colours forbid some in-place pairs, have higher ones), so no
static plan in the view goes below it; the headline, the timeline, the layout and the bars
all get this one number (`minimum=`).

With DTR on, the bars compare working memory (`minigraph/memory/footprint.py`): a static
plan's arena plus the workspace beside it, DTR's budget (which holds both), against the
working minimum (the lowest of the static rows'); only a DTR run that recomputes goes
below it. The headline gives both counts, each named.

DTR's budget slider and its runs are `dtr_budget`'s: the slider starts at the smallest
budget of the model shown at which DTR finishes; a run that did not finish is drawn as
such (a hatched bar labelled "thrashed", "stuck" or "below smallest budget"), never with
a saving. DTR's evict control (`dtr_evict`: "drop", "swap", "cheaper"; runtime/dtr/
hostswap.py) says what an eviction does, a swap's copies over the link chosen; with
evict other than drop the headline and DTR's bar count the evictions swapped apart from
those dropped, with the host peak, and DTR's picture adds the run's timeline with each
copy out and back at its clock (`plots.plot_dtr_timeline`). With drop it is as before.

The swap toggle and its budget and link are `swap_view`'s: with swap on, `plan_swap`
packs the split intervals with the chosen planner at the budget asked for; the headline
adds the swap report's device peak, host peak, bytes moved and predicted step time, the
timeline marks the transfers and the layout draws each swapped tensor's two halves. A
budget swapping cannot meet is its SwapError's one line in the view's messages.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..errors import ArgumentError, ArgumentTypeError, SwapError, did_you_mean
from ..experiments import techniques
from ..graph import Graph
from ..memory.api import MemoryOptions, MemoryReport, chosen, plan_memory
from ..memory.orders import ORDERS, schedule
from ..memory.planners import PLANNERS
from ..memory.swap_plan import SwapReport
from ..models import MODELS, get_model
from ..runtime.dtr import Bounds, Program, program_from_graph
from ..runtime.dtr.options import EVICT_MODES
from . import plots, swap_view
from .dtr_budget import (
    DTRRun,
    check_budget_ratio,
    default_ratio,
    low_ratio,
    run_at,
    seconds_program,
)

CUSTOM = "(your graph)"          # the model dropdown's entry for a graph passed in
BATCHES = (1, 2, 4, 8, 16, 32, 64)
ALIGNMENTS = (1, 64, 256, 512, 4096)
COLOR_BY = ("kind", "block", "buffer")     # how plot_layout colours the rectangles
# The in-place control: off, nnvm's last-reader rule, the strict only-reader rule
INPLACE = (("off", False), ("last reader", True), ("strict", "strict"))


def _models() -> Mapping[str, Callable[..., Any]]:
    """The model zoo's registry (a function, so a test can offer another)."""
    return MODELS


@dataclass(frozen=True)
class WidgetState:
    """The value of every control. `dtr_budget` is a fraction of DTR's total
    no-rematerialisation peak (the DTR paper's ratio [Kirisame 2021]); None means the
    model's default (`MemoryExplorer.dtr_default`). `slow` also compares the planners of
    `techniques.SLOW_PLANNERS` (ILP, annealing); `time_limit` (seconds) bounds the ILP;
    `color_by` is the layout's colouring ("kind", "block" or "buffer"); `inplace` is
    False, True (the op is the input's last reader, nnvm's rule; "last-reader" too) or
    "strict" (its only reader, as in MXNet's note [Chen 2016] and GE [Huawei GE]).
    `swap` plans with swapping [Rhu 2016] at `swap_budget`, a fraction of the theoretical
    minimum without swap (None: the lowest swapping reaches), over `link` (a name of
    `memory.swap_plan.MACHINES`). `dtr_evict` is what DTR does with a victim ("drop",
    "swap" or "cheaper", `DTROptions.evict`), a swap's copies over `link` too."""
    model: str = CUSTOM
    batch: int = 8
    # The widget starts with refcount and in-place on (what lesson 03 shows); every other
    # field is the one set of defaults, MemoryOptions()'s, and the caption says which differ.
    order: str = MemoryOptions().order
    inplace: bool | str = True
    planner: str = "refcount"
    colors: int = MemoryOptions().colors
    alignment: int = MemoryOptions().alignment
    color_by: str = "kind"
    dtr: bool = False
    dtr_budget: float | None = None
    dtr_evict: str = "drop"
    slow: bool = False
    time_limit: float = 5.0
    swap: bool = False
    swap_budget: float | None = None
    link: str = "pcie4"

    def __post_init__(self) -> None:       # "last-reader" -> True; a bad rule: PlanError
        object.__setattr__(self, "inplace", MemoryOptions(inplace=self.inplace).inplace)

    def replace(self, **kw: Any) -> WidgetState:
        unknown = set(kw) - set(asdict(self))
        if unknown:
            raise TypeError(f"unknown control {sorted(unknown)[0]!r}; controls: "
                            f"{', '.join(asdict(self))}")
        return replace(self, **kw)

    def options(self) -> MemoryOptions:
        """The `MemoryOptions` these controls stand for (what `mg.plan_memory` gets)."""
        args = {"time_limit": self.time_limit} if self.planner == "ilp" else {}
        return MemoryOptions(inplace=self.inplace, planner=self.planner, colors=self.colors,
                             order=self.order, alignment=self.alignment, planner_args=args)

    def describe(self, graph: Graph | None = None) -> str:
        """What the view shows, in one line: "resnet50, batch 8: 412 nodes, order ..."."""
        what = (f"{self.model}, batch {self.batch}" if self.model != CUSTOM else
                f"{getattr(graph, 'name', '') or 'your graph'}")
        nodes = f": {len(graph.nodes)} nodes" if graph is not None else ""
        colours = f", {self.colors} colours" if self.colors > 1 else ""
        rule = {False: "", True: " + in-place", "strict": " + in-place (strict)"}
        return (f"{what}{nodes}; order {self.order}, {self.planner}"
                f"{rule[self.inplace]}{colours}, alignment "
                f"{self.alignment} B")


@dataclass
class ExplorerResult:
    """Everything one state produces: the plan, the comparison rows, the headline.
    `minimum` is the view's one theoretical minimum (`view_minimum`)."""
    state: WidgetState
    graph: Graph
    report: MemoryReport
    rows: list[techniques.TechniqueRow]
    dtr: DTRRun | None = None
    sweep: list[Any] | None = None            # DTR at each budget ratio (when DTR is on)
    messages: list[str] = field(default_factory=list)
    minimum: int | None = None
    working_minimum: int | None = None
    notes: list[str] = field(default_factory=list)    # a switch that changes nothing here
    swap: SwapReport | None = None            # the swap plan (swap on and its budget met)

    def __post_init__(self) -> None:
        if self.minimum is None:
            self.minimum = view_minimum(self.report, self.rows)
        if self.working_minimum is None:
            self.working_minimum = view_minimum(self.report, self.rows, working=True)

    @property
    def unit(self) -> str:
        """The view's one unit (`view_unit`): every byte count of the view is in it."""
        return view_unit(self.report, self.rows)

    @property
    def headline(self) -> str:
        """"on: TECHNIQUES. arena: peak X -> Y, ...": which techniques made the numbers."""
        text = (f"on: {techniques_on(self.state)}. "
                + headline(self.report, self.dtr, self.minimum, self.unit,
                           self.working_minimum))
        if self.swap is not None:
            text += "; " + swap_view.swap_headline(self.swap, self.unit,
                                                   self.state.swap_budget)
        return text

    @property
    def caption(self) -> str:
        """What the view shows and what its minima mean (the line under the headline)."""
        text = (f"{self.state.describe(self.graph)}. Arena: the planned tensors; theoretical "
                f"minimum: the most of their bytes alive at any one step of this schedule, "
                f"in-place outputs sharing their input's bytes where that is lower; no static "
                f"plan here goes below it. Switched on here: {chosen(self.state.options())}.")
        if self.dtr is not None:
            text += (" With DTR the bars show working memory: a static plan's arena plus the "
                     "largest op's workspace beside it, DTR's budget holding both; the "
                     "working minimum adds each step's workspace to the bytes alive there, "
                     "and only recomputation goes below it. DTR's budget is a fraction of "
                     "the total peak without rematerialisation (working peak + inputs, "
                     "parameters and outputs), the DTR paper's.")
            if self.state.dtr_evict != "drop":
                text += (f" DTR's evictions: {self.state.dtr_evict} (over {self.state.link}), "
                         "its costs each op's seconds (FLOPs at the machine's rate plus a "
                         "launch) against each copy's; its timeline marks each copy out to "
                         "host memory and back at the clock it began, with the host peak "
                         "beside working memory.")
        return text


def techniques_on(state: WidgetState) -> str:
    """The techniques a state switches on, in one phrase: "refcount, in-place (last
    reader), 2 colours, order program, DTR, swap (pcie4)" ("no reuse" for the none
    planner)."""
    rule = {False: [], True: ["in-place (last reader)"], "strict": ["in-place (strict)"]}
    parts = ["no reuse" if state.planner == "none" else state.planner,
             *rule[state.inplace],
             *([f"{state.colors} colours"] if state.colors > 1 else []),
             f"order {state.order}",
             *([] if not state.dtr else ["DTR"] if state.dtr_evict == "drop" else
               [f"DTR (evict {state.dtr_evict}, {state.link})"]),
             *([f"swap ({state.link})"] if state.swap else [])]
    return ", ".join(parts)


def toggle_note(state: WidgetState, report: MemoryReport, other: MemoryReport) -> str:
    """Why switching in-place (on in `state`, or off) changes no byte of the arena here,
    given `other`, the plan with it switched the other way; "" when it does change it."""
    if other.arena_bytes != report.arena_bytes:
        return ""
    on, off = (report, other) if state.inplace else (other, report)
    pairs = len(on.plan.inplace)
    unit = view_unit(report)
    head = ("in-place saves nothing" if state.inplace else "in-place would save nothing")
    where = f"on this model at this order ({state.order}, {state.planner})"
    if not pairs:
        why = ("no op here may write its output over its input under the rule (the op "
               "must declare it, and the input must die there and be no input, parameter "
               "or output)")
    elif on.theoretical_minimum == off.theoretical_minimum:
        why = (f"{pairs} outputs take their input's bytes, but the most bytes alive at one "
               f"step is {plots.fmt_in(on.theoretical_minimum, unit)} with or without them, "
               f"and {state.planner} packs the same arena, "
               f"{plots.fmt_in(report.arena_bytes, unit)}")
    else:
        why = (f"{pairs} outputs take their input's bytes and the theoretical minimum drops "
               f"from {plots.fmt_in(off.theoretical_minimum, unit)} to "
               f"{plots.fmt_in(on.theoretical_minimum, unit)}, but {state.planner} packs "
               f"both to the same arena, {plots.fmt_in(report.arena_bytes, unit)}")
    return f"{head} {where}: {why}"


def view_minimum(report: MemoryReport, rows: list[techniques.TechniqueRow] = (),
                 working: bool = False) -> int:
    """The one theoretical minimum of a view: the lowest among the plan's and the static
    rows' (they differ by in-place and colours, see the module docstring); `working`: the
    one working minimum, the same way."""
    if working:
        return min([report.working_minimum,
                    *(r.working_minimum for r in rows if r.family != "dynamic")])
    return min([report.theoretical_minimum,
                *(r.theoretical_minimum for r in rows if r.family != "dynamic")])


def view_unit(report: MemoryReport, rows: list[techniques.TechniqueRow] = ()) -> str:
    """The one unit of a view ("B", "KiB", "MiB" or "GiB"): the one `plots.byte_unit`
    picks for its largest planned number (no reuse, the plan, a bar)."""
    return plots.byte_unit(max([report.no_reuse_bytes, report.arena_bytes, 1,
                                *(max(r.bytes, r.no_reuse_bytes) for r in rows)]))[0]


def headline(report: MemoryReport, dtr: DTRRun | None = None,
             minimum: int | None = None, unit: str | None = None,
             working_minimum: int | None = None) -> str:
    """"arena: peak X -> Y, saved Z% (theoretical minimum W)" for the planned tensors, each
    in `unit` (default: `view_unit(report)`; powers of two); `minimum` defaults to the
    report's. A DTR run adds a second count, working memory (arena + workspace): this
    plan's, DTR's budget, and `working_minimum` (default: the report's)."""
    m = report.theoretical_minimum if minimum is None else minimum
    unit = unit or view_unit(report)
    text = (f"arena: peak {plots.fmt_in(report.no_reuse_bytes, unit)} -> "
            f"{plots.fmt_in(report.arena_bytes, unit)}, saved {report.saved_percent:.1f}% "
            f"(theoretical minimum {plots.fmt_in(m, unit)})")
    if dtr is not None:
        wm = report.working_minimum if working_minimum is None else working_minimum
        text += (f"; working memory (arena + workspace): this plan "
                 f"{plots.fmt_in(report.working_bytes, unit)}, "
                 f"{dtr.describe(unit, wm)}")
    return text


class MemoryExplorer:
    """The widget without the widget: state in, plan, rows, headline and figures out.

    `graph_or_model`: a `Graph`, a zoo `Model` (anything with `.graph`) or a model name
    of `minigraph.models.MODELS`. Graphs, plans, comparisons and DTR runs are cached per
    state, so flipping a switch back is instant.
    """

    def __init__(self, graph_or_model: Graph | str | Any = None, batch: int | None = None):
        self.models = _models()
        self.custom: Graph | None = None
        if isinstance(graph_or_model, Graph):
            self.custom, model = graph_or_model, CUSTOM
        elif graph_or_model is not None and hasattr(graph_or_model, "graph"):
            self.custom, model = graph_or_model.graph, CUSTOM
        elif isinstance(graph_or_model, str):
            if graph_or_model not in self.models:
                raise ArgumentError(
                    f"memory_widget: graph_or_model: unknown model {graph_or_model[:40]!r}"
                    f"{did_you_mean(graph_or_model, self.models)}; the zoo has "
                    f"{', '.join(self.models) or 'nothing (minigraph.models)'}")
            model = graph_or_model
        elif graph_or_model is None and self.models:
            model = "mlp" if "mlp" in self.models else next(iter(self.models))
        else:
            raise ArgumentTypeError(
                f"memory_widget: graph_or_model must be a Graph, a Model or a model name, "
                f"not {type(graph_or_model).__name__} {repr(graph_or_model)[:40]}")
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                                  or not 1 <= batch <= max(BATCHES)):
            raise ArgumentError(f"memory_widget: batch must be an integer from 1 to "
                                f"{max(BATCHES)}, not {batch!r}")
        self.initial = WidgetState(model=model, batch=batch or 8)
        self._graphs: dict[tuple[str, int], Graph] = {}
        self._reports: dict[tuple, MemoryReport] = {}
        self._rows: dict[tuple, list[techniques.TechniqueRow]] = {}
        self._programs: dict[tuple, tuple[Program, Bounds]] = {}
        self._dtr: dict[tuple, DTRRun] = {}
        self._sweeps: dict[tuple, list[Any]] = {}
        self._defaults: dict[tuple, float] = {}
        self._swaps: dict[tuple, SwapReport | SwapError] = {}

    # The choices each control offers (registries, so a new technique is one more entry)
    def choices(self) -> dict[str, list]:
        return {"model": ([CUSTOM] if self.custom is not None else []) + list(self.models),
                "batch": list(BATCHES), "order": list(ORDERS), "planner": list(PLANNERS),
                "alignment": list(ALIGNMENTS), "colors": [1, 2, 3, 4],
                "color_by": list(COLOR_BY), "link": list(swap_view.LINKS),
                "dtr_evict": list(EVICT_MODES)}

    def graph(self, state: WidgetState) -> Graph:
        if state.model == CUSTOM:
            if self.custom is None:
                raise ValueError("no graph was given; choose a model")
            return self.custom
        key = (state.model, state.batch)
        if key not in self._graphs:
            self._graphs[key] = get_model(state.model, batch=state.batch).graph
        return self._graphs[key]

    def _gkey(self, state: WidgetState) -> tuple:
        return (state.model, state.batch if state.model != CUSTOM else None)

    def _dkey(self, state: WidgetState) -> tuple:
        """What a DTR run depends on: the graph, its schedule and the alignment."""
        return (*self._gkey(state), state.order, state.alignment)

    def report(self, state: WidgetState) -> MemoryReport:
        """`mg.plan_memory(graph, state.options())`, cached."""
        return self._plan_cached(self.graph(state), state.options(), self._gkey(state))

    def _plan_cached(self, graph: Graph, options: MemoryOptions, gkey: tuple) -> MemoryReport:
        key = (*gkey, repr(options))
        if key not in self._reports:
            self._reports[key] = plan_memory(graph, options)
        return self._reports[key]

    def rows(self, state: WidgetState, progress: techniques.Progress | None = None
             ) -> list[techniques.TechniqueRow]:
        """One row per technique under this state's order, in-place, colours, alignment."""
        key = (*self._gkey(state), state.order, state.inplace, state.colors, state.alignment,
               state.slow, state.time_limit)
        if key not in self._rows:
            gkey = self._gkey(state)
            self._rows[key] = techniques.compare_techniques(
                self.graph(state), state.options().replace(planner_args={}), slow=state.slow,
                time_limit=state.time_limit, progress=progress,
                plan=lambda g, o: self._plan_cached(g, o, gkey))
        return self._rows[key]

    # DTR -------------------------------------------------------------------------------
    def dtr_bounds(self, state: WidgetState) -> Bounds:
        """DTR's `Bounds` for this graph, schedule and alignment (cached with its program)."""
        return self._program(state)[1]

    def _program(self, state: WidgetState) -> tuple[Program, Bounds]:
        key = self._dkey(state)
        if key not in self._programs:
            graph = self.graph(state)
            program = program_from_graph(graph, schedule(graph, state.order), state.alignment)
            self._programs[key] = (program, program.bounds())
        return self._programs[key]

    def dtr_low(self, state: WidgetState) -> float:
        """The smallest budget ratio (on the slider's grid) that could work (`low_ratio`)."""
        return low_ratio(self.dtr_bounds(state))

    def dtr_run(self, state: WidgetState, ratio: float | None = None) -> DTRRun:
        """DTR (simulated, the DTR paper's heuristic) at `ratio` (default: the state's
        budget, or the model's default) of the total peak, cached; never raises for a
        budget that is too small: the run says what stopped it."""
        ratio = check_budget_ratio(ratio if ratio is not None else
                                   state.dtr_budget if state.dtr_budget is not None else
                                   self.dtr_default(state))
        how = () if state.dtr_evict == "drop" else (state.dtr_evict, state.link)
        key = (*self._dkey(state), round(ratio, 6), *how)
        if key not in self._dtr:
            program, bounds = self._program(state)
            if how:                  # a swapping run: op seconds against the copies
                pkey = (*self._dkey(state), "seconds", state.link)
                if pkey not in self._programs:
                    graph = self.graph(state)
                    self._programs[pkey] = (seconds_program(
                        graph, schedule(graph, state.order), state.alignment, state.link),
                        bounds)
                program = self._programs[pkey][0]
            self._dtr[key] = run_at(program, bounds, ratio, state.dtr_evict, state.link)
        return self._dtr[key]

    def sweep(self, state: WidgetState, progress: techniques.Progress | None = None) -> list[Any]:
        """DTR from budget 100% down to its lower bound (`techniques.dtr_sweep`), cached."""
        key = self._dkey(state)
        if key not in self._sweeps:
            self._sweeps[key] = techniques.dtr_sweep(self.graph(state), options=state.options(),
                                                     progress=progress)
        return self._sweeps[key]

    def dtr_default(self, state: WidgetState,
                    progress: techniques.Progress | None = None) -> float:
        """The budget the slider starts at (`default_ratio`): the smallest on its grid at
        which DTR (dropping its victims) finishes on this graph."""
        key = self._dkey(state)
        drop = state.replace(dtr_evict="drop")
        if key not in self._defaults:
            self._defaults[key] = default_ratio(self.sweep(state, progress),
                                                self.dtr_low(state),
                                                lambda r: self.dtr_run(drop, r).ok)
        return self._defaults[key]

    # Swap ------------------------------------------------------------------------------
    def swap_default(self, state: WidgetState) -> float:
        """The fraction the swap slider starts at: the lowest budget swapping reaches with
        this planner, on the slider's grid (`swap_view.lowest_fraction`); SwapError if none."""
        key = ("default", *self._gkey(state), repr(state.options()), state.link)
        if key not in self._swaps:
            try:
                self._swaps[key] = swap_view.lowest_fraction(
                    self.graph(state), state.options(),
                    self.report(state).theoretical_minimum, state.link)
            except SwapError as e:
                self._swaps[key] = e
        if isinstance(self._swaps[key], SwapError):
            raise self._swaps[key]
        return self._swaps[key]

    def swap_report(self, state: WidgetState) -> SwapReport:
        """`plan_swap` at the state's budget (a fraction of the theoretical minimum without
        swap; None: `swap_default`) with the state's planner and link, cached; a budget
        it cannot meet raises its SwapError (cached too)."""
        fraction = swap_view.check_swap_budget(
            state.swap_budget if state.swap_budget is not None else self.swap_default(state))
        minimum = self.report(state).theoretical_minimum
        key = (*self._gkey(state), repr(state.options()), state.link,
               swap_view.budget_bytes(fraction, minimum))
        if key not in self._swaps:
            try:
                self._swaps[key] = swap_view.swap_at(self.graph(state), state.options(),
                                                     minimum, fraction, state.link)
            except SwapError as e:
                self._swaps[key] = e
        if isinstance(self._swaps[key], SwapError):
            raise self._swaps[key]
        return self._swaps[key]

    def compute(self, state: WidgetState | None = None,
                progress: techniques.Progress | None = None) -> ExplorerResult:
        """Plan, compare and (if asked) run DTR for `state`; a state whose `dtr_budget` is
        None gets the model's default, and the result's state says which."""
        state = state or self.initial
        graph = self.graph(state)
        if progress is not None:
            progress(0, 1, f"{state.planner} on {len(graph.nodes)} nodes")
        report = self.report(state)
        # Plan the other way too (cached), to say when in-place changes nothing here; not
        # for a searching planner, whose second search would double the wait.
        flipped = state.replace(inplace=False if state.inplace else True)
        notes = [] if state.planner in (*techniques.SLOW_PLANNERS, "search") else \
            [n for n in [toggle_note(state, report, self.report(flipped))] if n]
        rows = list(self.rows(state, progress))
        minimum = view_minimum(report, rows)
        working_min = view_minimum(report, rows, working=True)
        messages: list[str] = []
        run, sweep = None, None
        if state.dtr:
            sweep = self.sweep(state, progress)
            if state.dtr_budget is None:
                state = state.replace(dtr_budget=self.dtr_default(state, progress))
            run = self.dtr_run(state)
            rows.append(run.technique_row(report, working_min))
            if not run.ok:
                messages.append(run.describe(view_unit(report, rows), working_min))
        swapped = None
        if state.swap:
            try:
                if state.swap_budget is None:
                    state = state.replace(swap_budget=self.swap_default(state))
                swapped = self.swap_report(state)
            except SwapError as e:            # the one line, where the student looks
                messages.append(f"swap: {e}")
        return ExplorerResult(state, graph, report, rows, run, sweep, messages, minimum,
                              working_min, notes, swapped)

    # Pictures ------------------------------------------------------------------------
    @staticmethod
    def figures(result: ExplorerResult) -> dict[str, Any]:
        """Timeline, layout, comparison (and DTR's sweep when DTR is on) of `result`, each
        a matplotlib Figure, all in the view's unit with its one theoretical minimum."""
        figs = {"timeline": MemoryExplorer._timeline(result),
                "layout": MemoryExplorer._layout(result),
                "comparison": MemoryExplorer._comparison(result)}
        if result.sweep:
            run = result.dtr
            swapping = run is not None and run.evict != "drop" and run.trace is not None
            ax = None
            if swapping:                 # the sweep above, this run's copies below
                from matplotlib.figure import Figure  # lazy: matplotlib is optional
                fig = Figure(figsize=(11, 6.4), layout="constrained")
                ax, below = fig.subplots(2, 1)
            title = (f"DTR dropping: compute per budget; diamond: evict {run.evict}"
                     if swapping else None)
            figs["dtr"] = plots.plot_dtr_sweep(
                result.sweep, run.ratio if run is not None else None, ax=ax, title=title,
                chosen_status=run.status if run is not None else "ok",
                chosen_overhead=run.overhead if run is not None else None)
            if swapping:
                plots.plot_dtr_timeline(run.trace, ax=below)
                figs["dtr"] = fig
        return figs

    @staticmethod
    def summary_figure(result: ExplorerResult):
        """The three pictures in one Figure under the headline, wrapped (the static export)."""
        from matplotlib.figure import Figure
        n = len(result.rows)
        fig = Figure(figsize=(11, 8.6 + 0.3 * n), layout="constrained")
        axes = fig.subplots(3, 1, height_ratios=[3.2, 3.8, 1 + 0.3 * n])
        MemoryExplorer._timeline(result, axes[0])
        MemoryExplorer._layout(result, axes[1])
        MemoryExplorer._comparison(result, axes[2])
        fig.suptitle(textwrap.fill(result.headline, 120), fontsize=11)
        return fig

    @staticmethod
    def _timeline(result: ExplorerResult, ax: Any = None):
        if result.swap is None:
            return plots.plot_timeline(result.report, result.graph, ax=ax,
                                       minimum=result.minimum, unit=result.unit)
        fig = plots.plot_timeline(result.swap, result.graph, ax=ax, minimum=result.minimum,
                                  unit=result.unit, legend=False,
                                  title="With swap: bytes alive per step, transfers on top")
        axes = ax if ax is not None else fig.axes[0]
        swap_view.mark_transfers(axes, result.swap, result.unit)
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
                    frameon=False)
        return fig

    @staticmethod
    def _layout(result: ExplorerResult, ax: Any = None):
        plan = result.swap if result.swap is not None else result.report
        return plots.plot_layout(plan, ax=ax, color_by=result.state.color_by,
                                 minimum=result.minimum, unit=result.unit)

    @staticmethod
    def _comparison(result: ExplorerResult, ax: Any = None):
        dtr = result.dtr is not None
        return plots.plot_comparison(result.rows, ax=ax, unit=result.unit,
                                     minimum=result.working_minimum if dtr else result.minimum,
                                     quantity="working" if dtr else "arena")


def figure_bytes(fig: Any, fmt: str = "png", dpi: int = 80) -> bytes:
    """A Figure as PNG or SVG bytes (what the widget's images and the export hold)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi)
    return buf.getvalue()
