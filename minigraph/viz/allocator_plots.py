"""Pictures of online allocation: what each allocator reserves, an arena over time, a
static plan of the same trace, and reserved against requested bytes. They draw the rows and
results they are given (`minigraph.experiments.allocators` and
`minigraph.memory.online.replay_allocator` make them).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from ..experiments.allocators import AllocatorRow, StaticPlan
from ..memory.online.base import AllocatorResult
from .plots import byte_unit, fmt_in


def plot_allocators(rows: Sequence[AllocatorRow], ax: Any = None, *, title: str | None = None,
                    exclude: Sequence[str] = ("no reuse",)) -> Any:
    """Reserved bytes over the minimum, one bar per method, grouped by (model, trace).
    `exclude` leaves methods out (no reuse by default: on a DTR trace, where every
    recomputation is a new tensor, it dwarfs the rest)."""
    import matplotlib.pyplot as plt
    groups: dict[tuple[str, str], list[AllocatorRow]] = {}
    for r in rows:
        if r.reserved is not None and r.method not in exclude:
            groups.setdefault((r.model, r.trace), []).append(r)
    methods: list[str] = []
    for g in groups.values():
        for r in g:
            if r.method not in methods:
                methods.append(r.method)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6, 0.9 * len(groups) * len(methods) / 3), 3.8))
    width = 0.8 / max(len(methods), 1)
    cmap = plt.get_cmap("tab20")
    for j, m in enumerate(methods):
        xs, ys = [], []
        for i, g in enumerate(groups.values()):
            r = next((r for r in g if r.method == m), None)
            if r is not None:
                xs.append(i + (j - (len(methods) - 1) / 2) * width)
                ys.append(r.ratio)
        ax.bar(xs, ys, width, label=m, color=cmap(j % 20))
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{m}\n{t}" for m, t in groups], fontsize=8)
    ax.set_ylabel("reserved / theoretical minimum")
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title or "what each method reserves for the same tensors")
    return ax


def _unit_of(top: int) -> str:
    """The unit of an address axis reaching `top` bytes (MiB, or KiB for tiny arenas)."""
    return "MiB" if top >= 2**20 else "KiB"


def _mib_axis(ax: Any, top: int) -> None:
    """Addresses on y in whole MiB (or KiB for tiny arenas), a handful of ticks."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator
    name = _unit_of(top)
    unit = 2**20 if name == "MiB" else 2**10
    span = top / unit
    step = next((k for k in (1, 2, 4, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000)
                 if span / k <= 8), 5000)
    ax.yaxis.set_major_locator(MultipleLocator(step * unit))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / unit:g}"))
    ax.set_ylim(0, top * 1.02)
    ax.set_xlabel("event")
    ax.set_ylabel(f"address ({name})")


def plot_arena(result: AllocatorResult, ax: Any = None, *, title: str | None = None,
               labels: bool = False) -> Any:
    """The arena over time: each live block a rectangle (events on x, addresses on y),
    each device segment an outline. The white inside the outlines is the fragmentation;
    the pieces of a stitched tensor share a colour."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.6))
    end = max(result.events, 1)
    cmap = plt.get_cmap("tab20")
    colour: dict[Hashable, Any] = {}
    for s in result.segment_rects:
        ax.add_patch(Rectangle((s.t0, s.addr), (s.t1 if s.t1 is not None else end) - s.t0,
                               s.size, fill=True, facecolor="#f4f4f4", edgecolor="grey",
                               lw=0.8))
    for r in result.rects:
        c = colour.setdefault(r.owner, cmap(len(colour) % 20))
        w = (r.t1 if r.t1 is not None else end) - r.t0
        ax.add_patch(Rectangle((r.t0, r.addr), max(w, 0.6), r.size, facecolor=c,
                               edgecolor="black", lw=0.3))
        if labels:
            ax.text(r.t0 + w / 2, r.addr + r.size / 2, str(r.owner), ha="center",
                    va="center", fontsize=6)
    top = max([s.addr + s.size for s in result.segment_rects] + [1])
    ax.set_xlim(0, end)
    _mib_axis(ax, top)
    u = _unit_of(top)
    rounded = result.peak_allocated != result.peak_requested
    ax.set_title(title or f"{result.name}: reserved {fmt_in(result.peak_reserved, u)},\n"
                 f"peak handed out {fmt_in(result.peak_allocated, u)}" +
                 (f" (requests rounded up; {fmt_in(result.peak_requested, u)} requested)"
                  if rounded else " (= requested)"), fontsize=9)
    return ax


def plot_static(plan: StaticPlan, ax: Any = None, *, labels: bool = False) -> Any:
    """A trace planned offline (`experiments.allocators.static_plan`: every lifetime known):
    the static planner's rectangles in the style of `plot_arena`, for a side-by-side
    picture."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.6))
    cmap = plt.get_cmap("tab20")
    colour: dict[Hashable, Any] = {}
    offsets = plan.placement.offsets
    top = max(plan.placement.arena_bytes, 1)
    ax.add_patch(Rectangle((0, 0), plan.events, top, facecolor="#f4f4f4", edgecolor="grey",
                           lw=0.8))
    for b in plan.buffers:
        c = colour.setdefault(b.id[0], cmap(len(colour) % 20))
        ax.add_patch(Rectangle((b.start, offsets[b.id]), max(b.end - b.start, 0.6), b.size,
                               facecolor=c, edgecolor="black", lw=0.3))
        if labels:
            ax.text((b.start + b.end) / 2, offsets[b.id] + b.size / 2, str(b.id[0]),
                    ha="center", va="center", fontsize=6)
    ax.set_xlim(0, max(plan.events, 1))
    _mib_axis(ax, top)
    ax.set_title(f"static {plan.planner}: arena {fmt_in(top, _unit_of(top))}", fontsize=9)
    return ax


def plot_allocator_timeline(results: Sequence[AllocatorResult], ax: Any = None) -> Any:
    """Reserved (solid) against requested (dashed) bytes after each event."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    top = max([h.reserved for r in results for h in r.history] + [1])
    unit, div = byte_unit(top)
    for k, r in enumerate(results):
        c = plt.get_cmap("tab10")(k % 10)
        ax.plot([h.reserved / div for h in r.history], color=c, label=f"{r.name} reserved")
    if results:
        ax.plot([h.requested / div for h in results[0].history], "k--", lw=1,
                label="requested (alive)")
    ax.set_xlabel("event")
    ax.set_ylabel(f"bytes ({unit})")
    ax.legend(fontsize=7)
    return ax
