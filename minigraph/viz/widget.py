"""`memory_widget(graph_or_model)`: a toggle for every technique, the pictures redrawn.

Two layers, so the logic is tested without a browser:

- `MemoryExplorer` (`minigraph.viz.explorer`, no ipywidgets): state in, plan, rows,
  headline and figures out, every byte count in the view's one unit, one theoretical
  minimum per view.
- `MemoryWidget` (here, an ipywidgets VBox): the controls, a busy bar shown on every
  change (planning a large model, the ILP, annealing, DTR take seconds), the headline, a
  line saying what is shown, and the pictures. Its `_repr_mimebundle_` adds a static PNG
  beside the live widget, so an exported notebook is not blank.

The DTR budget slider (`minigraph.viz.dtr_budget`) starts at the smallest budget of the
model shown at which DTR finishes; a run that did not finish is drawn as such; its evict
dropdown (drop / swap / cheaper) says what DTR does with a victim. The swap
toggle (`minigraph.viz.swap_view`) starts its budget slider at the lowest budget swapping
reaches with the chosen planner; a budget it cannot meet is its one-line message.
"""

from __future__ import annotations

import base64
import html
from typing import Any

from ..errors import ArgumentError, SwapError, did_you_mean
from ..graph import Graph
from ..memory.api import MemoryOptions
from .dtr_budget import (  # noqa: F401  (the widget's API: DTR statuses, the run record)
    BUDGET_STEP,
    DTR_BELOW,
    DTR_OK,
    DTR_STUCK,
    DTR_THRASHED,
    DTRRun,
    check_budget_ratio,
)
from .explorer import (  # noqa: F401  (the widget's API: the explorer and its records)
    CUSTOM,
    INPLACE,
    ExplorerResult,
    MemoryExplorer,
    WidgetState,
    figure_bytes,
    headline,
    techniques_on,
    toggle_note,
    view_minimum,
    view_unit,
)
from .swap_view import SWAP_STEP, check_swap_budget

try:
    import ipywidgets as w
except ImportError:          # the explorer works without it; the widget says what to install
    w = None


# ---------------------------------------------------------------------------------------
# The ipywidgets wiring: controls -> WidgetState -> MemoryExplorer -> images
# ---------------------------------------------------------------------------------------

def _short(value: object, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width] + "..."


WRAP = "white-space: normal; overflow-wrap: anywhere; line-height: 1.4"


