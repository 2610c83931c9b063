"""A layout a student can explore: hover a block for its tensor, producing op, bytes, life
and offset; drag to zoom into a time range, or use the range slider under the picture
(what PyTorch's memory_viz offers for a CUDA trace, here for a plan).

Why plotly: its figures carry hover text and box / range-slider zoom in the browser with
no kernel behind them; JupyterLab (the `jupyterlab-plotly` renderer that ships in the
package) and VS Code draw them offline, nbviewer draws the HTML. Where no script runs
(GitHub's notebook preview, a notebook opened untrusted) or plotly is not installed,
the same output holds a static matplotlib PNG (`plots.plot_layout`), so there is always
a picture: `LayoutView._repr_mimebundle_` gives both, the HTML showing the PNG until
plotly has drawn over it (without plotly, the PNG alone). ipywidgets were not used: a
widget needs a live kernel.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from typing import Any

from ..errors import PlanError
from ..memory.api import MemoryReport
from ..memory.plan import MemoryPlan
from .plots import COLORS, KIND_BAND, _as_plan, byte_unit, fmt_in, layout_rects, plot_layout


def _plotly_cdn() -> str:
    """Where nbviewer fetches the plotly.js that matches the installed plotly."""
    from plotly.offline import get_plotlyjs_version
    return f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"


@dataclass(frozen=True)
class Block:
    """One planned tensor as the hover text shows it: steps [start, end] inclusive,
    bytes [offset, offset + bytes) of the arena; `op` is the node that produced it."""
    tensor: str
    op: str
    kind: str
    bytes: int
    start: int
    end: int
    offset: int
    inplace_of: str | None = None

    def hover(self, unit: str) -> str:
        """The text a pointer over this block shows (HTML line breaks, plotly's hover)."""
        over = f"<br>in place of {self.inplace_of}" if self.inplace_of else ""
        return (f"<b>{self.tensor}</b> ({self.kind})<br>op {self.op}<br>"
                f"{fmt_in(self.bytes, unit)} ({self.bytes} B)<br>"
                f"life: steps {self.start}-{self.end}<br>"
                f"offset {fmt_in(self.offset, unit)} ({self.offset} B){over}")


def layout_blocks(report_or_plan: MemoryReport | MemoryPlan) -> list[Block]:
    """The data behind the hover text, one Block per planned tensor, in offset order."""
    plan, _ = _as_plan(report_or_plan)
    schedule = plan.liveness.schedule
    graph = plan.graph

    def producer(name: str, start: int) -> str:
        node = None
        if graph is not None and name in graph.tensors and graph.tensors[name].producer:
            node = graph.node(graph.tensors[name].producer)
        if node is None:                     # a plan made by hand: its first step's node
            return schedule[start] if start < len(schedule) else "?"
        return node.op if node.name == node.op else f"{node.op} ({node.name})"

    return [Block(str(r.name), producer(r.name, r.start), r.kind, r.size, r.start, r.end,
                  r.offset, None if r.inplace_of is None else str(r.inplace_of))
            for r in layout_rects(plan)]


class LayoutView:
    """The explorable layout of a plan. In a notebook it shows itself: interactive where
    plotly runs, the static PNG elsewhere. `blocks` is the hover data, `figure` the plotly
    Figure (None without plotly), `png` the static picture's bytes."""

    def __init__(self, report_or_plan: MemoryReport | MemoryPlan, *,
                 minimum: int | None = None, steps: tuple[int, int] | None = None,
                 title: str | None = None):
        plan, report = _as_plan(report_or_plan)
        if steps is not None and not (len(steps) == 2 and all(
                isinstance(s, int) and not isinstance(s, bool) for s in steps)
                and 0 <= steps[0] <= steps[1]):
            raise PlanError(f"explore_layout: steps must be (first, last) steps with "
                            f"0 <= first <= last, not {steps!r}")
        self.plan = plan
        self.blocks = layout_blocks(plan)
        if minimum is None:
            minimum = report.theoretical_minimum if report is not None else \
                max((b.offset + b.bytes for b in self.blocks), default=0)
        self.minimum = int(minimum)
        self.arena = plan.arena_bytes
        self.unit, self.div = byte_unit(max(self.arena, self.minimum, 1))
        self.steps = steps
        self.title = title or (f"Layout ({plan.planner}): {len(self.blocks)} tensors, arena "
                               f"{fmt_in(self.arena, self.unit)}")
        self.png = self._static_png()
        self.figure = self._plotly_figure()

    def _static_png(self) -> bytes:
        """The matplotlib picture, zoomed to `steps` like the interactive one."""
        fig = plot_layout(self.plan, minimum=self.minimum, title=self.title)
        if self.steps is not None:
            fig.axes[0].set_xlim(self.steps[0] - 0.5, self.steps[1] + 0.5)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=80)
        return buf.getvalue()

    def _plotly_figure(self) -> Any:
        try:
            import plotly.graph_objects as go
        except ImportError:                        # the static picture is all there is
            return None
        fig = go.Figure()
        div, unit = self.div, self.unit
        groups: dict[tuple[str, bool], list[Block]] = {}
        for b in self.blocks:
            groups.setdefault((b.kind, b.inplace_of is not None), []).append(b)
        for (kind, inplace), bs in sorted(groups.items()):
            fig.add_trace(go.Bar(
                x=[(b.start + b.end) / 2 for b in bs], y=[b.bytes / div for b in bs],
                base=[b.offset / div for b in bs], width=[b.end - b.start + 0.9 for b in bs],
                name=kind + (" (in place of its input)" if inplace else ""),
                marker={"color": COLORS.get(KIND_BAND.get(kind, ""), "#4c9be8"),
                        "line": {"color": "black", "width": 0.5},
                        "pattern": {"shape": "/" if inplace else ""}},
                customdata=[[b.tensor, b.op, b.bytes, b.start, b.end, b.offset] for b in bs],
                hovertext=[b.hover(unit) for b in bs], hoverinfo="text"))
        last = max((b.end for b in self.blocks), default=0)
        for value, name, style in ((self.arena, "arena top", {"color": "#d62728"}),
                                   (self.minimum, "theoretical minimum",
                                    {"color": "black", "dash": "dash"})):
            fig.add_trace(go.Scatter(x=[-0.5, last + 0.5], y=[value / div] * 2, mode="lines",
                                     line=style, name=f"{name} {fmt_in(value, unit)}",
                                     hoverinfo="name"))
        fig.update_layout(barmode="overlay",
                          title=f"{self.title}<br><sup>hover a block for its tensor; "
                                "drag, or use the slider under the steps, to zoom</sup>",
                          hovermode="closest",
                          height=460, margin={"l": 60, "r": 20, "t": 80, "b": 40},
                          xaxis={"title": "step (life of each tensor, inclusive)",
                                 "rangeslider": {"visible": True},
                                 **({"range": [self.steps[0] - 0.5, self.steps[1] + 0.5]}
                                    if self.steps else {})},
                          yaxis={"title": f"offset in the arena ({unit})",
                                 "exponentformat": "none", "rangemode": "tozero"})
        return fig

    def to_html(self) -> str:
        """A self-contained HTML fragment: the static PNG, replaced by the interactive
        figure once plotly.js is there (already on the page, or fetched from its CDN)."""
        img = (f'<img alt="{self.title}" style="max-width:100%" '
               f'src="data:image/png;base64,{base64.b64encode(self.png).decode()}"/>')
        if self.figure is None:
            return f"<div>{img}</div>"
        uid = f"mg-layout-{id(self):x}"
        spec = self.figure.to_json().replace("</", "<\\/")    # no "</script>" inside
        cdn = _plotly_cdn()
        return (f'<div id="{uid}">{img}</div>\n<script type="text/javascript">\n(function() {{\n'
                f'  var spec = {spec};\n'
                f'  function draw(P) {{ var el = document.getElementById("{uid}");\n'
                f'    if (!el || !P) return; el.innerHTML = "";\n'
                f'    P.newPlot(el, spec.data, spec.layout, {{responsive: true}}); }}\n'
                f'  if (window.Plotly) {{ draw(window.Plotly); return; }}\n'
                f'  if (typeof window.require === "function" && window.define && '
                f'window.define.amd) {{\n'
                f'    window.require.config({{paths: {{plotly: "{cdn[:-3]}"}}}});\n'
                f'    window.require(["plotly"], draw); return; }}\n'
                f'  var s = document.createElement("script"); s.src = "{cdn}";\n'
                f'  s.onload = function() {{ draw(window.Plotly); }};\n'
                f'  document.head.appendChild(s);\n}})();\n</script>')

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                          **kw: Any) -> dict[str, Any]:
        """With plotly: plotly's own type (JupyterLab, VS Code: interactive offline) and
        HTML holding the PNG (nbviewer: interactive; GitHub: the PNG). Not a separate
        image/png then, since JupyterLab's plotly renderer would show that instead of
        the figure. Without plotly: the PNG."""
        if self.figure is None:
            return {"text/plain": repr(self), "image/png": base64.b64encode(self.png).decode()}
        return {"text/plain": repr(self),
                "application/vnd.plotly.v1+json": json.loads(self.figure.to_json()),
                "text/html": self.to_html()}

    def __repr__(self) -> str:
        return (f"LayoutView({len(self.blocks)} tensors, arena {fmt_in(self.arena, self.unit)},"
                f" theoretical minimum {fmt_in(self.minimum, self.unit)})")


def explore_layout(report_or_plan: MemoryReport | MemoryPlan, *, minimum: int | None = None,
                steps: tuple[int, int] | None = None, title: str | None = None) -> LayoutView:
    """The explorable layout of a plan (see the module docstring): hover a block for its
    tensor, op, bytes, life and offset; `steps=(a, b)` opens zoomed to steps a..b."""
    return LayoutView(report_or_plan, minimum=minimum, steps=steps, title=title)
