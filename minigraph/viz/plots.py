"""Pictures of a memory plan: a timeline, a layout, a comparison. Each returns a Figure.

The plots read plans, reports and rows; they never plan. Three pictures:

- `plot_timeline`: bytes alive at each step, stacked by kind (PyTorch memory_viz's
  "Active Memory Timeline" in spirit), with the no-reuse curve, this plan's arena and the
  theoretical minimum as lines.
- `plot_layout`: every planned tensor as a rectangle, x = its life, y = its offset in the
  arena: the 2D strip-packing picture of Chainer-Opt [Sekiyama 2018, fig. 1].
  `plot_placement(buffers, offsets)` draws the same picture for a bare buffer problem
  (the source articles' worked examples, DSA instances).
- `plot_comparison`: bytes per technique, the saving written on each bar, from the rows
  of `minigraph.experiments.techniques.compare_techniques`; `plot_dtr_sweep` draws DTR's
  sweep rows (`minigraph.experiments.techniques.dtr_sweep`).

The numbers behind each picture are plain data too (`timeline`, `layout_rects`), which is
what the tests check. Figures are `matplotlib.figure.Figure`s (no pyplot state), saved as
PNG or SVG, so they show on GitHub and nbviewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import PlanError, PlanTypeError
from ..experiments.techniques import TechniqueRow
from ..graph import Graph, fmt_bytes
from ..memory.api import MemoryReport
from ..memory.buffers import Buffer, arena_size, live_bytes_per_step, theoretical_minimum
from ..memory.plan import MemoryPlan
from ..ops.registry import workspace_of

# Bands of the timeline, bottom to top: what is never reused, then what planning shares.
BANDS = ("parameters & inputs", "outputs", "activations", "gradients", "workspace")
KIND_BAND = {"param": "parameters & inputs", "input": "parameters & inputs",
             "const": "parameters & inputs", "output": "outputs",
             "activation": "activations", "gradient": "gradients"}
COLORS = {"parameters & inputs": "#9e9e9e", "outputs": "#6a3d9a", "activations": "#1f77b4",
          "gradients": "#ff7f0e", "workspace": "#2ca02c"}

FAMILY_COLORS = {"baseline": "#9e9e9e", "in-place": "#8c564b", "block": "#1f77b4",
                 "offset": "#2ca02c", "colouring": "#9467bd", "dynamic": "#d62728"}


# ---------------------------------------------------------------------------------------
# Units
# ---------------------------------------------------------------------------------------

def byte_unit(n: float) -> tuple[str, float]:
    """The unit to label an axis whose largest value is `n` bytes: (name, divisor).
    Below 16 KiB plain bytes (the source articles' worked examples quote bytes)."""
    if n < 16 * 2 ** 10:
        return "B", 1.0
    for name, div in (("GiB", 2.0 ** 30), ("MiB", 2.0 ** 20)):
        if n >= div:
            return name, div
    return "KiB", 2.0 ** 10


UNIT_DIV = {"B": 1.0, "KiB": 2.0 ** 10, "MiB": 2.0 ** 20, "GiB": 2.0 ** 30}


def fmt_in(n: float, unit: str) -> str:
    """`n` bytes written in `unit` (one of UNIT_DIV), so every number in one figure
    shares its axis's unit: "8704 B", "1.64 MiB", "0.341 MiB" (powers of two; three
    decimals below one unit, where two would blur neighbouring bars)."""
    if unit == "B":
        return f"{n:.0f} B"
    v = n / UNIT_DIV[unit]
    return f"{v:.{2 if v >= 1 or v == 0 else 3}f} {unit}"


def _check_unit(unit: str) -> str:
    if unit not in UNIT_DIV:
        raise PlanError(f"unit must be one of {', '.join(UNIT_DIV)}, not {unit!r}")
    return unit


def _plain_ticks(axis: Any) -> None:
    """Tick labels as plain numbers of the axis's unit: no "1e7" offset, no exponent."""
    from matplotlib.ticker import FuncFormatter
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))


