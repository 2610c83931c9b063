"""`memory_widget(graph_or_model)`: a toggle for every technique, the pictures redrawn.

Two layers, so the logic is tested without a browser:

- `MemoryExplorer` (no ipywidgets): from a `WidgetState` (the value of every control) it
  builds the graph, plans it with `mg.plan_memory`, compares every technique
  (`techniques.compare_techniques`), optionally runs DTR, and writes the headline
  "peak X -> Y, saved Z% (theoretical minimum W)", in the units of every other printout
  (`fmt_bytes`: B, KiB, MiB, GiB). Same options, same numbers as a script.
- `MemoryWidget` (an ipywidgets VBox): the controls, a progress bar for what takes long
  (the ILP, annealing, DTR), the headline and three images. Its `_repr_mimebundle_` adds
  a static PNG beside the live widget, so an exported notebook is not blank.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..errors import BudgetError, ThrashError
from ..experiments import techniques
from ..graph import Graph, fmt_bytes
from ..memory.api import MemoryOptions, MemoryReport, plan_memory
from ..memory.orders import ORDERS
from ..memory.planners import PLANNERS
from ..models import MODELS, get_model
from . import plots

try:
    import ipywidgets as w
except ImportError:          # the explorer works without it; the widget says what to install
    w = None

CUSTOM = "(your graph)"          # the model dropdown's entry for a graph passed in
BATCHES = (1, 2, 4, 8, 16, 32, 64)
ALIGNMENTS = (1, 64, 256, 512, 4096)


def _models() -> Mapping[str, Callable[..., Any]]:
    """The model zoo's registry (a function, so a test can offer another)."""
    return MODELS


@dataclass(frozen=True)
class WidgetState:
    """The value of every control. `dtr_budget` is a fraction of DTR's no-rematerialisation
    peak; `slow` also compares the planners of `techniques.SLOW_PLANNERS` (ILP, annealing);
    `time_limit` (seconds) bounds the ILP."""
    model: str = CUSTOM
    batch: int = 8
    order: str = "program"
    inplace: bool = True
    planner: str = "refcount"
    colors: int = 1
    alignment: int = 512
    dtr: bool = False
    dtr_budget: float = 0.5
    slow: bool = False
    time_limit: float = 5.0

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


@dataclass
class ExplorerResult:
    """Everything one state produces: the plan, the comparison rows, the headline."""
    state: WidgetState
    graph: Graph
    report: MemoryReport
    rows: list[techniques.TechniqueRow]
    dtr: techniques.TechniqueRow | None = None
    sweep: list[Any] | None = None            # DTR at each budget ratio (when DTR is on)
    messages: list[str] = field(default_factory=list)

    @property
    def headline(self) -> str:
        return headline(self.report, self.dtr)


def headline(report: MemoryReport, dtr: techniques.TechniqueRow | None = None) -> str:
    """"peak X -> Y, saved Z% (theoretical minimum W)" for the planned bytes, each in
    `fmt_bytes`'s units (B, KiB, MiB, GiB)."""
    text = (f"peak {fmt_bytes(report.no_reuse_bytes)} -> {fmt_bytes(report.arena_bytes)}, "
            f"saved "
            f"{report.saved_percent:.1f}% (theoretical minimum "
            f"{fmt_bytes(report.theoretical_minimum)})")
    if dtr is not None:
        text += f"; {dtr.label}: {fmt_bytes(dtr.bytes)}" + (f", {dtr.note}" if dtr.note else "")
    return text


