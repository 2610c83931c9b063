"""DTR budget sweeps: every heuristic at every budget ratio, one row each.

    rows = sweep(step_graph, [0.8, 0.6, 0.4], ["dtr", "lru", "coop"])
    print(format_rows(rows))
    plot_sweep(rows, static=[chen_sqrt(step_graph)])       # minigraph.viz.plots

The DTR paper's picture of these rows (compute overhead against budget) is drawn by
`minigraph.viz.plots.plot_sweep` [Kirisame 2021].
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import BudgetError, ThrashError
from ..feeds import random_feeds
from ..graph import Graph
from ..runtime.dtr import DTRExecutor, DTROptions, DTRRuntime, DTRTrace, Program
from ..runtime.dtr.options import dtr_options
from ..runtime.dtr.program import CostSpec, as_program


@dataclass
class SweepRow:
    """One (heuristic, budget ratio) run. `status`: "ok", "budget" (the budget was refused
    or the run got stuck) or "thrash" (the thrash limit stopped it); numbers are None
    unless ok. `fragmentation`: mean free bytes / budget at eviction decisions (Coop);
    `frag_forced`: evictions made although the free bytes already sufficed."""
    graph: str
    heuristic: str
    ratio: float
    budget: int
    mode: str
    status: str
    overhead: float | None = None          # total compute / base compute
    extra_compute: float | None = None     # extra compute / base compute
    evictions: int | None = None
    rematerializations: int | None = None
    remat_tensors: int | None = None
    search_seconds: float | None = None
    fragmentation: float | None = None
    frag_forced: int | None = None
    defrags: int | None = None
    seconds: float | None = None
    measured_overhead: float | None = None  # real mode: kernel time / first-run kernel time
    peak_bytes: int | None = None           # the run's arena high-water mark
    error: str = ""
    ratio_of: str = "total"                 # what `ratio` is a fraction of
    arena_ratio: float | None = None        # budget / arena peak, whichever ratio_of

    def as_dict(self) -> dict:
        return asdict(self)


Progress = Callable[[int, int, SweepRow], None]


def sweep(graph: Graph | Program | Any, ratios: Sequence[float],
          heuristics: Sequence[Any] = ("dtr",), mode: str = "sim", *,
          progress: bool | Progress | None = None, feeds: Mapping[str, Any] | None = None,
          ratio_of: str = "total", schedule: Sequence[str] | None = None,
          alignment: int = 512, costs: CostSpec = "flops",
          options: DTROptions | None = None, **keywords: Any) -> list[SweepRow]:
    """Run DTR for every heuristic x budget ratio; one `SweepRow` each.

    Ratios are of the total no-rematerialisation peak (external bytes + arena peak, the
    DTR paper's definition: the arena gets ratio x total - external) or, with
    `ratio_of="arena"`, of the arena peak alone; ratio 1.0 never evicts either way.

    `graph`: a Graph, a Program, or a zoo `Model` (its graph; its feeds in real mode).
    `mode`: "sim" (costs only) or "real" (kernels in one arena; `feeds` default to the
    model's, or random ones). `progress`: True for a text bar on stderr, or a function
    `(done, total, row)` (a widget can drive a progress bar with it). `schedule`,
    `alignment`, `costs` build the program; `options` (or their fields as keywords:
    `allocator`, `defrag`, `thrash_limit`, ...) run it, each heuristic in turn."""
    if mode not in ("sim", "real"):
        raise ValueError(f"mode must be 'sim' or 'real', not {mode!r}")
    base = dtr_options(options, **keywords)
    model = graph if hasattr(graph, "make_batch") else None
    g = getattr(graph, "graph", graph) if model is not None else graph
    program = as_program(g, schedule, alignment, costs)
    if mode == "real":
        if not isinstance(g, Graph):
            raise ValueError("real mode needs a Graph (kernels), not a Program")
        if feeds is None:
            feeds = model.feeds() if model is not None else random_feeds(g)
    cb: Progress | None = _progress_printer if progress is True else (progress or None)
    bounds = program.bounds()
    total = len(ratios) * len(heuristics)
    rows: list[SweepRow] = []
    for h in heuristics:
        hname = h if isinstance(h, str) else getattr(h, "name", getattr(h, "__name__", "custom"))
        opts = base.replace(heuristic=h)
        for r in ratios:
            budget = bounds.arena_budget(r, ratio_of)
            tr, err = None, None
            try:
                if budget < 0:
                    raise BudgetError(f"{r:g} x the total peak leaves no arena: the "
                                      f"{bounds.external:,} B outside it exceed that",
                                      minimum=bounds.lower)
                if mode == "sim":
                    tr = DTRRuntime(program, budget, options=opts).run()
                else:
                    ex = DTRExecutor(g, budget, schedule=schedule, alignment=alignment,
                                     costs=costs, options=opts)
                    ex.run(feeds)
                    tr = ex.last_trace
            except (BudgetError, ThrashError) as e:
                err = e
            rows.append(_row(program.name, hname, r, budget, mode, tr, err, ratio_of,
                             bounds.ratios(budget)[1]))
            if cb is not None:
                cb(len(rows), total, rows[-1])
    return rows


def _row(name: str, h: str, ratio: float, budget: int, mode: str,
         tr: DTRTrace | None, err: Exception | None, ratio_of: str,
         arena_ratio: float) -> SweepRow:
    if tr is None:
        status = "thrash" if isinstance(err, ThrashError) else "budget"
        return SweepRow(name, h, ratio, budget, mode, status, error=str(err)[:200],
                        ratio_of=ratio_of, arena_ratio=arena_ratio)
    return SweepRow(name, h, ratio, budget, mode, "ok", tr.overhead, tr.extra_compute,
                    tr.evictions, tr.rematerializations, tr.remat_tensors,
                    tr.search_seconds, tr.fragmentation, tr.frag_forced_evictions,
                    tr.defrags, tr.seconds, tr.measured_overhead, tr.max_used,
                    ratio_of=ratio_of, arena_ratio=arena_ratio)


def smallest_budget(graph: Graph | Program | Any, points: int = 40, heuristic: Any = "dtr",
                    *, schedule: Sequence[str] | None = None, alignment: int = 512,
                    costs: CostSpec = "flops", options: DTROptions | None = None,
                    **keywords: Any) -> tuple[int, DTRTrace | None]:
    """The smallest budget (bytes of working memory) on a grid of `points` + 1 budgets from
    `Bounds.lower` (no smaller one can work) to `Bounds.peak` (nothing is evicted) at which
    DTR finishes, with its run; (peak, its run) when only the top finishes. DTR is not
    monotone in the budget, so this is the smallest *grid point* that finishes, found by
    trying each from the bottom up; a budget between two points is not tried."""
    program = as_program(getattr(graph, "graph", graph) if hasattr(graph, "make_batch")
                         else graph, schedule, alignment, costs)
    b = program.bounds()
    opts = dtr_options(options, **keywords).replace(heuristic=heuristic)
    top = max(b.peak, b.lower)
    grid = sorted({b.lower + (top - b.lower) * k // points for k in range(points + 1)})
    for budget in grid:
        try:
            return budget, DTRRuntime(program, budget, options=opts).run()
        except (BudgetError, ThrashError):
            continue
    return top, None


def _progress_printer(done: int, total: int, row: SweepRow) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                     f"{row.heuristic} @ {row.ratio:.2f}: {row.status}   ")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def format_rows(rows: Sequence[SweepRow]) -> str:
    """A markdown table: one line per run; `budget (of)` says which peak the ratio is of
    ("total": with the external bytes, the DTR paper's; "arena": activations only)."""
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)
    out = ["| graph | heuristic | budget (of) | arena ratio | mode | status | compute | "
           "evictions | replays | frag-forced | fragmentation | defrags | search ms | "
           "measured |",
           "|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r.graph} | {r.heuristic} | {r.ratio:.2f} ({r.ratio_of}) | "
                   f"{f(r.arena_ratio, '.2f')} | {r.mode} | {r.status} | "
                   f"{f(r.overhead, '.3f')} | {f(r.evictions, 'd')} | "
                   f"{f(r.rematerializations, 'd')} | {f(r.frag_forced, 'd')} | "
                   f"{f(r.fragmentation, '.3f')} | {f(r.defrags, 'd')} | "
                   f"{f(None if r.search_seconds is None else r.search_seconds * 1e3, '.1f')}"
                   f" | {f(r.measured_overhead, '.2f')} |")
    return "\n".join(out)