class MemoryWidget(w.VBox if w is not None else object):
    """The explorer's controls, headline and pictures; every change re-plans.

    From a notebook cell, `widget.set(...)` moves any control (one re-plan at the end):
    `set(planner="ge", inplace=False)`, `set(inplace="strict")` (the in-place dropdown:
    off / last reader / strict), `set(colors=2)` (parallel-safe colours),
    `set(color_by="block")` (the layout's colours), `set(dtr=True)` (DTR at the model's
    default budget), `set(dtr=True, dtr_budget=0.6)` (60% of its total peak; None: the
    default again), `set(dtr=True, dtr_evict="cheaper")` (each victim dropped or copied
    to host memory over the link, the cheaper), `set(swap=True)` (swap at the lowest
    budget it reaches with this planner), `set(swap=True, swap_budget=0.8,
    link="pcie5")` (80% of the theoretical minimum without swap),
    `set(model="resnet", batch=4)`. `widget.result` is the last
    `ExplorerResult`, `widget.headline` its headline.
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
        c["inplace"] = w.Dropdown(options=list(INPLACE), value=st.inplace,
                                  description="in-place", style=style, layout=lay)
        c["colors"] = w.IntSlider(value=st.colors, min=1, max=4, description="colours",
                                  style=style, layout=lay, continuous_update=False)
        c["alignment"] = w.Dropdown(options=ch["alignment"], value=st.alignment,
                                    description="alignment", style=style, layout=lay)
        c["color_by"] = w.Dropdown(options=ch["color_by"], value=st.color_by,
                                   description="colour by", style=style, layout=lay)
        c["slow"] = w.Checkbox(value=st.slow, description="compare ILP & annealing",
                               indent=False, layout=w.Layout(width="200px"))
        c["dtr"] = w.Checkbox(value=st.dtr, description="DTR", indent=False,
                              layout=w.Layout(width="120px"))
        budget = 1.0 if st.dtr_budget is None else float(st.dtr_budget)
        c["dtr_budget"] = w.FloatSlider(value=budget, min=min(0.05, budget), max=1.0,
                                        step=BUDGET_STEP, description="DTR budget",
                                        readout_format=".0%", style=style, layout=lay,
                                        continuous_update=False, disabled=not st.dtr)
        c["dtr_evict"] = w.Dropdown(options=ch["dtr_evict"], value=st.dtr_evict,
                                    description="evict", style=style, layout=lay,
                                    disabled=not st.dtr)
        c["swap"] = w.Checkbox(value=st.swap, description="swap", indent=False,
                               layout=w.Layout(width="120px"))
        swap_budget = 1.0 if st.swap_budget is None else float(st.swap_budget)
        c["swap_budget"] = w.FloatSlider(value=swap_budget, min=min(0.05, swap_budget),
                                         max=1.0, step=SWAP_STEP, description="swap budget",
                                         readout_format=".1%", style=style, layout=lay,
                                         continuous_update=False, disabled=not st.swap)
        c["link"] = w.Dropdown(options=ch["link"], value=st.link, description="link",
                               style=style, layout=lay, disabled=not _uses_link(st))
        for name, ctl in c.items():
            ctl.add_class(f"mg-control-{name}")
            ctl.observe(self._changed, names="value")
        self.controls = c
        self.headline_html = w.HTML(layout=w.Layout(margin="4px 0px", width="100%"))
        self.headline_html.add_class("mg-headline")
        self.caption = w.HTML(layout=w.Layout(width="auto", margin="2px 0px"))
        self.caption.add_class("mg-caption")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="",
                                      layout=w.Layout(width="420px"))
        self.progress_label = w.HTML("")
        self.progress_box = w.HBox([self.progress, self.progress_label],
                                   layout=w.Layout(visibility="hidden"))
        self.progress_box.add_class("mg-progress")
        self.images = {k: w.Image(format="png",
                                  layout=w.Layout(max_width="100%", margin="2px 0px"))
                       for k in ("timeline", "layout", "comparison", "dtr")}
        for k, img in self.images.items():
            img.add_class(f"mg-plot-{k}")
        self.message = w.HTML("", layout=w.Layout(width="auto", margin="2px 0px"))
        self.message.add_class("mg-message")
        # Rows of controls wrap in a narrow cell, and nothing is wider than the cell (FIT):
        # a fixed-width row overflowed it and the output area clipped the left edge.
        wrap = w.Layout(flex_flow="row wrap", max_width="100%")
        rows = w.VBox([
            w.HBox([c["model"], c["batch"], c["order"]], layout=wrap),
            w.HBox([c["planner"], c["alignment"], c["colors"]], layout=wrap),
            w.HBox([c["inplace"], c["slow"], c["color_by"]], layout=wrap),
            w.HBox([c["dtr"], c["dtr_budget"], c["dtr_evict"]], layout=wrap),
            w.HBox([c["swap"], c["swap_budget"], c["link"]], layout=wrap),
        ], layout=w.Layout(max_width="100%"))
        self.progress.layout.max_width = "100%"
        for img in self.images.values():
            img.layout.height = "auto"
        super().__init__([rows, self.headline_html, self.caption,
                          self.progress_box, self.message,
                          self.images["timeline"], self.images["layout"],
                          self.images["comparison"], self.images["dtr"]],
                         layout=w.Layout(width="100%", max_width="100%",
                                         overflow="hidden"))
        self.add_class("mg-memory-widget")
        self.result: ExplorerResult | None = None
        self._busy = False
        self._budget_for: tuple | None = None       # the DTR key the slider's range is for
        self._explicit_budget = st.dtr_budget       # a budget asked for, not the default
        self._swap_for: tuple | None = None         # the plan the swap slider is set for
        self._explicit_swap = st.swap_budget
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
        """Move controls from code (one re-plan at the end): any control by its name,
        e.g. `set(planner="ge")`, `set(colors=2)`, `set(dtr=True, dtr_budget=0.6)`;
        `dtr_budget=None` goes back to the model's default budget."""
        wanted = WidgetState().replace(**values)  # names and the in-place rule checked here
        check_offered(self.explorer, wanted, set(values) - {"dtr_budget", "swap_budget"},
                      "MemoryWidget.set")
        if "inplace" in values:                  # "last-reader" is True
            values["inplace"] = MemoryOptions(inplace=values["inplace"]).inplace
        self._busy = True
        try:
            if "dtr_budget" in values:
                budget = values.pop("dtr_budget")
                self._explicit_budget = None if budget is None else check_budget_ratio(budget)
                self._budget_for = None          # the slider is set again in refresh
            if "swap_budget" in values:
                budget = values.pop("swap_budget")
                self._explicit_swap = None if budget is None else check_swap_budget(budget)
                self._swap_for = None
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
        self.progress.value = min(i, self.progress.max)
        self.progress_label.value = f"working: {html.escape(label)}"

    def _set_busy(self, busy: bool, label: str = "") -> None:
        """The busy bar (and the class mg-busy) while a change is computed and drawn."""
        if busy:
            self.progress.value = 0
            self.progress_label.value = f"working: {html.escape(label)}"
            self.progress_box.layout.visibility = "visible"
            self.add_class("mg-busy")
        else:
            self.progress_box.layout.visibility = "hidden"
            self.progress_label.value = ""
            self.remove_class("mg-busy")

    def _sync_budget(self, st: WidgetState) -> WidgetState:
        """With DTR on, give the slider the range of the graph shown (from its smallest
        budget that could work to 100%) and, for a new graph, its default budget."""
        key = self.explorer._dkey(st)
        if not st.dtr or key == self._budget_for:
            return st
        slider = self.controls["dtr_budget"]
        low = self.explorer.dtr_low(st)
        value = self._explicit_budget
        if value is None:
            value = self.explorer.dtr_default(st, self._progress)
        self._busy = True
        try:
            slider.min = min(low, float(value))
            slider.value = float(value)
        finally:
            self._busy = False
        self._budget_for, self._explicit_budget = key, None
        return self.state

    def _sync_swap(self, st: WidgetState) -> WidgetState:
        """With swap on, a new graph (or order, alignment: a new minimum) puts the swap
        slider at the budget asked for, else at the lowest swapping reaches with this
        planner (`MemoryExplorer.swap_default`); another planner or link keeps it."""
        key = self.explorer._dkey(st)
        if not st.swap or key == self._swap_for:
            return st
        value = self._explicit_swap
        if value is None:
            try:
                value = self.explorer.swap_default(st)
            except SwapError:     # swapping reaches no budget here: compute says why
                return st.replace(swap_budget=None)
        slider = self.controls["swap_budget"]
        self._busy = True
        try:
            slider.max = max(1.0, float(value))
            slider.min = min(0.05, float(value))
            slider.value = float(value)
        finally:
            self._busy = False
        self._swap_for, self._explicit_swap = key, None
        return self.state

    def refresh(self) -> None:
        """Re-plan for the current controls and redraw everything; the busy bar shows
        meanwhile. An error is shown where the student is looking, not raised."""
        st = self.state
        self.controls["batch"].disabled = st.model == CUSTOM
        self.controls["dtr_budget"].disabled = not st.dtr
        self.controls["swap_budget"].disabled = not st.swap
        self.controls["dtr_evict"].disabled = not st.dtr
        self.controls["link"].disabled = not _uses_link(st)
        self._set_busy(True, st.describe())
        try:
            st = self._sync_budget(st)
            st = self._sync_swap(st)
            result = self.explorer.compute(st, self._progress)
            self._progress(0, 1, "drawing")
            figs = MemoryExplorer.figures(result)
            pngs = {k: figure_bytes(f) for k, f in figs.items()}
        except Exception as e:        # show it where the student is looking
            self.message.value = (f"<span style='color:#b00; {WRAP}'>{type(e).__name__}: "
                                  f"{html.escape(str(e))}</span>")
            self._set_busy(False)
            return
        self.result = result
        self.message.value = "".join(
            f"<div style='color:#b00000; {WRAP}'>{html.escape(m)}</div>"
            for m in result.messages)
        for k, img in self.images.items():
            if k in pngs:
                img.value = pngs[k]
            img.layout.display = None if k in pngs else "none"
        self.headline_html.value = (
            f"<div style='{WRAP}'><b>{html.escape(result.headline)}</b></div>"
            + "".join(f"<div class='mg-note' style='color:#555; {WRAP}'>{html.escape(n)}"
                      f"</div>" for n in result.notes))
        self._set_busy(False)
        # Last, so that a changed caption means everything above is redrawn.
        self.caption.value = (f"<div style='color:#555; font-size: 90%; {WRAP}'>"
                              f"{html.escape(result.caption)}</div>")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The live widget, and beside it a PNG of the same pictures (for exports)."""
        data = super()._repr_mimebundle_(**kwargs) or {}
        if self.result is not None:
            fig = MemoryExplorer.summary_figure(self.result)
            data["image/png"] = base64.b64encode(figure_bytes(fig, dpi=72)).decode()
            data["text/plain"] = f"memory_widget: {self.result.headline}"
        return data


def _uses_link(st: WidgetState) -> bool:
    """The link matters: swap is on, or DTR is on and swaps its victims."""
    return st.swap or (st.dtr and st.dtr_evict != "drop")


def check_offered(explorer: MemoryExplorer, state: WidgetState,
                  names: Any = None, where: str = "memory_widget") -> None:
    """Every control's value is one its dropdown offers (a dropdown takes no other value);
    else ArgumentError naming the control, the value and the closest offered name."""
    for name, offered in explorer.choices().items():
        value = getattr(state, name)
        if (names is None or name in names) and value not in offered:
            hint = did_you_mean(value, offered) if isinstance(value, str) else ""
            raise ArgumentError(f"{where}: {name}={_short(value)} is not offered{hint}; "
                                f"{name} is one of {', '.join(map(str, offered))}")


def memory_widget(graph_or_model: Graph | str | Any = None, batch: int | None = None,
                  **controls: Any):
    """A widget with a toggle for every memory technique on `graph_or_model` (a Graph, a
    zoo Model or a model name). Keywords set the controls' first values, e.g.
    `memory_widget("resnet", batch=4, planner="ge", order="ge", dtr=True)`; later cells
    move them with `widget.set(...)` (see `MemoryWidget`)."""
    explorer = MemoryExplorer(graph_or_model, batch)
    state = explorer.initial.replace(**controls) if controls else explorer.initial
    check_offered(explorer, state)
    if w is None:
        raise ImportError("memory_widget needs ipywidgets and matplotlib: "
                          "pip install 'minigraph[lab]'")
    return MemoryWidget(explorer, state)