class MemoryExplorer:
    """The widget without the widget: state in, plan, rows, headline and figures out.

    `graph_or_model`: a `Graph`, a zoo `Model` (anything with `.graph`) or a model name
    of `minigraph.models.MODELS`. Graphs, plans and comparisons are cached per state, so
    flipping a switch back is instant.
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
                raise ValueError(f"unknown model {graph_or_model!r}; the zoo has "
                                 f"{', '.join(self.models) or 'nothing (minigraph.models)'}")
            model = graph_or_model
        elif graph_or_model is None and self.models:
            model = "mlp" if "mlp" in self.models else next(iter(self.models))
        else:
            raise TypeError("memory_widget needs a Graph, a Model or a model name, not "
                            f"{type(graph_or_model).__name__}")
        self.initial = WidgetState(model=model, batch=batch or 8)
        self._graphs: dict[tuple[str, int], Graph] = {}
        self._reports: dict[tuple, MemoryReport] = {}
        self._rows: dict[tuple, list[techniques.TechniqueRow]] = {}
        self._dtr: dict[tuple, techniques.TechniqueRow] = {}
        self._sweeps: dict[tuple, list[Any]] = {}

    # The choices each control offers (registries, so a new technique is one more entry)
    def choices(self) -> dict[str, list]:
        return {"model": ([CUSTOM] if self.custom is not None else []) + list(self.models),
                "batch": list(BATCHES), "order": list(ORDERS), "planner": list(PLANNERS),
                "alignment": list(ALIGNMENTS), "colors": [1, 2, 3, 4]}

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

    def dtr(self, state: WidgetState, report: MemoryReport) -> techniques.TechniqueRow:
        """DTR's bar at the state's budget ratio (raises BudgetError below its bound)."""
        key = (*self._gkey(state), state.order, state.alignment, state.dtr_budget)
        if key not in self._dtr:
            self._dtr[key] = techniques.dtr_row(self.graph(state), float(state.dtr_budget),
                                           state.options(), report.theoretical_minimum,
                                           report.no_reuse_bytes)
        return self._dtr[key]

    def sweep(self, state: WidgetState, progress: techniques.Progress | None = None) -> list[Any]:
        """DTR from budget 100% down to its lower bound (`techniques.dtr_sweep`), cached."""
        key = (*self._gkey(state), state.order, state.alignment)
        if key not in self._sweeps:
            self._sweeps[key] = techniques.dtr_sweep(self.graph(state), options=state.options(),
                                                progress=progress)
        return self._sweeps[key]

    def compute(self, state: WidgetState | None = None,
                progress: techniques.Progress | None = None) -> ExplorerResult:
        """Plan, compare and (if asked) run DTR for `state`."""
        state = state or self.initial
        graph = self.graph(state)
        if progress is not None:
            progress(0, 1, f"{state.planner} on {len(graph.nodes)} nodes")
        report = self.report(state)
        rows = list(self.rows(state, progress))
        messages: list[str] = []
        dtr, sweep = None, None
        if state.dtr:
            sweep = self.sweep(state, progress)
            try:
                dtr = self.dtr(state, report)
                rows.append(dtr)
            except (BudgetError, ThrashError) as e:
                messages.append(f"DTR at {state.dtr_budget:.0%}: {e}")
        return ExplorerResult(state, graph, report, rows, dtr, sweep, messages)

    # Pictures ------------------------------------------------------------------------
    @staticmethod
    def figures(result: ExplorerResult) -> dict[str, Any]:
        """Timeline, layout and comparison of `result`, each a matplotlib Figure."""
        figs = {"timeline": plots.plot_timeline(result.report, result.graph),
                "layout": plots.plot_layout(result.report),
                "comparison": plots.plot_comparison(result.rows)}
        if result.sweep:
            figs["dtr"] = plots.plot_dtr_sweep(result.sweep, result.state.dtr_budget)
        return figs

    @staticmethod
    def summary_figure(result: ExplorerResult):
        """The three pictures in one Figure under the headline (the static export)."""
        from matplotlib.figure import Figure
        n = len(result.rows)
        fig = Figure(figsize=(11, 8.6 + 0.3 * n), layout="constrained")
        axes = fig.subplots(3, 1, height_ratios=[3.2, 3.8, 1 + 0.3 * n])
        plots.plot_timeline(result.report, result.graph, ax=axes[0])
        plots.plot_layout(result.report, ax=axes[1])
        plots.plot_comparison(result.rows, ax=axes[2])
        fig.suptitle(result.headline, fontsize=11)
        return fig


def figure_bytes(fig: Any, fmt: str = "png", dpi: int = 80) -> bytes:
    """A Figure as PNG or SVG bytes (what the widget's images and the export hold)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------
# The ipywidgets wiring: controls -> WidgetState -> MemoryExplorer -> images
# ---------------------------------------------------------------------------------------

class MemoryWidget(w.VBox if w is not None else object):
    """The explorer's controls, headline and pictures; every change re-plans.

    `widget.set(planner="ge", inplace=False)` moves the controls from code;
    `widget.result` is the last `ExplorerResult`, `widget.headline` its headline.
    """

    def __init__(self, explorer: MemoryExplorer, state: WidgetState | None = None):
        self.explorer = explorer
        st = state or explorer.initial
        ch = explorer.choices()
        style = {"description_width": "90px"}
        lay = w.Layout(width="250px")
        c: dict[str, Any] = {}
        c["model"] = w.Dropdown(options=ch["model"], value=st.model, description="model",
                                style=style, layout=lay)
        c["batch"] = w.Dropdown(options=ch["batch"], value=st.batch, description="batch",
                                style=style, layout=lay, disabled=st.model == CUSTOM)
        c["order"] = w.Dropdown(options=ch["order"], value=st.order, description="order",
                                style=style, layout=lay)
        c["planner"] = w.Dropdown(options=ch["planner"], value=st.planner,
                                  description="planner", style=style, layout=lay)
        c["inplace"] = w.Checkbox(value=st.inplace, description="in-place",
                                  indent=False, layout=w.Layout(width="120px"))
        c["colors"] = w.IntSlider(value=st.colors, min=1, max=4, description="colours",
                                  style=style, layout=lay, continuous_update=False)
        c["alignment"] = w.Dropdown(options=ch["alignment"], value=st.alignment,
                                    description="alignment", style=style, layout=lay)
        c["slow"] = w.Checkbox(value=st.slow, description="compare ILP & annealing",
                               indent=False, layout=w.Layout(width="200px"))
        c["dtr"] = w.Checkbox(value=st.dtr, description="DTR", indent=False,
                              layout=w.Layout(width="120px"))
        c["dtr_budget"] = w.FloatSlider(value=st.dtr_budget, min=0.05, max=1.0, step=0.05,
                                        description="DTR budget", readout_format=".0%",
                                        style=style, layout=lay, continuous_update=False,
                                        disabled=not st.dtr)
        for name, ctl in c.items():
            ctl.add_class(f"mg-control-{name}")
            ctl.observe(self._changed, names="value")
        self.controls = c
        self.headline_html = w.HTML(layout=w.Layout(margin="4px 0px"))
        self.headline_html.add_class("mg-headline")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="",
                                      layout=w.Layout(width="420px"))
        self.progress_label = w.HTML("")
        self.progress_box = w.HBox([self.progress, self.progress_label],
                                   layout=w.Layout(visibility="hidden"))
        self.progress_box.add_class("mg-progress")
        self.images = {k: w.Image(format="png", layout=w.Layout(max_width="100%"))
                       for k in ("timeline", "layout", "comparison", "dtr")}
        for k, img in self.images.items():
            img.add_class(f"mg-plot-{k}")
        self.message = w.HTML("")
        rows = w.VBox([
            w.HBox([c["model"], c["batch"], c["order"]]),
            w.HBox([c["planner"], c["alignment"], c["colors"]]),
            w.HBox([c["inplace"], c["slow"], c["dtr"], c["dtr_budget"]]),
        ])
        super().__init__([rows, self.headline_html,
                          self.progress_box, self.message,
                          self.images["timeline"], self.images["layout"],
                          self.images["comparison"], self.images["dtr"]])
        self.add_class("mg-memory-widget")
        self.result: ExplorerResult | None = None
        self._busy = False
        self.refresh()

    # State <-> controls ------------------------------------------------------------
    @property
    def state(self) -> WidgetState:
        return WidgetState(**{k: ctl.value for k, ctl in self.controls.items()},
                           time_limit=self.explorer.initial.time_limit)

    @property
    def headline(self) -> str:
        return self.result.headline if self.result is not None else ""

    def set(self, **values: Any) -> MemoryWidget:
        """Move controls from code (one re-plan at the end), e.g. `set(planner="ge")`."""
        WidgetState().replace(**values)          # names checked here
        self._busy = True
        try:
            for k, v in values.items():
                self.controls[k].value = v
        finally:
            self._busy = False
        self.refresh()
        return self

    def _changed(self, change: dict) -> None:
        if not self._busy:
            self.refresh()

    def _progress(self, i: int, n: int, label: str) -> None:
        self.progress.max = max(n, 1)
        self.progress.value = i
        self.progress_label.value = "" if i >= n else f"planning: {_html_escape(label)}"

    def refresh(self) -> None:
        """Re-plan for the current controls and redraw everything."""
        st = self.state
        self.controls["batch"].disabled = st.model == CUSTOM
        self.controls["dtr_budget"].disabled = not st.dtr
        slow = st.slow or st.planner in techniques.SLOW_PLANNERS or st.dtr
        if slow:
            self.progress_box.layout.visibility = "visible"
        try:
            result = self.explorer.compute(st, self._progress)
        except Exception as e:        # show it where the student is looking
            self.message.value = (f"<span style='color:#b00'>{type(e).__name__}: "
                                  f"{_html_escape(str(e))}</span>")
            self.progress_box.layout.visibility = "hidden"
            return
        self.result = result
        self.message.value = "<br>".join(_html_escape(m) for m in result.messages)
        figs = MemoryExplorer.figures(result)
        for k, img in self.images.items():
            if k in figs:
                img.value = figure_bytes(figs[k])
            img.layout.display = None if k in figs else "none"
        self.progress_box.layout.visibility = "hidden"
        self.progress_label.value = ""
        # Last, so that a changed headline means everything above is redrawn.
        self.headline_html.value = f"<b>{_html_escape(result.headline)}</b>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The live widget, and beside it a PNG of the same pictures (for exports)."""
        data = super()._repr_mimebundle_(**kwargs) or {}
        if self.result is not None:
            fig = MemoryExplorer.summary_figure(self.result)
            data["image/png"] = base64.b64encode(figure_bytes(fig, dpi=72)).decode()
            data["text/plain"] = f"memory_widget: {self.result.headline}"
        return data



def _html_escape(s: str) -> str:
    import html
    return html.escape(s)


def memory_widget(graph_or_model: Graph | str | Any = None, batch: int | None = None,
                  **controls: Any):
    """A widget with a toggle for every memory technique on `graph_or_model` (a Graph, a
    zoo Model or a model name). Keywords set the controls' first values, e.g.
    `memory_widget("resnet", batch=4, planner="ge", order="ge")`."""
    explorer = MemoryExplorer(graph_or_model, batch)
    state = explorer.initial.replace(**controls) if controls else explorer.initial
    if w is None:
        raise ImportError("memory_widget needs ipywidgets and matplotlib: "
                          "pip install 'minigraph[lab]'")
    return MemoryWidget(explorer, state)