def _new_axes(ax: Any, size: tuple[float, float]) -> tuple[Any, Any]:
    """A fresh Figure (not registered with pyplot: nothing leaks, nothing pops up) or `ax`'s."""
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure
    _show_figures_in_notebooks()
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def _show_figures_in_notebooks() -> None:
    """In IPython, make a returned Figure display as a PNG even when pyplot (whose inline
    backend usually registers that) was never imported."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    from matplotlib.figure import Figure
    png = ip.display_formatter.formatters["image/png"]
    try:
        png.lookup_by_type(Figure)
    except KeyError:
        def to_png(fig: Any) -> bytes:
            import io
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=80)
            return buf.getvalue()
        png.for_type(Figure, to_png)


_show_figures_in_notebooks()   # at import too: figures a lesson makes itself display as well


def _as_plan(report_or_plan: MemoryReport | MemoryPlan) -> tuple[MemoryPlan, MemoryReport | None]:
    if isinstance(report_or_plan, MemoryReport):
        return report_or_plan.plan, report_or_plan
    if isinstance(report_or_plan, MemoryPlan):
        return report_or_plan, None
    raise PlanTypeError(f"expected a MemoryReport or MemoryPlan, not "
                        f"{type(report_or_plan).__name__} {repr(report_or_plan)[:60]}"
                    " (mg.plan_memory(graph, options) makes one)")


# ---------------------------------------------------------------------------------------
# Timeline
# ---------------------------------------------------------------------------------------

@dataclass
class Timeline:
    """Bytes per step, the data behind `plot_timeline` (every number comes from the plan).

    `bands[label][t]`: bytes of that kind alive at step t; an in-place hand-over counts
    once (the output takes the input's bytes at the step that overwrites it).
    `base[t]`: bytes never planned (parameters, inputs, outputs): the lines sit on it.
    `no_reuse[t]`: planned bytes allocated by step t if nothing were ever freed.
    """
    steps: int
    bands: dict[str, list[int]]
    base: list[int]
    planned_live: list[int]
    no_reuse: list[int]
    minimum: int
    arena: int
    schedule: tuple[str, ...] = ()

    @property
    def peak_step(self) -> int:
        return max(range(self.steps), key=lambda t: self.planned_live[t]) if self.steps else 0

    @property
    def total(self) -> list[int]:
        return [sum(b[t] for b in self.bands.values()) for t in range(self.steps)]


def timeline(report_or_plan: MemoryReport | MemoryPlan, graph: Graph | None = None) -> Timeline:
    """The numbers `plot_timeline` draws; `graph` adds each op's declared workspace. A
    swap plan's swapped tensors count on the device in their front and back only."""
    plan, report = _as_plan(report_or_plan)
    live = plan.liveness
    steps = live.steps
    handed = {x: live.intervals[y].start for x, y in plan.inplace}
    swapped = {sw.tensor: sw for sw in getattr(plan, "swaps", ())}   # a SwapPlan's
    per_band: dict[str, list[Buffer]] = {b: [] for b in BANDS}
    planned: list[Buffer] = []
    for iv in live.intervals.values():
        band = KIND_BAND.get(iv.kind)
        if band is None or not iv.bytes:
            continue
        end = iv.end
        if iv.name in handed:                 # its bytes belong to the in-place output
            end = handed[iv.name] - 1
            if end < iv.start:
                continue
        sw = swapped.get(iv.name)          # a swapped tensor: its front and its back
        parts = [Buffer(iv.name, iv.start, end, iv.bytes)] if sw is None else \
            [Buffer(iv.name, iv.start, sw.until, iv.bytes),
             Buffer(sw.back_id, sw.back, end, iv.bytes)]
        per_band[band] += parts
        if iv.planned:
            planned += parts
    bands = {name: live_bytes_per_step(bufs, steps) for name, bufs in per_band.items()}
    if graph is not None:
        bands["workspace"] = [workspace_of(graph, graph.node(n)) for n in live.schedule]
    bands = {k: v for k, v in bands.items() if any(v)}
    base = [sum(bands.get(b, [0] * steps)[t] for b in ("parameters & inputs", "outputs"))
            for t in range(steps)]
    planned_live = live_bytes_per_step(planned, steps)
    started = [0] * (steps + 1)
    for iv in live.planned():
        started[iv.start] += iv.bytes
    no_reuse, acc = [], 0
    for t in range(steps):
        acc += started[t]
        no_reuse.append(acc)
    minimum = report.theoretical_minimum if report is not None else max(planned_live, default=0)
    return Timeline(steps, bands, base, planned_live, no_reuse, minimum, plan.arena_bytes,
                    tuple(live.schedule))


# What the timeline says about each band: in the arena (planned) or outside it.
BAND_NOTE = {"activations": "in the arena", "gradients": "in the arena",
             "workspace": "beside the arena: per op, while it runs",
             "outputs": "outside: own buffers", "parameters & inputs": "outside: own buffers"}
PLANNED_BANDS = ("activations", "gradients")


def plot_timeline(report_or_plan: MemoryReport | MemoryPlan, graph: Graph | None = None,
                  ax: Any = None, title: str | None = None, legend: bool = True, *,
                  minimum: int | None = None, outside: bool = True, unit: str | None = None):
    """Bytes alive per step: what the arena holds below its line, what is not planned above.

    From the bottom: activations and gradients, the planned tensors, in the arena; the
    dashed line is the theoretical minimum (`minimum` overrides the report's, so one view
    shows one minimum), the red line this plan's arena, the dotted curve what no reuse
    would hold. Every line sits at the height its label states. Above the arena line
    (`outside=True`): what has buffers of its own or is scratch (parameters, inputs,
    outputs, each op's workspace), so the top of the stack is the device's total.
    `unit` ("B", "KiB", "MiB", "GiB") fixes the unit, so the figures of one view share it.
    Returns the Figure.
    """
    tl = timeline(report_or_plan, graph)
    fig, ax = _new_axes(ax, (9, 3.8))
    minimum = tl.minimum if minimum is None else int(minimum)
    xs = list(range(tl.steps))
    zero = [0] * tl.steps
    out_bands = [b for b in tl.bands if b not in PLANNED_BANDS] if outside else []
    beyond = [sum(tl.bands[b][t] for b in out_bands) for t in range(tl.steps)]
    top = max([tl.arena + x for x in beyond] + tl.no_reuse + tl.planned_live +
              [minimum, tl.arena, 1])
    unit, div = (unit, UNIT_DIV[_check_unit(unit)]) if unit else \
        byte_unit(max(tl.arena, minimum, 1))

    def stack(names: Sequence[str], floor: float) -> None:
        lower = [floor / div] * tl.steps
        for band in names:
            upper = [lo + v / div for lo, v in zip(lower, tl.bands.get(band, zero))]
            inside = band in PLANNED_BANDS
            ax.fill_between(xs, lower, upper, step="mid", color=COLORS.get(band, "#8c8c8c"),
                            alpha=0.8 if inside else 0.45, linewidth=0,
                            hatch=None if inside else "..",
                            label=f"{band} ({BAND_NOTE.get(band, 'outside')})",
                            gid=f"band:{band}")
            lower = upper

    stack([b for b in PLANNED_BANDS if b in tl.bands], 0)
    order = [b for b in ("workspace", "outputs", "parameters & inputs") if b in out_bands]
    stack(order + [b for b in out_bands if b not in order], tl.arena)
    end = tl.no_reuse[-1] if tl.no_reuse else 0
    ax.step(xs, [n / div for n in tl.no_reuse], where="mid", color="black", linestyle=":",
            linewidth=1.4, label=f"no reuse (never freed) {fmt_in(end, unit)} at the end",
            gid="no-reuse")
    ax.axhline(tl.arena / div, color="#d62728", linewidth=1.6,
               label=f"this plan's arena {fmt_in(tl.arena, unit)}", gid="arena")
    ax.axhline(minimum / div, color="black", linestyle="--", linewidth=1.2,
               label=f"theoretical minimum {fmt_in(minimum, unit)}", gid="minimum")
    if tl.steps:
        ax.axvline(tl.peak_step, color="black", alpha=0.25, linewidth=0.8)
    ax.set_xlim(-0.5, max(tl.steps - 0.5, 0.5))
    _integer_ticks(ax.xaxis)
    ax.set_ylim(0, top / div * 1.08)
    _plain_ticks(ax.yaxis)
    ax.set_xlabel("step (position in the schedule)")
    ax.set_ylabel(f"bytes ({unit})")
    ax.set_title(title or "Bytes alive per step: the arena below the red line")
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
                  frameon=False, title="planned: activations, gradients\n"
                  "not planned: parameters, inputs, outputs\n(outside: own buffers), workspace",
                  title_fontsize="small", alignment="left")
    return fig


