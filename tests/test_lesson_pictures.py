"""Pictures and sentences that agree with their numbers (the issue "One way to count
bytes for every technique, and lessons whose pictures agree with their tables").

One test per point: A, the one memory model (every technique counted the same way, every
comparison in one quantity, every sentence about DTR and the minimum true); D1-D10, the
lessons' pictures and prose. Where a lesson states a number, its cell prints it or asserts
it (tests/test_lessons.py runs every cell); these tests hold the library functions the
cells call, and the sources, to what the sentences say.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import minigraph as mg  # noqa: E402
from minigraph import examples  # noqa: E402
from minigraph.dtr_research import checkmate, chen_curve
from minigraph.experiments import techniques  # noqa: E402
from minigraph.experiments.dtr import sweep  # noqa: E402
from minigraph.graph import fmt_bytes  # noqa: E402
from minigraph.lessons import l00, l04, l06, l07  # noqa: E402
from minigraph.memory.buffers import Placement  # noqa: E402
from minigraph.memory.online import replay_allocator  # noqa: E402
from minigraph.memory.planners.greedy import lowest_gap  # noqa: E402
from minigraph.models import MODELS, get_model  # noqa: E402
from minigraph.runtime.dtr import HEURISTICS, budget_bounds, simulate
from minigraph.viz import plots  # noqa: E402
from minigraph.viz.allocator_plots import plot_arena  # noqa: E402
from minigraph.viz.explorer import MemoryExplorer, WidgetState  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "lessons" / "src"


def source(stem: str) -> str:
    return next(SRC.glob(f"{stem}_*.py")).read_text()


def prose(stem: str) -> str:
    """The markdown of a lesson, one line per paragraph line, '# ' removed."""
    text, out, in_md = source(stem), [], False
    for line in text.splitlines():
        if line.startswith("# %%"):
            in_md = "[markdown]" in line
            continue
        if in_md and line.startswith("#"):
            out.append(line[2:])
    return " ".join(out)


# --- A: one memory model ------------------------------------------------------------------

@pytest.mark.parametrize("model", [m for m in MODELS if m != "resnet50"])
def test_a_the_working_minimum_is_the_same_number_in_both_tiers(model) -> None:
    """The static plans' working minimum (no in-place, as DTR runs) is DTR's Bounds.live:
    one floor, computed once for each tier, agreeing."""
    g = get_model(model).graph
    rep = mg.plan_memory(g, planner="bestfit")
    b = budget_bounds(g)
    assert rep.working_minimum == b.live
    assert rep.theoretical_minimum <= rep.working_minimum <= rep.working_bytes
    assert rep.working_bytes == rep.arena_bytes + rep.workspace_bytes
    assert rep.outside_bytes == b.external                     # one count of the outside
    assert rep.footprint.total == rep.working_bytes + rep.outside_bytes


def test_a_a_dtr_run_reports_the_same_quantities() -> None:
    g = examples.mlp_training(depth=6, width=32, batch=64)
    tr = simulate(g, ratio=0.7)
    fp = tr.footprint
    assert fp.working == tr.max_used <= tr.budget
    assert fp.arena + fp.workspace == fp.working and fp.outside == tr.external
    assert tr.live == budget_bounds(g).live
    assert tr.below_working_minimum == (tr.max_used < tr.live)


def test_a_the_run_summary_states_true_equations() -> None:
    """Lesson 07's summary said "arena budget 249,649 B = 0.80 x total peak 395,272 B",
    false as written; each equation it prints now holds."""
    g = examples.mlp_training(depth=8, width=32, batch=256)
    tr = simulate(g, ratio=0.8)
    text = tr.summary()
    m = re.search(r"budget \+ outside = ([\d.]+) x total peak ([\d,]+) B; budget = ([\d.]+) "
                  r"x working peak ([\d,]+) B", text)
    assert m, text
    ratio, total, r_arena, peak = (float(m[1]), int(m[2].replace(",", "")), float(m[3]),
                                   int(m[4].replace(",", "")))
    assert abs(tr.budget + tr.external - ratio * total) <= 0.005 * total
    assert abs(tr.budget - r_arena * peak) <= 0.005 * peak
    assert f"budget {tr.budget:,} B of working memory" in text
    assert not re.search(r"budget [\d,]+ B = [\d.]+ x total peak", text)


def test_a_dtr_bars_and_static_bars_show_one_quantity() -> None:
    """Lesson 10 drew "DTR at 80% 338 KiB" (its budget: tensors and workspace) under
    planner bars of 240 KiB (arenas alone). With a DTR row, every bar is working memory,
    the static ones with their workspace drawn, against the working minimum."""
    g = get_model("cnn").graph
    rows = techniques.compare_techniques(g, mg.MemoryOptions(inplace=True), slow=False,
                                         planners=["refcount", "bestfit"], dtr_budget=0.8)
    dtr = rows[-1]
    assert dtr.shared and dtr.family == "dynamic"
    assert dtr.working_minimum == min(r.working_minimum for r in rows[:-1])
    ax = plots.plot_comparison(rows).axes[0]
    assert "working memory" in ax.get_xlabel()
    workspace = [p for p in ax.patches if p.get_gid() == "workspace"]
    static = [r for r in rows if not r.shared]
    assert {round(p.get_width() * plots.UNIT_DIV[_unit(ax)]) for p in workspace} == \
        {r.workspace for r in static}
    minimum = next(ln for ln in ax.get_lines() if ln.get_gid() == "minimum")
    assert "working minimum" in minimum.get_label()
    with pytest.raises(ValueError, match="working"):
        plots.plot_comparison(rows, quantity="arena")


def _unit(ax) -> str:
    return ax.get_xlabel().split("(")[1].split(")")[0]


def test_a_the_widget_counts_dtr_like_the_plans() -> None:
    """The widget's budget is a percent of the total peak; its bar and headline give the
    working memory it leaves, beside the plan's, against the working minimum."""
    ex = MemoryExplorer("mlp")
    result = ex.compute(WidgetState(model="mlp", dtr=True, dtr_budget=0.9))
    assert "working memory (arena + workspace): this plan" in result.headline
    assert "working minimum" in result.headline and "total peak" in result.caption
    fig = MemoryExplorer.figures(result)["comparison"]
    assert "working memory" in fig.axes[0].get_xlabel()


