"""Every way to hold a graph's tensors, side by side: no reuse, the online allocators, the
static planners, and the theoretical minimum - for one schedule, and for DTR runs whose
recomputation breaks the single peak into many [Imanishi 2024, fig. 2].

A static planner knows every lifetime in advance and packs the rectangles (time x bytes);
an online allocator places each tensor when asked and lives with the holes it leaves.
The gap between the two rows is the fragmentation this lesson is about.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BudgetError, ThrashError
from ..graph import Graph, fmt_bytes
from ..memory.api import MemoryOptions, plan_memory, planning_buffers
from ..memory.buffers import Buffer, Placement, align_up, theoretical_minimum
from ..memory.liveness import liveness
from ..memory.online import make_allocator
from ..memory.online.base import AllocatorResult
from ..memory.online.trace import Event, as_trace, buffers_from_trace, trace_from_schedule
from ..memory.orders import schedule as make_schedule
from ..memory.planners import PLANNERS, options_for, plan_buffers
from ..runtime.dtr import budget_bounds, simulate

ONLINE = ("first-fit", "best-fit", "caching", "expandable", "expandable-2m", "gmlake")
SLOW_PLANNERS = ("ilp", "anneal")


@dataclass
class AllocatorRow:
    """One method on one trace. `reserved`: bytes held at the worst moment; `peak`: the
    trace's minimum (the most bytes alive at once, aligned); `fragmentation`: reserved
    minus the most bytes in use at once; `device_calls`: segment allocations, or map calls
    for expandable segments (None for a static plan: one arena, one call); `pages`: the
    physical pages an expandable segment mapped (None for the others)."""
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
    pages: int | None = None
    seconds: float = 0.0
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.reserved is None:
            return None
        return self.reserved / self.peak if self.peak else 1.0

    def __repr__(self) -> str:
        r = "-" if self.reserved is None else fmt_bytes(self.reserved)
        x = "" if self.ratio is None else f" x{self.ratio:.3f}"
        return f"AllocatorRow({self.model}/{self.trace}: {self.method} {r}{x})"


def _online_row(model: str, label: str, name: str, result: AllocatorResult, peak: int,
                seconds: float, pages: int | None = None) -> AllocatorRow:
    return AllocatorRow(model, label, name, "online", result.peak_reserved, peak,
                        result.fragmentation, result.largest_free_ratio,
                        result.device_mallocs, result.stitches, pages, seconds)


def _online_rows(model: str, label: str, trace: list[Event], peak: int,
                 allocators: Sequence[str], options: Mapping[str, Mapping[str, Any]]
                 ) -> list[AllocatorRow]:
    rows = []
    for name in allocators:
        t0 = time.perf_counter()
        a = make_allocator(name, **options.get(name, {}))
        res = a.replay(trace)
        rows.append(_online_row(model, label, name, res, peak, time.perf_counter() - t0,
                                getattr(a, "pages_mapped", None)))
    return rows


def _planner_names(planners: Sequence[str] | None, n_buffers: int, slow_above: int
                   ) -> tuple[list[str], list[str]]:
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
        minimum = theoretical_minimum(planning_buffers(
            graph, live, MemoryOptions(inplace=True, alignment=alignment))[0])
    rows += _online_rows(model, "schedule", trace, minimum, allocators, options)
    names, skipped = _planner_names(planners, len(live.buffers()), slow_above)
    for p in names:
        t0 = time.perf_counter()
        try:
            rep = plan_memory(graph, MemoryOptions(
                inplace=inplace, planner=p, order=order, alignment=alignment,
                planner_args=options_for(p, {"time_limit": time_limit, "seed": 0})))
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
            aligned, placement = plan_buffers(
                buffers, p, alignment, **options_for(p, {"time_limit": time_limit, "seed": 0}))
        except Exception as e:
            rows.append(AllocatorRow(model, label, p, "static", None, minimum,
                                     note=f"failed: {type(e).__name__}: {e}"[:120]))
            continue
        arena = placement.arena_bytes
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
    kernels) under `budget` bytes or `ratio` of its no-rematerialisation peak."""
    graph = getattr(graph, "graph", graph)
    return as_trace(simulate(graph, budget=budget, ratio=ratio, **kw))


def dtr_runs(graph: Graph | Any, ratios: Sequence[float] = (0.8, 0.6), *,
             notes: list[str] | None = None, **kw: Any) -> dict[str, list[Event]]:
    """DTR runs at `ratios` of the no-rematerialisation peak (raised to the runtime's
    `safe` budget where a ratio is below it), labelled "dtr@60%" by the budget used. A run
    DTR refuses (BudgetError) or thrashes in (ThrashError) is left out, with a line in
    `notes` if given."""
    graph = getattr(graph, "graph", graph)
    out: dict[str, list[Event]] = {}
    bounds = budget_bounds(graph)
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


@dataclass
class StaticPlan:
    """A trace planned offline: its buffers (aligned), their placement, and the number of
    events (the time axis). `viz.allocator_plots.plot_static` draws it."""
    planner: str
    buffers: list[Buffer]
    placement: Placement
    events: int


def static_plan(trace: Iterable[Event], planner: str = "greedy-size", alignment: int = 512
                ) -> StaticPlan:
    """Plan `trace`'s tensors with every lifetime known: what an online allocator could have
    done had it seen the future."""
    trace = as_trace(trace)
    aligned, placement = plan_buffers(buffers_from_trace(trace), planner, alignment)
    return StaticPlan(planner, aligned, placement, len(trace))


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
                   f"{'-' if r.device_calls is None else r.device_calls}"
                   f"{'' if r.pages is None else f' ({r.pages} pages)'} | "
                   f"{'-' if r.stitches is None else r.stitches} | {r.note} |")
    return "\n".join(out)

