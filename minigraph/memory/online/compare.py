"""Every way to hold a graph's tensors, side by side: no reuse, the online allocators, the
static planners, and the theoretical minimum - for one schedule, and for DTR runs whose
recomputation breaks the single peak into many (seed 002, DSA-SA figure 2).

A static planner knows every lifetime in advance and packs the rectangles (time x bytes);
an online allocator places each tensor when asked and lives with the holes it leaves.
The gap between the two rows is the fragmentation this lesson is about.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...graph import Graph, _fmt_bytes
from ..buffers import Buffer, theoretical_minimum
from ..liveness import liveness
from ..orders import schedule as make_schedule
from .base import AllocatorResult
from .trace import Event, as_trace, trace_from_schedule

ONLINE = ("first-fit", "best-fit", "caching", "gmlake")
SLOW_PLANNERS = ("ilp", "anneal")


@dataclass
class AllocatorRow:
    """One method on one trace. `reserved`: bytes held at the worst moment; `peak`: the
    trace's minimum (the most bytes alive at once, aligned); `fragmentation`: reserved
    minus the most bytes in use at once; `device_calls`: segment allocations (None for a
    static plan: one arena, one call)."""
    model: str
    trace: str
    method: str
    kind: str
    reserved: int | None
    peak: int
    fragmentation: int | None = None
    largest_free_ratio: float | None = None
    device_calls: int | None = None
    stitches: int | None = None
    seconds: float = 0.0
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.reserved is None:
            return None
        return self.reserved / self.peak if self.peak else 1.0

    def __repr__(self) -> str:
        r = "-" if self.reserved is None else _fmt_bytes(self.reserved)
        x = "" if self.ratio is None else f" x{self.ratio:.3f}"
        return f"AllocatorRow({self.model}/{self.trace}: {self.method} {r}{x})"


def buffers_from_trace(trace: Iterable[Event]) -> list[Buffer]:
    """The trace as rectangles for a static planner: each alloc/free pair is a buffer alive
    from its alloc event to its free event (event indices as steps). A tensor allocated
    again after a free (DTR recomputes it) is a new buffer `(id, k)`."""
    open_: dict[Hashable, tuple[int, int, int]] = {}
    seen: dict[Hashable, int] = {}
    out: list[Buffer] = []
    events = as_trace(trace)
    for k, (kind, tid, size) in enumerate(events):
        if kind == "alloc":
            n = seen.get(tid, 0)
            seen[tid] = n + 1
            open_[tid] = (k, size, n)
        else:
            start, size, n = open_.pop(tid)
            if size:
                out.append(Buffer((tid, n), start, k, size))
    last = len(events)
    for tid, (start, size, n) in open_.items():   # never freed: alive to the end
        if size:
            out.append(Buffer((tid, n), start, last, size))
    return out


def _online_row(model: str, label: str, name: str, result: AllocatorResult, peak: int,
                seconds: float) -> AllocatorRow:
    return AllocatorRow(model, label, name, "online", result.peak_reserved, peak,
                        result.fragmentation, result.largest_free_ratio,
                        result.device_mallocs, result.stitches, seconds)


def _online_rows(model: str, label: str, trace: list[Event], peak: int,
                 allocators: Sequence[str], options: Mapping[str, Mapping[str, Any]]
                 ) -> list[AllocatorRow]:
    from . import simulate
    rows = []
    for name in allocators:
        t0 = time.perf_counter()
        res = simulate(trace, name, **options.get(name, {}))
        rows.append(_online_row(model, label, name, res, peak, time.perf_counter() - t0))
    return rows


def _planner_names(planners: Sequence[str] | None, n_buffers: int, slow_above: int
                   ) -> tuple[list[str], list[str]]:
    from ..planners import PLANNERS
    if planners is not None:
        return list(planners), []
    names = [p for p in sorted(PLANNERS) if p != "none"]
    skipped = [p for p in names if p in SLOW_PLANNERS and n_buffers > slow_above]
    return [p for p in names if p not in skipped], skipped


def compare_allocators(graph: Graph | Any, *, name: str | None = None, order: str = "program",
                       alignment: int = 512, inplace: bool = False,
                       allocators: Sequence[str] = ONLINE,
                       allocator_options: Mapping[str, Mapping[str, Any]] | None = None,
                       planners: Sequence[str] | None = None, time_limit: float = 2.0,
                       slow_above: int = 150, dtr: Mapping[str, Any] | None = None
                       ) -> list[AllocatorRow]:
    """Rows for one graph (or a zoo `Model`): no reuse, each online allocator on the
    schedule's trace, each static planner (every registered one unless `planners` names
    them; "ilp" and "anneal" get `time_limit` seconds and are skipped above `slow_above`
    buffers), and the theoretical minimum. `dtr` maps a label to a DTR run (anything with
    `.events`, or a trace): each gets the online allocators and the static planners on
    its recorded events, i.e. an offline plan of the recomputation pattern (DSA-SA).
    """
    graph = getattr(graph, "graph", graph)
    model = name or graph.name
    options = allocator_options or {}
    sched = make_schedule(graph, order)
    live = liveness(graph, sched, alignment)
    minimum = live.theoretical_minimum()
    rows = [AllocatorRow(model, "schedule", "no reuse", "baseline", live.no_reuse_bytes(),
                         minimum, live.no_reuse_bytes() - minimum)]
    trace = trace_from_schedule(graph, sched, inplace=inplace)
    if inplace:
        from ..api import MemoryOptions, planning_buffers
        minimum = theoretical_minimum(planning_buffers(
            graph, live, MemoryOptions(inplace=True, alignment=alignment))[0])
    rows += _online_rows(model, "schedule", trace, minimum, allocators, options)
    names, skipped = _planner_names(planners, len(live.buffers()), slow_above)
    from ..api import MemoryOptions, plan_memory
    for p in names:
        t0 = time.perf_counter()
        try:
            rep = plan_memory(graph, MemoryOptions(
                inplace=inplace, sharing=p, order=order, alignment=alignment,
                planner_args={"time_limit": time_limit, "seed": 0}))
        except Exception as e:   # a planner that cannot plan this graph says why
            rows.append(AllocatorRow(model, "schedule", p, "static", None, minimum,
                                     note=f"failed: {type(e).__name__}: {e}"[:120]))
            continue
        rows.append(AllocatorRow(model, "schedule", p, "static", rep.arena_bytes, minimum,
                                 rep.arena_bytes - minimum, device_calls=1,
                                 seconds=time.perf_counter() - t0, note=rep.plan.note[:60]))
    for p in skipped:
        rows.append(AllocatorRow(model, "schedule", p, "static", None, minimum,
                                 note=f"skipped: {len(live.buffers())} buffers > {slow_above}"))
    rows.append(AllocatorRow(model, "schedule", "minimum", "bound", minimum, minimum, 0))
    for label, run in (dtr or {}).items():
        rows += dtr_rows(model, label, run, allocators=allocators, options=options,
                         planners=planners, alignment=alignment, time_limit=time_limit,
                         slow_above=slow_above)
    return rows


def dtr_rows(model: str, label: str, run: Any, *, allocators: Sequence[str] = ONLINE,
             options: Mapping[str, Mapping[str, Any]] | None = None,
             planners: Sequence[str] | None = None, alignment: int = 512,
             time_limit: float = 2.0, slow_above: int = 150) -> list[AllocatorRow]:
    """Rows for one recorded DTR run: no reuse, online allocators, offline static plans of
    its events, and its own minimum (the most bytes alive at once in the run)."""
    from ..buffers import align_up
    from ..planners import plan_buffers
    trace = as_trace(run)
    buffers = buffers_from_trace(trace)
    minimum = theoretical_minimum([Buffer(b.id, b.start, b.end, align_up(b.size, alignment))
                                   for b in buffers])
    total = sum(align_up(b.size, alignment) for b in buffers)
    rows = [AllocatorRow(model, label, "no reuse", "baseline", total, minimum, total - minimum)]
    rows += _online_rows(model, label, trace, minimum, allocators, options or {})
    names, skipped = _planner_names(planners, len(buffers), slow_above)
    for p in names:
        t0 = time.perf_counter()
        try:
            aligned, placement = plan_buffers(buffers, p, alignment, time_limit=time_limit,
                                              seed=0)
        except Exception as e:
            rows.append(AllocatorRow(model, label, p, "static", None, minimum,
                                     note=f"failed: {type(e).__name__}: {e}"[:120]))
            continue
        arena = max((placement.offsets[b.id] + b.size for b in aligned), default=0)
        rows.append(AllocatorRow(model, label, p, "static", arena, minimum, arena - minimum,
                                 device_calls=1, seconds=time.perf_counter() - t0,
                                 note=placement.note[:60]))
    for p in skipped:
        rows.append(AllocatorRow(model, label, p, "static", None, minimum,
                                 note=f"skipped: {len(buffers)} buffers > {slow_above}"))
    rows.append(AllocatorRow(model, label, "minimum", "bound", minimum, minimum, 0))
    return rows


def dtr_events(graph: Graph | Any, budget: int | None = None, *, ratio: float | None = None,
               **kw: Any) -> list[Event]:
    """The alloc/free events of a DTR run of `graph` (simulated mode: costs only, no
    kernels) under `budget` bytes or `ratio` of its no-rematerialisation peak, from
    `minigraph.runtime.dtr.simulate` (ImportError when that runtime is not installed)."""
    import importlib
    graph = getattr(graph, "graph", graph)
    try:
        dtr = importlib.import_module("minigraph.runtime.dtr")
    except ImportError as e:
        raise ImportError("minigraph.runtime.dtr is not available; pass recorded DTR "
                          "runs (anything with .events) to compare_allocators(dtr=...)") \
            from e
    run = getattr(dtr, "simulate", None)
    if run is None:
        raise ImportError("minigraph.runtime.dtr has no simulate(graph, budget=, ratio=)")
    return as_trace(run(graph, budget=budget, ratio=ratio, **kw))


def dtr_runs(graph: Graph | Any, ratios: Sequence[float] = (0.8, 0.6), *,
             notes: list[str] | None = None, **kw: Any) -> dict[str, list[Event]]:
    """DTR runs at `ratios` of the no-rematerialisation peak (raised to the runtime's
    `safe` budget where a ratio is below it), labelled "dtr@60%" by the budget used. A run
    DTR refuses (BudgetError) or thrashes in (ThrashError) is left out, with a line in
    `notes` if given; without the DTR runtime the dict is empty."""
    import importlib

    from ...errors import BudgetError, ThrashError
    graph = getattr(graph, "graph", graph)
    out: dict[str, list[Event]] = {}
    try:
        bounds = importlib.import_module("minigraph.runtime.dtr").budget_bounds(graph)
    except (ImportError, AttributeError) as e:
        if notes is not None:
            notes.append(f"no DTR runtime: {e}")
        return out
    tried: set[str] = set()
    for r in ratios:
        budget = max(int(r * bounds.peak), bounds.safe)
        label = f"dtr@{budget / bounds.peak:.0%}"
        if label in tried:
            continue
        tried.add(label)
        try:
            out[label] = dtr_events(graph, budget, **kw)
        except (BudgetError, ThrashError) as e:
            if notes is not None:
                notes.append(f"{label}: {type(e).__name__}: {str(e)[:100]}")
    return out


def format_rows(rows: Sequence[AllocatorRow]) -> str:
    """A markdown table of the rows (MiB, and reserved over the trace's minimum)."""
    def mib(n: int | None) -> str:
        return "-" if n is None else f"{n / 2**20:.2f}"
    out = ["| model | trace | method | kind | reserved MiB | minimum MiB | reserved/min | "
           "fragmentation MiB | largest free | device calls | stitches | note |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        lf = "-" if r.largest_free_ratio is None else f"{r.largest_free_ratio:.0%}"
        out.append(f"| {r.model} | {r.trace} | {r.method} | {r.kind} | {mib(r.reserved)} | "
                   f"{mib(r.peak)} | {ratio} | {mib(r.fragmentation)} | {lf} | "
                   f"{'-' if r.device_calls is None else r.device_calls} | "
                   f"{'-' if r.stitches is None else r.stitches} | {r.note} |")
    return "\n".join(out)


# Pictures --------------------------------------------------------------------------------

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


def _mib_axis(ax: Any, top: int) -> None:
    """Addresses on y in whole MiB (or KiB for tiny arenas), a handful of ticks."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator
    unit, name = (2**20, "MiB") if top >= 2**20 else (2**10, "KiB")
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
    ax.set_title(title or f"{result.name}: reserved {_fmt_bytes(result.peak_reserved)}, "
                 f"peak in use {_fmt_bytes(result.peak_allocated)}", fontsize=9)
    return ax


def plot_static(trace: Iterable[Event], planner: str = "greedy-size", ax: Any = None, *,
                alignment: int = 512, labels: bool = False) -> Any:
    """The same trace planned offline (every lifetime known): the static planner's
    rectangles in the style of `plot_arena`, for a side-by-side picture."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from ..planners import plan_buffers
    trace = as_trace(trace)
    aligned, placement = plan_buffers(buffers_from_trace(trace), planner, alignment)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.6))
    cmap = plt.get_cmap("tab20")
    colour: dict[Hashable, Any] = {}
    top = max((placement.offsets[b.id] + b.size for b in aligned), default=1)
    ax.add_patch(Rectangle((0, 0), len(trace), top, facecolor="#f4f4f4", edgecolor="grey",
                           lw=0.8))
    for b in aligned:
        c = colour.setdefault(b.id[0], cmap(len(colour) % 20))
        off = placement.offsets[b.id]
        ax.add_patch(Rectangle((b.start, off), max(b.end - b.start, 0.6), b.size,
                               facecolor=c, edgecolor="black", lw=0.3))
        if labels:
            ax.text((b.start + b.end) / 2, off + b.size / 2, str(b.id[0]), ha="center",
                    va="center", fontsize=6)
    ax.set_xlim(0, max(len(trace), 1))
    _mib_axis(ax, top)
    ax.set_title(f"static {planner}: arena {_fmt_bytes(top)}", fontsize=9)
    return ax