def test_a_lessons_claim_dtr_goes_below_only_as_the_numbers_say() -> None:
    """Lesson 00 said "DTR (07) goes below it [the theoretical minimum] by recomputing" and
    lesson 06 "lesson 07 goes below the minimum"; DTR's smallest budget on lesson 00's MLP
    is above the theoretical minimum. Now the claim is against the working minimum, and
    the table of the closing note agrees with the lessons' cells."""
    assert "goes below it by recomputing" not in prose("00")
    assert "goes below the minimum" not in prose("06")
    c = techniques.same_counting(l00.mlp_step())
    assert c.dtr_budget > c.theoretical_minimum          # the old claim was false here
    assert c.below == (c.dtr_budget < c.working_minimum)
    assert "same_counting(step)" in source("00") and "same_counting(g)" in source("10")


def test_a_the_closing_note_table_is_printed_by_code() -> None:
    import subprocess
    import sys
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "same_counting.py"),
                          "--models", "mlp", "--points", "8", "--no-torch"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| mlp |" in out.stdout and "| lesson 00 MLP |" in out.stdout
    assert "working minimum" in out.stdout


# --- D1: Checkmate's star where its budget is ------------------------------------------

def test_d1_checkmate_is_drawn_at_the_budget_it_was_given() -> None:
    """The star was drawn at its own peak (x = 0.538) beside a table row saying 60%."""
    tiny, kw = examples.linear_chain(10), dict(costs="unit", alignment=1)
    rows = sweep(tiny, [1.0, 0.8, 0.6, 0.5], ["dtr"], **kw)
    opt = checkmate(tiny, ratio=0.6, time_limit=10, **kw)
    ax = plots.plot_sweep(rows, static=[*chen_curve(tiny, **kw), opt])
    star = next(ln for ln in ax.get_lines() if ln.get_gid() == "static:checkmate")
    assert star.get_xdata()[0] == 0.6
    dtr_x = next(ln for ln in ax.get_lines() if ln.get_gid() == "line:dtr").get_xdata()
    assert 0.6 in list(dtr_x)                          # DTR's point at the same budget
    assert "opt.budget_ratio == ratio" in source("07e")