# ---------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rect:
    """One tensor in the arena: steps [start, end] inclusive, bytes [offset, offset+size)."""
    name: Any
    start: int
    end: int
    offset: int
    size: int
    kind: str = "buffer"
    inplace_of: Any = None
    block: int = -1          # tensors whose byte ranges overlap (transitively) share a block
    swap: str = ""           # a swapped tensor's "front" (until its offload) or "back"


def _number_blocks(rects: list[Rect]) -> list[Rect]:
    """Give tensors whose byte ranges overlap (transitively) one block number; a tensor
    with bytes of its own keeps -1. A sweep by offset: O(n log n)."""
    rects = sorted(rects, key=lambda r: (r.offset, r.start))
    parent = list(range(len(rects)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    reach, owner = -1, -1
    for i, r in enumerate(rects):
        if r.offset < reach:
            parent[find(i)] = find(owner)
        if r.offset + r.size > reach:
            reach, owner = r.offset + r.size, i
    count: dict[int, int] = {}
    for i in range(len(rects)):
        count[find(i)] = count.get(find(i), 0) + 1
    number: dict[int, int] = {}
    out = []
    for i, r in enumerate(rects):
        root = find(i)
        block = number.setdefault(root, len(number)) if count[root] > 1 else -1
        out.append(replace(r, block=block))
    return out


def layout_rects(plan: MemoryPlan | MemoryReport) -> list[Rect]:
    """The rectangles of `plot_layout`, in offset order; `block` -1 means bytes of its own.
    A swap plan's swapped tensor is two: its front (`swap="front"`, until its offload
    has finished) and its back (`"back"`, named `tensor@back`, from its prefetch)."""
    plan, _ = _as_plan(plan)
    inplace_of = {y: x for x, y in plan.inplace}
    swapped = {sw.tensor: sw for sw in getattr(plan, "swaps", ())}   # a SwapPlan's
    rects = []
    for iv in plan.liveness.planned():
        if not iv.bytes:
            continue
        sw = swapped.get(iv.name)
        if sw is None:
            rects.append(Rect(iv.name, iv.start, iv.end, plan.offsets[iv.name], iv.bytes,
                              iv.kind, inplace_of.get(iv.name)))
        else:                                 # the split interval: two rectangles
            rects += [Rect(iv.name, iv.start, sw.until, plan.offsets[iv.name], iv.bytes,
                           iv.kind, swap="front"),
                      Rect(sw.back_id, sw.back, iv.end, plan.back_offsets[iv.name],
                           iv.bytes, iv.kind, swap="back")]
    return _number_blocks(rects)


def placement_rects(buffers: Sequence[Buffer], offsets: Any) -> list[Rect]:
    """Rectangles of a bare buffer problem (`offsets`: a dict or a `Placement`)."""
    offsets = getattr(offsets, "offsets", offsets)
    return _number_blocks([Rect(b.id, b.start, b.end, int(offsets[b.id]), b.size)
                           for b in buffers if b.size])


def plot_layout(plan: MemoryPlan | MemoryReport, ax: Any = None, color_by: str = "kind",
                labels: int = 24, title: str | None = None, legend: bool = True, *,
                minimum: int | None = None, unit: str | None = None,
                zoom: tuple[int, int] | None = None):
    """Every planned tensor as a rectangle: x = its life (steps), y = its bytes in the arena.

    `color_by="kind"` colours activations and gradients; `"block"` gives each shared
    block its own colour (tensors with bytes of their own stay grey); `"buffer"` one
    colour per tensor. In-place outputs are
    hatched and joined to their input by an arrow. The arena top and the theoretical
    minimum (`minimum` overrides the report's) are lines: the gap between them is what
    this layout wastes. At most `labels` names are written, each only where it fits
    inside its rectangle. `unit` fixes the axis's unit (else `byte_unit` picks one).
    `zoom=(lo, hi)` shows the addresses from lo to hi bytes only: a small tensor next to
    a large one becomes visible (the title says that it is a zoom).
    """
    plan_, report = _as_plan(plan)
    rects = layout_rects(plan_)
    if minimum is None:
        minimum = report.theoretical_minimum if report is not None else \
            max(live_bytes_per_step(plan_.buffers(), plan_.liveness.steps), default=0)
    shared = sum(1 for r in rects if r.block >= 0)
    title = title or (f"Layout ({plan_.planner}): {len(rects)} tensors, {shared} share "
                      f"bytes, {len(plan_.inplace)} in place")
    if getattr(plan_, "swaps", None) and "swapped" not in title:
        title += f", {len(plan_.swaps)} swapped (front and back each)"
    if zoom is not None:
        title += f"; addresses {fmt_bytes(zoom[0])} to {fmt_bytes(zoom[1])} only"
    return draw_rects(rects, plan_.arena_bytes, minimum, plan_.liveness.steps, ax=ax,
                      color_by=color_by, labels=labels, title=title, legend=legend,
                      unit=unit, zoom=zoom)


def plot_placement(buffers: Sequence[Buffer], offsets: Any, ax: Any = None,
                   title: str | None = None, color_by: str = "block", labels: int = 24,
                   legend: bool = True, *, unit: str | None = None):
    """A bare buffer problem and its offsets as Chainer-Opt's strip-packing picture [Sekiyama 2018]
    (the worked examples and DSA instances, which have no graph). `offsets`: dict or Placement.
    `unit` ("B", "KiB", "MiB", "GiB") fixes the unit, so panels side by side share one."""
    offsets = getattr(offsets, "offsets", offsets)
    rects = placement_rects(buffers, offsets)
    steps = max((b.end for b in buffers), default=0) + 1
    arena = arena_size(buffers, offsets)
    minimum = theoretical_minimum(buffers)
    unit = _check_unit(unit) if unit else byte_unit(max(arena, minimum, 1))[0]
    return draw_rects(rects, arena, minimum, steps, ax=ax,
                      color_by=color_by, labels=labels, legend=legend, unit=unit,
                      title=title or f"{len(rects)} buffers, arena {fmt_in(arena, unit)}")


def draw_rects(rects: Sequence[Rect], arena: int, minimum: int, steps: int, ax: Any = None,
               color_by: str = "kind", labels: int = 24, title: str = "",
               legend: bool = True, *, unit: str | None = None,
               zoom: tuple[int, int] | None = None):
    """The drawing behind `plot_layout` and `plot_placement`: rectangles, arena top and
    theoretical minimum, in `unit` (else the one `byte_unit` picks); steps on x are whole
    numbers; `zoom` (bytes from, to) shows that range of addresses only. Returns the
    Figure."""
    import matplotlib
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle

    if color_by not in ("kind", "block", "buffer"):
        raise ValueError(f"color_by must be 'kind', 'block' or 'buffer', not {color_by!r}")
    fig, ax = _new_axes(ax, (9, 4.2))
    top = max(arena, minimum, 1)
    unit, div = (unit, UNIT_DIV[_check_unit(unit)]) if unit else byte_unit(top)
    cmap = matplotlib.colormaps["tab20"]

    index = {r.name: k for k, r in enumerate(sorted(rects, key=lambda r: (r.start, r.offset)))}

    def face(r: Rect) -> Any:
        if color_by == "kind":
            return COLORS.get(KIND_BAND.get(r.kind, ""), "#4c9be8")
        if color_by == "buffer":
            return cmap(index[r.name] % 20)
        return cmap(r.block % 20) if r.block >= 0 else "#d0d0d0"

    plain = [r for r in rects if r.inplace_of is None and not r.swap]
    for group, hatch, gid in ((plain, None, "tensors"),
                              ([r for r in rects if r.inplace_of is not None], "///",
                               "inplace"),
                              ([r for r in rects if r.swap], "\\\\", "swapped")):
        if not group:
            continue
        patches = [Rectangle((r.start - 0.45, r.offset / div), r.end - r.start + 0.9,
                             r.size / div) for r in group]
        ax.add_collection(PatchCollection(patches, facecolors=[face(r) for r in group],
                                          edgecolors="black", linewidths=0.4, alpha=0.85,
                                          hatch=hatch, gid=gid))
    by_name = {r.name: r for r in rects}
    for r in rects:
        if r.inplace_of is not None and r.inplace_of in by_name:
            x = by_name[r.inplace_of]
            ax.annotate("", xy=(r.start, (r.offset + r.size / 2) / div),
                        xytext=(x.end - 0.4, (x.offset + x.size / 2) / div),
                        arrowprops={"arrowstyle": "->", "color": "black", "lw": 0.8},
                        annotation_clip=True).set_in_layout(False)
    steps = max(steps, 1)
    _name_rects(ax, rects, labels, steps, top / div * 1.12, div)
    ax.axhline(arena / div, color="#d62728", linewidth=1.6,
               label=f"arena top {fmt_in(arena, unit)}", gid="arena")
    ax.axhline(minimum / div, color="black", linestyle="--", linewidth=1.2,
               label=f"theoretical minimum {fmt_in(minimum, unit)}", gid="minimum")
    kinds = sorted({r.kind for r in rects})
    if color_by == "kind":
        handles = [Patch(facecolor=COLORS.get(KIND_BAND.get(k, ""), "#4c9be8"), label=k)
                   for k in kinds]
    elif color_by == "buffer":
        handles = [Patch(facecolor=cmap(0), label="one colour per buffer")]
    else:
        handles = [Patch(facecolor="#d0d0d0", label="bytes of its own"),
                   Patch(facecolor=cmap(0), label="shared block (one colour each)")]
    if any(r.inplace_of is not None for r in rects):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                             label="in place of its input"))
    if any(r.swap for r in rects):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="\\\\",
                             label="swapped: front until its offload,\nback from its "
                                   "prefetch (name@back)"))
    line_handles, _ = ax.get_legend_handles_labels()
    if legend:
        ax.legend(handles=[*line_handles, *handles], loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    ax.set_xlim(-0.5, steps - 0.5)
    _integer_ticks(ax.xaxis)
    if zoom is not None:
        ax.set_ylim(zoom[0] / div, zoom[1] / div)
    else:
        ax.set_ylim(0, top / div * 1.12)
    _plain_ticks(ax.yaxis)
    ax.set_xlabel("step (life of each tensor, inclusive)")
    ax.set_ylabel(f"offset in the arena ({unit})")
    ax.set_title(title)
    return fig


LABEL_FONT = 7            # points; the names written inside layout rectangles


def _integer_ticks(axis: Any) -> None:
    """Steps are whole numbers: ticks only there (a 3-step schedule gets 0, 1, 2, not
    -0.5 and 0.5)."""
    from matplotlib.ticker import MaxNLocator
    axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def _name_rects(ax: Any, rects: Sequence[Rect], limit: int, steps: int, ymax: float,
                div: float) -> None:
    """Write the names of the largest rectangles (the ones a reader finds again in
    plan.table()), only those whose name fits inside the rectangle at the axes' size:
    a dense plan gets fewer names, never overlapping ones. Each is clipped to its box."""
    from matplotlib.patches import Rectangle
    fig = ax.figure
    w_in, h_in = fig.get_size_inches()
    box = ax.get_position()
    # the legend outside on the right takes about a quarter of the width
    ax_w, ax_h = 0.75 * w_in * box.width * 72, 0.9 * h_in * box.height * 72   # points
    written = 0
    for r in sorted(rects, key=lambda r: -(r.end - r.start + 1) * r.size):
        if written >= limit:
            break
        name = str(r.name)
        width = (r.end - r.start + 0.9) / (steps + 0.0) * ax_w
        height = r.size / div / ymax * ax_h
        if len(name) * 0.6 * LABEL_FONT + 2 > width or 1.3 * LABEL_FONT > height:
            continue
        clip = Rectangle((r.start - 0.45, r.offset / div), r.end - r.start + 0.9,
                         r.size / div, transform=ax.transData)
        text = ax.text((r.start + r.end) / 2, (r.offset + r.size / 2) / div, name,
                       ha="center", va="center", fontsize=LABEL_FONT, gid=f"name:{name}")
        text.set_clip_path(clip)
        text.set_in_layout(False)
        written += 1


# ---------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------

FAILED_HATCH = "xx"       # a run that did not finish: a hatched, empty bar, no saving


WORKSPACE_COLOR = "#d9d9d9"   # the workspace beside a static plan's arena, on its bar


def plot_comparison(rows: Sequence[TechniqueRow], ax: Any = None, title: str | None = None,
                    *, minimum: int | None = None, unit: str | None = None,
                    quantity: str | None = None):
    """Horizontal bars of bytes per technique, the saving against no reuse on each bar, and
    the floor as a dashed line, every bar in one quantity (`minigraph/memory/footprint.py`),
    named on the axis:

    - `quantity="arena"` (the default without a DTR row): the planned tensors' bytes,
      against the theoretical minimum;
    - `quantity="working"` (the default with one): arena + workspace. A static plan's bar
      is its arena (solid) and the largest op's workspace, which the executor takes beside
      it (light grey); DTR's bar is its budget, which holds both in one range. The dashed
      line is the working minimum, below which only recomputation goes.

    `minimum` where the caller has one (one view, one minimum), else the lowest among the
    static rows (in-place only lowers it). A row whose `status` is not "ok" (a DTR run
    that thrashed, got stuck or was below its smallest budget) is a hatched, empty bar at
    the budget it was given, labelled with its status and "no saving". `unit` fixes the
    axis's unit (else `byte_unit` picks one), so the figures of one view share it."""
    import textwrap
    if not rows:
        raise ValueError("plot_comparison needs at least one row (compare_techniques makes them)")
    if quantity is None:
        quantity = "working" if any(r.shared for r in rows) else "arena"
    if quantity not in ("arena", "working"):
        raise ValueError(f"quantity must be 'arena' or 'working', not {quantity!r}")
    if quantity == "arena" and any(r.shared for r in rows):
        raise ValueError("a DTR row holds tensors and workspace in one budget: draw it with "
                         "quantity='working'")
    working = quantity == "working"

    def size(r: TechniqueRow) -> int:
        return r.working if working else r.bytes

    fig, ax = _new_axes(ax, (9, 1.1 + 0.36 * len(rows)))
    base = [r.no_reuse_bytes + (r.workspace if working else 0) for r in rows]
    top = max(max(size(r) for r in rows), max(base), 1)
    unit, div = (unit, UNIT_DIV[_check_unit(unit)]) if unit else byte_unit(top)
    ys = list(range(len(rows)))[::-1]
    colors = [FAMILY_COLORS.get(r.family, "#1f77b4") for r in rows]
    bars = ax.barh(ys, [(r.working if r.shared else r.bytes) / div for r in rows],
                   color=colors, alpha=0.85, gid="bars")
    if working:
        ax.barh([y for y, r in zip(ys, rows) if not r.shared],
                [r.workspace / div for r in rows if not r.shared],
                left=[r.bytes / div for r in rows if not r.shared], color=WORKSPACE_COLOR,
                edgecolor="#9e9e9e", linewidth=0.5, gid="workspace")
    for y, r, bar, color, b in zip(ys, rows, bars, colors, base):
        if r.status != "ok":
            bar.set_facecolor("white")
            bar.set_edgecolor(color)
            bar.set_hatch(FAILED_HATCH)
            bar.set_gid(f"{r.technique}:{r.status}")
            text, gid = f"{r.status}: no saving", f"status:{r.technique}:{r.status}"
        else:
            saved = 100.0 * (b - size(r)) / b if b else 0.0
            text = "baseline" if r.technique == "none" else f"-{saved:.1f}%"
            if r.note and r.family == "dynamic":
                text += f" ({r.note})"
            gid = f"saving:{r.technique}"
        ax.text(size(r) / div + top / div * 0.01, y, f"{fmt_in(size(r), unit)}  {text}",
                va="center", fontsize=8, gid=gid,
                color="#b00000" if r.status != "ok" else "black")
    static = [r for r in rows if r.family != "dynamic"] or list(rows)
    if minimum is None:
        # The lowest minimum among the rows bounds every static row (in-place only lowers it).
        minimum = min(r.working_minimum if working else r.theoretical_minimum for r in static)
    floor = "working minimum" if working else "theoretical minimum"
    ax.axvline(minimum / div, color="black", linestyle="--", linewidth=1.2,
               label=f"{floor} {fmt_in(minimum, unit)}", gid="minimum")
    # long labels wrap rather than squeeze the bars
    ax.set_yticks(ys, [textwrap.fill(r.label, 30, break_on_hyphens=False) for r in rows],
                  fontsize=8)
    ax.set_xlim(0, top / div * (1.6 if any(r.family == "dynamic" for r in rows) else 1.35))
    ax.set_ylim(-0.6, len(rows) - 0.4)
    _plain_ticks(ax.xaxis)
    if working:
        ax.set_xlabel(f"working memory ({unit}): arena (colour) + workspace (grey); DTR: one "
                      f"budget for both\ndashed: {floor} {fmt_in(minimum, unit)}")
        ax.set_title(title or "Working memory per technique (saving against no reuse)")
    else:
        ax.set_xlabel(f"arena: planned tensors ({unit}); dashed: {floor} "
                      f"{fmt_in(minimum, unit)}")
        ax.set_title(title or "Arena bytes per technique (saving against no reuse)")
    return fig


# ---------------------------------------------------------------------------------------
# DTR (the dynamic technique): a bar at one budget, and the sweep over budgets
# ---------------------------------------------------------------------------------------

def plot_dtr_sweep(rows: Sequence[Any], chosen: float | None = None, ax: Any = None,
                   title: str | None = None, *, chosen_status: str = "ok",
                   chosen_overhead: float | None = None):
    """Compute overhead against budget (the DTR paper's picture), the `chosen` ratio marked
    by a line; with `chosen_overhead` (its run finished) a diamond at that compute, with a
    `chosen_status` other than "ok" a large cross on the failed-run row at the top."""
    fig, ax = _new_axes(ax, (9, 3.2))
    ymax = None
    if chosen is not None and chosen_status == "ok" and chosen_overhead is not None:
        ok = [r.overhead for r in rows if r.status == "ok"]
        ymax = max([*ok, chosen_overhead]) * 1.05
    plot_sweep(rows, ax=ax, title=title or "DTR: compute paid for a smaller budget",
               ymax=ymax, legend=False)
    if chosen is not None:
        ax.axvline(chosen, color="#d62728", linewidth=1.2, label=f"budget {chosen:.0%}",
                   gid="chosen")
        if chosen_status == "ok" and chosen_overhead is not None:
            ax.plot([chosen], [chosen_overhead], "D", color="#d62728", ms=7, gid="dtr:ok",
                    label=f"this budget: compute x{chosen_overhead:.2f}")
        elif chosen_status != "ok":
            ax.plot([chosen], [FAILED_Y], "X", color="#b00000", ms=10, clip_on=False,
                    transform=ax.get_xaxis_transform(), gid=f"dtr:{chosen_status}",
                    label=f"this budget: {chosen_status}")
    _sweep_legend(ax)
    return fig


FAILED_Y = 0.97     # failed runs have no compute to plot: a row of crosses at the top
FAILED_LABEL = "x (top row): did not finish (thrashed, stuck or below the smallest budget)"


# One look per heuristic: ten colours that differ in hue, each with its own marker, so that
# nine lines stay apart in print and for colour-blind readers.
SWEEP_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
SWEEP_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">", "h")
SWEEP_LINES = ("-", "--")