def plot_timeline(results: Sequence[AllocatorResult], ax: Any = None) -> Any:
    """Reserved (solid) against requested (dashed) bytes after each event."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    for k, r in enumerate(results):
        c = plt.get_cmap("tab10")(k % 10)
        ax.plot([h.reserved / 2**20 for h in r.history], color=c, label=f"{r.name} reserved")
    if results:
        ax.plot([h.requested / 2**20 for h in results[0].history], "k--", lw=1,
                label="requested (alive)")
    ax.set_xlabel("event")
    ax.set_ylabel("MiB")
    ax.legend(fontsize=7)
    return ax


# Test graphs ------------------------------------------------------------------------------

def mlp_training_graph(widths: Sequence[int] = (1024, 4096, 1024, 2048, 512), batch: int = 256,
                       name: str = "mlp") -> Graph:
    """A training graph with tensors of MiB size and mixed widths (so sizes differ and
    holes appear): `widths[0]` inputs, ReLU hidden layers, mean-square loss. Built only
    symbolically; no array is made."""
    import minigraph as mg

    from ...graph import name_scope
    with name_scope():
        x = mg.input("x", (batch, widths[0]))
        h, params = x, []
        for k, (a, b) in enumerate(zip(widths, widths[1:])):
            W = mg.param(f"W{k}", (a, b))
            params.append(W)
            h = h @ W
            if k < len(widths) - 2:
                h = mg.relu(h)
        loss = mg.mean(h * h)
        return mg.training_graph(loss, params, lr=0.01, name=name)