# --- D2: the score exercise's hint and a score that raises ----------------------------

def test_d2_the_score_hint_leads_to_the_missing_ingredient_and_errors_are_messages() -> None:
    ok, why = l07.exercise_2(lambda t, now: t.cost / (t.size * t.staleness))
    assert not ok and "neighbour_cost" in why
    ok, why = l07.exercise_2(lambda t, now: {}["missing"])
    assert not ok and "KeyError" in why


# --- D3: lesson 02's "where training memory goes" -------------------------------------

def test_d3_lesson_02_says_what_fills_the_peak() -> None:
    text = prose("02")
    assert "that is where training memory goes" not in text
    mlp, names = examples.two_layer_mlp()
    live = mg.liveness(mlp, alignment=1)
    top = max((iv for iv in live.planned() if iv.start <= live.live_bytes().index(
        live.theoretical_minimum()) <= iv.end), key=lambda iv: iv.bytes)
    assert top.name == names["d(W1)"] and top.bytes > 0.5 * live.theoretical_minimum()
    assert 'assert top.kind == "gradient"' in source("02")     # the cell checks it


# --- D4: "program" in lesson 06 ------------------------------------------------------------

def test_d4_lesson_06_never_calls_the_integer_program_the_program() -> None:
    text = prose("06")
    assert not re.search(r"\bthe program (runs|proves|chooses|finds)", text)
    assert "integer program" in text and 'order* named "program"' in text


# --- D5: lesson 09's peaks and events ---------------------------------------------------

def test_d5_allocator_titles_name_both_peaks_and_lesson_09_counts_its_events() -> None:
    MiB = 2**20
    trace = [("alloc", f"m{i}", 13 * MiB) for i in range(4)] + \
        [("free", f"m{i}", 0) for i in range(4)]
    r = replay_allocator(trace, "caching")
    assert r.peak_allocated != r.peak_requested            # rounded up: 14 MiB blocks
    title = plot_arena(r).get_title()
    assert "handed out" in title and "requested" in title and "rounded up" in title
    assert "Four events are enough" not in prose("09")
    assert "print(f\"{len(HOLE)} events" in source("09")


# --- D6: lesson 06's best-fit gap ------------------------------------------------------------

def _first_fit_by_start(buffers):
    offsets, placed = {}, []
    for b in sorted(buffers, key=lambda b: b.start):
        taken = [(offsets[p.id], offsets[p.id] + p.size) for p in placed
                 if p.start <= b.end and b.start <= p.end]
        offsets[b.id] = lowest_gap(taken, b.size)
        placed.append(b)
    return Placement.of(buffers, offsets)


def test_d6_the_right_answer_is_told_best_fits_gap_as_it_is() -> None:
    from minigraph.memory import PLANNERS
    PLANNERS[l06.PLANNER_NAME] = _first_fit_by_start
    try:
        g = get_model(l06.EXERCISE_2_MODEL).graph

        def gap(p):
            rep = mg.plan_memory(g, inplace=True, planner=p)
            return 100 * (rep.arena_bytes - rep.theoretical_minimum) / rep.theoretical_minimum

        ok, why = l06.exercise_2(gap(l06.PLANNER_NAME))
        best = gap("bestfit")
    finally:
        del PLANNERS[l06.PLANNER_NAME]
    assert ok and f"{best:.2f}%" in why
    assert ("reaches the minimum" in why) == (best == 0)


# --- D7: hints that name what exists ----------------------------------------------------------