def plot_sweep(rows: Sequence[Any], static: Sequence[Any] = (), ax: Any = None,
               title: str | None = None, ymax: float | None = None, *,
               legend: bool = True) -> Any:
    """Compute overhead against budget ratio, one line per heuristic (the DTR paper's
    figure [Kirisame 2021]) from `minigraph.experiments.dtr.sweep`'s rows, each with its
    own colour and marker; the legend sits outside the axes, right of the curves; the y
    axis reaches the dearest finished run (`ymax` may only raise it). A run that
    failed has no compute: it is an x on a row at the top of the axes (whatever its
    limits), with one legend entry saying so. `static`: StaticResults (sqrt(n),
    checkmate) drawn as points at the budget ratio each was given (`budget_ratio`), or
    at their peak where they have no budget. Returns the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    by: dict[str, list[Any]] = {}
    for r in rows:
        by.setdefault(r.heuristic, []).append(r)
    ok_vals = [r.overhead for r in rows if r.status == "ok"] + [s.overhead for s in static]
    top = max([ymax or 0.0, *(v * 1.05 for v in ok_vals)] or [2.0])
    for k, (h, rs) in enumerate(by.items()):
        rs = sorted(rs, key=lambda r: r.ratio)
        good = [r for r in rs if r.status == "ok"]
        line, = ax.plot([r.ratio for r in good], [r.overhead for r in good],
                        marker=SWEEP_MARKERS[k % len(SWEEP_MARKERS)], ms=5,
                        linestyle=SWEEP_LINES[k // len(SWEEP_MARKERS) % len(SWEEP_LINES)],
                        color=SWEEP_COLORS[k % len(SWEEP_COLORS)], label=h, gid=f"line:{h}")
        bad = [r for r in rs if r.status != "ok"]
        if bad:
            ax.plot([r.ratio for r in bad], [FAILED_Y] * len(bad), "x", ms=7, clip_on=False,
                    color=line.get_color(), transform=ax.get_xaxis_transform(),
                    gid=f"failed:{h}")
    if any(r.status != "ok" for r in rows):
        ax.add_line(Line2D([], [], marker="x", linestyle="", color="black",
                           label=FAILED_LABEL, gid="failed-legend"))
    markers = {"sqrt(n)": "s", "checkmate": "*"}
    of = rows[0].ratio_of if rows else "total"
    for s in static:
        x = s.budget_ratio if of == "total" else s.ratio
        ax.plot([x], [s.overhead], markers.get(s.method, "D"), ms=9, color="k",
                mfc="none" if s.method == "sqrt(n)" else "gold", label=s.method,
                gid=f"static:{s.method}")
    if legend:
        _sweep_legend(ax)
    ax.set_xlabel("budget ratio: (budget + outside) / total peak without rematerialisation"
                  if of == "total" else
                  "budget ratio: budget / working peak without rematerialisation")
    ax.set_ylabel("compute / base compute")
    ax.set_ylim(0.95, top * 1.08)          # room under the row of failed runs
    ax.invert_xaxis()
    if title or rows:
        ax.set_title(title or f"DTR on {rows[0].graph}")
    return ax


def _sweep_legend(ax: Any) -> None:
    """One legend entry per label (a heuristic's line, the failed runs, the budget),
    outside the axes on the right, so that it never hides a curve."""
    seen: dict[str, Any] = {}
    for hd, lb in zip(*ax.get_legend_handles_labels()):
        seen.setdefault(lb, hd)
    ax.legend(seen.values(), seen.keys(), fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False)


DTR_OUT_COLOR, DTR_IN_COLOR, DTR_HOST_COLOR = "#17becf", "#9467bd", "#8c564b"


def plot_dtr_timeline(trace: Any, ax: Any = None) -> Any:
    """One DTR run (a `DTRTrace`): the tensors resident after each op (its workspace
    already given back) against the runtime clock, with the budget (working memory:
    tensors and workspace) and the working peak without rematerialisation. A run that
    swapped (`DTROptions(evict="swap" | "cheaper")`, MegEngine's SWAP [MegEngine 2021])
    also shows each copy of `trace.transfers` at the clock it began (a down triangle:
    copy out to host memory; an up triangle: copy back), the host peak
    (`trace.host_peak`, `footprint.host`) as a line beside working memory, and in the
    title how many victims were swapped and how many dropped. Returns the Axes."""
    import matplotlib.pyplot as plt
    swapped = bool(getattr(trace, "transfers", []) or getattr(trace, "swapped", []))
    if ax is None:                     # a swapping run's legend goes beside the axes
        _, ax = plt.subplots(figsize=(9.5, 3), layout="constrained") if swapped else \
            plt.subplots(figsize=(7, 3))
    ys = [y for _, y in trace.timeline]
    host = getattr(trace, "host_peak", 0)
    unit, div = byte_unit(max([*ys, trace.budget, trace.peak, host, 1]))
    if trace.timeline:
        ax.step([x for x, _ in trace.timeline], [y / div for y in ys], where="post", lw=1,
                label="tensors resident after each op")
    ax.axhline(trace.budget / div, color="r", ls="--", lw=1,
               label=f"budget {fmt_in(trace.budget, unit)}", gid="budget")
    ax.axhline(trace.peak / div, color="gray", ls=":", lw=1,
               label=f"no-remat peak {fmt_in(trace.peak, unit)}", gid="peak")
    title = f"{trace.heuristic}: x{trace.overhead:.2f} compute"
    if swapped:
        _mark_dtr_transfers(ax, trace, unit, div)
        title += (f"; {len(trace.swapped)} swapped, "
                  f"{len(trace.evicted) - len(trace.swapped)} dropped")
    _plain_ticks(ax.yaxis)
    ax.set_xlabel("clock (cost units)")
    ax.set_ylabel(f"bytes ({unit})")
    ax.set_title(title)
    if swapped:                         # more entries: beside the axes
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    else:
        ax.legend(loc="upper right", fontsize=8)
    return ax


def _mark_dtr_transfers(ax: Any, trace: Any, unit: str, div: float) -> None:
    """`plot_dtr_timeline`'s swap marks: the host peak line, and each copy out (gid
    "dtr:out") and back ("dtr:in") at the clock it began, along the top of the axes."""
    ax.axhline(trace.host_peak / div, color=DTR_HOST_COLOR, ls="-.", lw=1.2, gid="host_peak",
               label=f"host peak {fmt_in(trace.host_peak, unit)} (swapped copies)")
    y = ax.get_ylim()[1] * 0.97
    for way, color, marker, words, moved in (
            ("out", DTR_OUT_COLOR, "v", "copy out", trace.bytes_out),
            ("in", DTR_IN_COLOR, "^", "copy back", trace.bytes_in)):
        xs = [clock for clock, kind, _, _ in trace.transfers if kind == way]
        ax.scatter(xs, [y] * len(xs), marker=marker, s=24, color=color, zorder=5,
                   gid=f"dtr:{way}", label=f"{words} ({len(xs)}; {fmt_in(moved, unit)})")