def test_d7_hints_name_no_undefined_graph_and_lesson_00_blames_no_parameters() -> None:
    for check, wrong in ((l04.exercise_1, 1), (l04.exercise_4, 1), (l04.exercise_2, 99)):
        ok, why = check(wrong)
        assert not ok and "g3" not in why, why
    factor = (mg.plan_memory(l00.mlp_step(128), mg.MemoryOptions(
        inplace=True, planner="refcount")).theoretical_minimum /
        mg.plan_memory(l00.mlp_step(64), mg.MemoryOptions(
            inplace=True, planner="refcount")).theoretical_minimum)
    ok, why = l00.exercise_2(factor)
    assert ok and "parameter" not in why


# --- D8: e* means one thing --------------------------------------------------------------------

def test_d8_e_star_is_the_neighbourhood_without_the_own_cost() -> None:
    """Lesson 07: e*(t) is the evicted neighbourhood's cost; h_DTR adds c0 beside it."""
    text = prose("07")
    assert "own cost not included" in text and "$c_0(t) + e^*(t)$" not in text.replace(
        r"\frac{c_0(t) + e^*(t)}", "")
    from minigraph.runtime.dtr import heuristics, neighbourhood
    assert "own cost c0 not included" in heuristics.__doc__
    assert "e*(t) = c0" not in neighbourhood.__doc__
    assert "e* = c0" not in heuristics.dtr.__doc__


# --- D9: a sweep plot that can be read, a layout with the pair visible ---------------------

def test_d9_the_sweep_plot_tells_its_nine_lines_apart() -> None:
    g = get_model("mlp").graph
    rows = sweep(g, [0.9, 0.7, 0.5], list(HEURISTICS), allocator="ideal")
    ax = plots.plot_sweep(rows)
    lines = [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("line:")]
    assert len(lines) == len(HEURISTICS) >= 9
    looks = {(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(looks) == len(lines) and len({ln.get_color() for ln in lines}) >= 9
    fig = ax.figure
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1 - 1          # beside the curves
    top = max(r.overhead for r in rows if r.status == "ok")
    assert ax.get_ylim()[1] >= top and not any(ln.get_visible() for ln in ax.get_xgridlines())
    assert "ymax=1.6" not in source("07")


def test_d9_lesson_03_shows_the_in_place_pair_it_discusses() -> None:
    mlp, names = examples.two_layer_mlp()
    both = mg.plan_memory(mlp, mg.MemoryOptions(planner="refcount", alignment=1, inplace=True))
    x = names["fc2"]
    at, size = both.plan.offsets[x], both.plan.liveness.intervals[x].bytes
    assert size < 0.01 * both.arena_bytes                    # a sliver, drawn whole
    lo, hi = max(0, at - 2 * size), at + 3 * size            # the lesson's zoom
    ax = plots.plot_layout(both, zoom=(lo, hi)).axes[0]
    y0, y1 = ax.get_ylim()
    assert size / plots.UNIT_DIV[ax.get_ylabel().split("(")[1][:-1]] / (y1 - y0) > 0.15
    assert "plot_layout(both, ax=right, zoom=(lo, hi)" in source("03")


# --- D10: lesson 01's seed and dashed edge, lesson 02's step ticks ----------------------

def test_d10_lesson_01_explains_the_seed_and_the_dashed_edge() -> None:
    text = prose("01")
    assert "**seed**" in text and "**dashed grey edge**" in text
    assert "for d in n.deps" in source("01")


def test_d10_a_three_step_layout_has_whole_step_ticks() -> None:
    bufs = [mg.Buffer("a", 0, 1, 64), mg.Buffer("b", 1, 2, 64)]
    _, placed = mg.memory.plan_buffers(bufs, "none", alignment=1)
    for fig in (plots.plot_placement(bufs, placed),
                plots.plot_timeline(mg.plan_memory(examples.sigmoid_chain(1), alignment=1))):
        ax = fig.axes[0]
        fig.canvas.draw()
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks and all(math.isclose(t, round(t)) for t in ticks), ticks


# --- A: the tour and the CLI say which quantity they show ------------------------------

def test_a_the_tour_and_the_cli_name_their_quantities(capsys) -> None:
    from minigraph import tour
    from minigraph.cli import main
    rows = techniques.technique_rows(get_model("mlp").graph)
    line = tour.working_line(rows)
    rep = next(r.report for r in rows if r.label == "refcount + in-place")
    assert "the table counts the arena (the planned tensors) only" in line
    assert fmt_bytes(rep.working_minimum) in line and fmt_bytes(rep.workspace_bytes) in line
    assert main(["plan", "--model", "mlp", "--planner", "refcount"]) == 0
    out = capsys.readouterr().out
    for name in ("workspace", "working", "working minimum", "outside"):
        assert re.search(rf"^{name}\s+\d+ B", out, re.M), (name, out)


def test_d10_the_swap_timeline_marks_each_transfer_where_the_plan_puts_it() -> None:
    """Issue 48 point 6: each offload after its tensor's last use before the gap, each
    prefetch before its reader, one late mark per copy the copy stream says was late,
    and the host line at the report's host peak at most."""
    ex = MemoryExplorer("resnet")
    result = ex.compute(WidgetState(model="resnet", planner="bestfit", swap=True,
                                    swap_budget=0.6))
    rep = result.swap
    assert rep is not None and rep.swaps, result.messages
    ax = MemoryExplorer.figures(result)["timeline"].axes[0]
    marks = {c.get_gid(): sorted(x for x, _ in c.get_offsets()) for c in ax.collections
             if c.get_gid() in ("offload", "prefetch", "late")}
    assert marks["offload"] == sorted(s.after + 0.5 for s in rep.swaps)
    assert marks["prefetch"] == sorted(s.back - 0.5 for s in rep.swaps)
    assert all(s.back - 0.5 < s.reader for s in rep.swaps)
    assert len(marks.get("late", [])) == len(rep.timing.waits)
    host = next(ln for ln in ax.get_lines() if ln.get_gid() == "host")
    div = plots.UNIT_DIV[result.unit]
    assert 0 < max(host.get_ydata()) * div <= rep.host_bytes
    assert plots.fmt_in(rep.host_bytes, result.unit) in host.get_label()


def test_d10_dtr_s_timeline_marks_each_copy_at_the_trace_s_clock() -> None:
    """Issue 48 points 4 and 6: with evict="cheaper" DTR's picture adds the run's timeline;
    each copy out and back of `trace.transfers` sits at the clock it began, and the host
    peak is a line at `trace.host_peak` beside working memory."""
    ex = MemoryExplorer("resnet")
    result = ex.compute(WidgetState(model="resnet", dtr=True, dtr_budget=0.6,
                                    dtr_evict="cheaper"))
    trace = result.dtr.trace
    assert trace.transfers and trace.swapped
    fig = MemoryExplorer.figures(result)["dtr"]
    assert len(fig.axes) == 2
    ax = fig.axes[1]
    marks = {c.get_gid(): sorted(x for x, _ in c.get_offsets()) for c in ax.collections
             if c.get_gid() in ("dtr:out", "dtr:in")}
    for way in ("out", "in"):
        assert marks[f"dtr:{way}"] == pytest.approx(
            sorted(clock for clock, kind, _, _ in trace.transfers if kind == way))
    assert len(marks["dtr:out"]) == len(trace.swapped)
    clocks = [x for x, _ in trace.timeline]
    assert min(clocks) <= min(marks["dtr:out"]) and max(marks["dtr:in"]) <= max(clocks)
    host = next(ln for ln in ax.get_lines() if ln.get_gid() == "host_peak")
    unit, div = plots.byte_unit(max([*(y for _, y in trace.timeline), trace.budget,
                                     trace.peak, trace.host_peak, 1]))
    assert host.get_ydata()[0] * div == pytest.approx(trace.host_peak)
    assert plots.fmt_in(trace.host_peak, unit) in host.get_label()
    assert f"{len(trace.swapped)} swapped" in ax.get_title()
    # A drop run draws no copies and no host line.
    drop = simulate(get_model("resnet").graph, budget=result.dtr.budget)
    bare = plots.plot_dtr_timeline(drop)
    assert not bare.collections and "host_peak" not in {ln.get_gid() for ln in bare.get_lines()}
