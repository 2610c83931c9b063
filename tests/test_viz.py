"""The plots: each returns a Figure whose elements are the plan's own numbers."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("matplotlib")

from matplotlib.figure import Figure  # noqa: E402

import minigraph as mg  # noqa: E402
from minigraph.experiments import techniques  # noqa: E402
from minigraph.memory import PLANNERS  # noqa: E402
from minigraph.memory.buffers import Buffer  # noqa: E402
from minigraph.memory.planners import plan_buffers  # noqa: E402
from minigraph.viz import plots  # noqa: E402


def mlp_step(batch: int = 16) -> mg.Graph:
    with mg.name_scope():
        x = mg.input("x", (batch, 64))
        y = mg.input("y", (batch, 8))
        W1 = mg.param("W1", (64, 128))
        W2 = mg.param("W2", (128, 8))
        h = mg.sigmoid(mg.relu(x @ W1))
        loss = ((h @ W2 - y) ** 2).mean()
        return mg.training_graph(loss, [W1, W2], lr=0.1)


def ge_worked_example() -> list[Buffer]:
    """The worked example of [Huawei GE]: A, C 1024 B; B 2048; D 512; E 4096 (steps 1..6)."""
    return [Buffer("A", 1, 2, 1024), Buffer("B", 2, 4, 2048), Buffer("C", 3, 4, 1024),
            Buffer("D", 4, 5, 512), Buffer("E", 5, 6, 4096)]


@pytest.fixture(scope="module")
def step() -> mg.Graph:
    return mlp_step()


@pytest.fixture(scope="module")
def report(step: mg.Graph) -> mg.MemoryReport:
    return mg.plan_memory(step, mg.MemoryOptions(inplace=True, planner="refcount"))


def _line(fig: Figure, gid: str):
    lines = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid() == gid]
    assert lines, f"no line {gid!r}"
    return lines[0]


def test_timeline_stack_peaks_at_the_theoretical_minimum(step, report) -> None:
    tl = plots.timeline(report, step)
    assert tl.steps == len(step.nodes)
    assert max(tl.planned_live) == report.theoretical_minimum
    assert tl.arena == report.arena_bytes
    assert tl.no_reuse[-1] == report.no_reuse_bytes
    # Bands add up: planned bands are exactly the planned bytes alive.
    for t in range(tl.steps):
        planned = tl.bands.get("activations", [0] * tl.steps)[t] + \
            tl.bands.get("gradients", [0] * tl.steps)[t]
        assert planned == tl.planned_live[t]
    assert "parameters & inputs" in tl.bands


def test_timeline_counts_an_inplace_handover_once(step) -> None:
    rep = mg.plan_memory(step, inplace=True, planner="none")
    assert rep.plan.inplace, "the MLP has in-place pairs (relu, sigmoid)"
    tl = plots.timeline(rep)
    assert max(tl.planned_live) == rep.theoretical_minimum


def test_plot_timeline_returns_a_figure_with_its_lines(step, report) -> None:
    fig = plots.plot_timeline(report, step)
    assert isinstance(fig, Figure)
    _, div = plots.byte_unit(max(report.arena_bytes, report.theoretical_minimum))
    arena = _line(fig, "arena").get_ydata()
    assert arena[0] * div == pytest.approx(report.arena_bytes)
    minimum = _line(fig, "minimum").get_ydata()
    assert minimum[0] * div == pytest.approx(report.theoretical_minimum)
    _line(fig, "no-reuse")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "activations (in the arena)" in labels and "gradients (in the arena)" in labels
    assert any(t.startswith("parameters & inputs (outside") for t in labels)
    fig.savefig(__import__("io").BytesIO(), format="png")


LABEL_VALUE = re.compile(r"(\d+(?:\.\d+)?) (B|KiB|MiB|GiB)")


def _label_bytes(text: str) -> tuple[float, str]:
    """The last "<number> <unit>" of a legend label: (number, unit)."""
    found = LABEL_VALUE.findall(text)
    assert found, f"no size in {text!r}"
    return float(found[-1][0]), found[-1][1]


@pytest.mark.parametrize("model", ["cnn", "resnet"])
def test_timeline_reference_lines_sit_where_their_labels_say(model) -> None:
    """Issue 16 point 9: read the figure's artists; each reference line's height, in the
    axis's unit, is the number its label states, and that number is the report's."""
    from minigraph.models import get_model
    g = get_model(model).graph
    rep = mg.plan_memory(g, mg.MemoryOptions(inplace=True, planner="bestfit"))
    fig = plots.plot_timeline(rep, g)
    ax = fig.axes[0]
    unit = ax.get_ylabel().split("(")[-1].rstrip(")")
    want = {"arena": rep.arena_bytes, "minimum": rep.theoretical_minimum,
            "no-reuse": rep.no_reuse_bytes}
    for gid, true_bytes in want.items():
        line = _line(fig, gid)
        value, label_unit = _label_bytes(line.get_label())
        assert label_unit == unit, (gid, line.get_label(), unit)
        height = line.get_ydata()[-1]
        assert height == pytest.approx(value, abs=0.005), (gid, line.get_label(), height)
        assert value * plots.UNIT_DIV[unit] == pytest.approx(true_bytes,
                                                            abs=0.005 * plots.UNIT_DIV[unit])
        if gid != "no-reuse":
            assert len(set(line.get_ydata())) == 1, f"{gid} is a level line"
    # the planned stack stays under the arena line; what is not planned starts on it
    tl = plots.timeline(rep, g)
    assert max(tl.planned_live) <= rep.arena_bytes
    div = plots.UNIT_DIV[unit]
    bands = {c.get_gid(): c for c in ax.collections if str(c.get_gid()).startswith("band:")}
    assert "band:workspace" in bands, "conv and matmul declare workspace"
    for name in ("band:workspace", "band:parameters & inputs"):
        ys = bands[name].get_paths()[0].vertices[:, 1]
        assert ys.min() == pytest.approx(rep.arena_bytes / div), name
    for name in ("band:activations", "band:gradients"):
        ys = bands[name].get_paths()[0].vertices[:, 1]
        assert ys.max() <= rep.arena_bytes / div + 1e-9, name


def test_one_minimum_per_view_when_the_caller_gives_it(step, report) -> None:
    other = report.theoretical_minimum + 4096
    for fig in (plots.plot_timeline(report, step, minimum=other),
                plots.plot_layout(report, minimum=other)):
        line = _line(fig, "minimum")
        value, unit = _label_bytes(line.get_label())
        assert value * plots.UNIT_DIV[unit] == \
            pytest.approx(other, abs=0.005 * plots.UNIT_DIV[unit])
    rows = techniques.compare_techniques(step, mg.MemoryOptions(inplace=True), slow=False)
    fig = plots.plot_comparison(rows, minimum=other)
    assert fig.axes[0].get_lines()[0].get_gid() == "minimum"
    assert "theoretical minimum" in fig.axes[0].get_xlabel()
    unit = fig.axes[0].get_xlabel().split("(")[1].split(")")[0]
    assert fig.axes[0].get_lines()[0].get_xdata()[0] * plots.UNIT_DIV[unit] == \
        pytest.approx(other)


def test_every_size_in_a_figure_uses_its_axis_unit() -> None:
    """Issue 16 points 10, 12: no "8.50 KiB" label on a byte axis, no "1e7" offset."""
    buffers = ge_worked_example()
    _, placement = plan_buffers(buffers, "none", alignment=1)
    fig = plots.plot_placement(buffers, placement)
    ax = fig.axes[0]
    assert ax.get_ylabel().endswith("(B)")
    texts = [ax.get_title()] + [t.get_text() for t in ax.get_legend().get_texts()]
    units = {u for t in texts for _, u in LABEL_VALUE.findall(t)}
    assert units == {"B"}, texts
    big = plots.plot_timeline(mg.plan_memory(mlp_step(4096), planner="bestfit"))
    big.savefig(__import__("io").BytesIO(), format="png")
    ax = big.axes[0]
    assert ax.yaxis.get_offset_text().get_text() == ""
    assert all("e" not in t.get_text() for t in ax.get_yticklabels())


def test_layout_names_fit_inside_their_rectangles() -> None:
    """Issue 16 point 12: a dense layout writes a name only where it fits its rectangle."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from minigraph.models import get_model
    rep = mg.plan_memory(get_model("resnet").graph, inplace=True, planner="bestfit")
    fig = plots.plot_layout(rep, labels=60)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    _, div = plots.byte_unit(max(rep.arena_bytes, rep.theoretical_minimum))
    rects = {str(r.name): r for r in plots.layout_rects(rep)}
    names = [t for t in ax.texts if str(t.get_gid()).startswith("name:")]
    assert 0 < len(names) < len(rects), "some names, not all: the plan is dense"
    for t in names:
        r = rects[t.get_gid()[5:]]
        (x0, y0), (x1, y1) = ax.transData.transform(
            [(r.start - 0.45, r.offset / div), (r.end + 0.45, (r.offset + r.size) / div)])
        box = t.get_window_extent(renderer)
        assert x0 - 1 <= box.x0 and box.x1 <= x1 + 1, t.get_text()
        assert y0 - 1 <= box.y0 and box.y1 <= y1 + 1, t.get_text()


def test_layout_rectangles_are_the_plans_offsets(report) -> None:
    rects = plots.layout_rects(report)
    assert {r.name: r.offset for r in rects} == \
        {n: o for n, o in report.plan.offsets.items() if report.plan.size(n)}
    fig = plots.plot_layout(report)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    colls = {c.get_gid(): c for c in ax.collections}
    assert "tensors" in colls
    n = sum(len(c.get_paths()) for c in colls.values() if c.get_gid() in ("tensors", "inplace"))
    assert n == len(rects)
    assert "inplace" in colls, "in-place outputs are drawn hatched"
    _, div = plots.byte_unit(max(report.arena_bytes, report.theoretical_minimum))
    assert _line(fig, "arena").get_ydata()[0] * div == pytest.approx(report.arena_bytes)
    assert _line(fig, "minimum").get_ydata()[0] * div == \
        pytest.approx(report.theoretical_minimum)


def test_layout_blocks_group_tensors_that_reuse_bytes(report) -> None:
    rects = plots.layout_rects(report)
    by_block: dict[int, list] = {}
    for r in rects:
        by_block.setdefault(r.block, []).append(r)
    for block, members in by_block.items():
        if block < 0:
            continue
        assert len(members) > 1
    for color_by in ("block", "buffer"):
        assert isinstance(plots.plot_layout(report, color_by=color_by), Figure)
    with pytest.raises(ValueError, match="color_by"):
        plots.plot_layout(report, color_by="rainbow")


def test_plot_placement_draws_the_ge_worked_example(tmp_path) -> None:
    buffers = ge_worked_example()
    _, placement = plan_buffers(buffers, "none", alignment=1)
    fig = plots.plot_placement(buffers, placement)
    assert _line(fig, "arena").get_ydata()[0] == 8704          # bytes: under 16 KiB
    assert _line(fig, "minimum").get_ydata()[0] == 4608
    fig.savefig(tmp_path / "seed.svg", format="svg")
    assert (tmp_path / "seed.svg").read_text().startswith("<?xml")


def test_compare_techniques_has_one_row_per_planner(step) -> None:
    rows = techniques.compare_techniques(step, mg.MemoryOptions(inplace=True), slow=False)
    names = {r.technique for r in rows}
    for p in PLANNERS:
        if p not in techniques.SLOW_PLANNERS:
            assert p in names, f"planner {p} has no row"
    base = next(r for r in rows if r.technique == "none")
    assert base.saved_percent == 0.0 and base.options.inplace is False
    for r in rows:       # every row is what plan_memory says for its options
        rep = mg.plan_memory(step, r.options)
        assert r.bytes == rep.arena_bytes
        assert r.bytes >= r.theoretical_minimum
    fig = plots.plot_comparison(rows)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("baseline" in t for t in texts)
    for r in rows:
        if r.technique != "none":
            assert any(f"-{r.saved_percent:.1f}%" in t for t in texts), r.label
    bars = [p for p in fig.axes[0].patches]
    assert len(bars) == len(rows)


def test_plot_comparison_refuses_no_rows() -> None:
    with pytest.raises(ValueError, match="at least one row"):
        plots.plot_comparison([])


def test_plots_refuse_what_is_not_a_plan() -> None:
    with pytest.raises(TypeError, match="MemoryReport or MemoryPlan"):
        plots.plot_timeline("not a plan")
    with pytest.raises(mg.MinigraphError, match="not a plan"):
        plots.plot_layout("not a plan")


def test_dtr_row_and_sweep(step) -> None:
    row = techniques.dtr_row(step, 1.0, mg.MemoryOptions())
    assert row.family == "dynamic" and row.bytes > 0 and "compute x" in row.note
    rows = techniques.dtr_sweep(step, [1.0])
    fig = plots.plot_dtr_sweep(rows, 1.0)
    assert isinstance(fig, Figure)


def test_the_dtr_timeline_of_a_swapping_run_marks_its_copies_and_a_drop_run_none() -> None:
    from minigraph.models import get_model
    from minigraph.runtime.dtr import simulate
    g = get_model("resnet").graph
    drop = simulate(g, ratio=0.6)
    ax = plots.plot_dtr_timeline(drop)
    assert not ax.collections and "swapped" not in ax.get_title()
    assert ax.get_legend()._loc == 1                   # upper right, as before
    costs = {n.name: 1e-5 for n in g.nodes}             # seconds: copies are cheaper
    swap = simulate(g, ratio=0.6, costs=costs, evict="swap", cost_rate=1.0)
    assert swap.swapped and swap.transfers
    ax = plots.plot_dtr_timeline(swap)
    outs = next(c for c in ax.collections if c.get_gid() == "dtr:out")
    assert len(outs.get_offsets()) == len(swap.swapped) == \
        sum(kind == "out" for _, kind, _, _ in swap.transfers)
    assert f"{len(swap.swapped)} swapped, 0 dropped" in ax.get_title()
    assert "host_peak" in {ln.get_gid() for ln in ax.get_lines()}


# --- the layout to explore (issue 16 point 11) ------------------------------------------

def test_layout_blocks_are_the_hover_data(step, report) -> None:
    from minigraph.viz import layout_blocks
    blocks = layout_blocks(report)
    plan = report.plan
    assert len(blocks) == len(plots.layout_rects(report))
    for b in blocks:
        iv = plan.liveness.intervals[b.tensor]
        assert (b.start, b.end, b.bytes, b.offset) == \
            (iv.start, iv.end, iv.bytes, plan.offsets[b.tensor])
        node = step.node(step.tensors[b.tensor].producer)
        assert b.op.split(" ")[0] == node.op and node.name in b.op
    relu = next(b for b in blocks if b.tensor.startswith("relu"))
    text = relu.hover("KiB")
    for part in (relu.tensor, "op relu", f"({relu.bytes} B)",
                 f"life: steps {relu.start}-{relu.end}", f"offset {relu.offset / 1024:.2f} KiB"):
        assert part in text, (part, text)


def test_layout_view_hover_and_zoom_in_plotly(report) -> None:
    pytest.importorskip("plotly")
    from minigraph.viz import explore_layout
    view = explore_layout(report, steps=(2, 9))
    fig = view.figure
    bars = [t for t in fig.data if t.type == "bar"]
    hovered = {h for t in bars for h in t.hovertext}
    assert hovered == {b.hover(view.unit) for b in view.blocks}
    custom = {tuple(c) for t in bars for c in t.customdata}
    assert custom == {(b.tensor, b.op, b.bytes, b.start, b.end, b.offset) for b in view.blocks}
    for t in bars:     # each bar spans its tensor's life and bytes, in the axis's unit
        for x, w, y, base, c in zip(t.x, t.width, t.y, t.base, t.customdata):
            assert x - w / 2 == pytest.approx(c[3] - 0.45)
            assert base * view.div == pytest.approx(c[5])
            assert y * view.div == pytest.approx(c[2])
    assert fig.layout.xaxis.rangeslider.visible and tuple(fig.layout.xaxis.range) == (1.5, 9.5)
    lines = {t.name for t in fig.data if t.type == "scatter"}
    assert any(n.startswith("arena top") for n in lines)
    bundle = view._repr_mimebundle_()
    # no bare image/png beside the figure: JupyterLab's plotly renderer would show it
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.plotly.v1+json"}
    html = bundle["text/html"]
    import base64
    png = base64.b64encode(view.png).decode()
    assert f"data:image/png;base64,{png}" in html, "the static picture, where no script runs"
    assert "newPlot" in html and html.count("</script>") == 1, "one script, never cut short"
    assert view.png.startswith(b"\x89PNG")


def test_layout_view_falls_back_to_the_static_picture(report, monkeypatch) -> None:
    """Without plotly (or where no script runs) the view is still a picture."""
    import sys

    from minigraph.viz import explore_layout
    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    view = explore_layout(report)
    assert view.figure is None
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/png"}
    assert "tensors, arena" in bundle["text/plain"]
    assert "<img" in view.to_html() and "script" not in view.to_html()
    assert view.png.startswith(b"\x89PNG")


def test_layout_view_refuses_a_bad_range(report) -> None:
    from minigraph.viz import explore_layout
    with pytest.raises(mg.MinigraphError, match=r"\(5, 2\)"):
        explore_layout(report, steps=(5, 2))


def test_panels_side_by_side_can_share_one_unit() -> None:
    buffers = [Buffer("big", 0, 1, 20000), Buffer("small", 1, 2, 100)]
    _, placement = plan_buffers(buffers, "none", alignment=1)
    assert plots.plot_placement(buffers, placement).axes[0].get_ylabel().endswith("(KiB)")
    fig = plots.plot_placement(buffers, placement, unit="B")
    assert fig.axes[0].get_ylabel().endswith("(B)")
    assert _line(fig, "arena").get_ydata()[0] == 20100
    with pytest.raises(mg.MinigraphError, match="'MB'"):
        plots.plot_placement(buffers, placement, unit="MB")


# --- failed runs and one unit per view (issue 16 points 8, 10) --------------------------

def test_a_failed_row_is_a_hatched_bar_with_no_saving(step) -> None:
    """A DTR row that did not finish has a status; plot_comparison draws it hatched and
    empty, with its status and "no saving", never "-x%"."""
    rows = techniques.compare_techniques(step, mg.MemoryOptions(inplace=True), slow=False)
    failed = techniques.dtr_row(step, 16, mg.MemoryOptions(), 0, rows[0].no_reuse_bytes)
    assert failed.status == "below smallest budget", failed
    ok = techniques.dtr_row(step, 1.0, mg.MemoryOptions())
    assert ok.status == "ok"
    ax = plots.plot_comparison([*rows, failed]).axes[0]
    bar = [p for p in ax.patches if p.get_gid() == "dtr:below smallest budget"]
    assert len(bar) == 1 and bar[0].get_hatch() == plots.FAILED_HATCH
    assert bar[0].get_facecolor()[:3] == (1.0, 1.0, 1.0)
    text = [t.get_text() for t in ax.texts if t.get_gid() == "status:dtr:below smallest budget"]
    assert len(text) == 1 and "below smallest budget: no saving" in text[0], text
    assert "%" not in text[0]
    assert sum(1 for p in ax.patches if p.get_hatch() == plots.FAILED_HATCH) == 1


def _sweep_row(ratio: float, status: str, overhead: float | None):
    from minigraph.experiments.dtr import SweepRow
    return SweepRow("g", "dtr", ratio, 1000, "sim", status, overhead=overhead)


def test_failed_sweep_runs_sit_on_the_top_row_with_a_legend_entry() -> None:
    rows = [_sweep_row(1.0, "ok", 1.0), _sweep_row(0.8, "ok", 1.3),
            _sweep_row(0.6, "thrash", None), _sweep_row(0.5, "budget", None)]
    fig = plots.plot_dtr_sweep(rows, 0.6, chosen_status="thrashed")
    ax = fig.axes[0]
    crosses = [ln for ln in ax.get_lines() if ln.get_gid() == "failed:dtr"]
    assert len(crosses) == 1 and sorted(crosses[0].get_xdata()) == [0.5, 0.6]
    # on the top row of the axes (axes coordinates), whatever the y limits are
    assert crosses[0].get_transform() == ax.get_xaxis_transform()
    assert list(crosses[0].get_ydata()) == [plots.FAILED_Y] * 2
    legend = [t.get_text() for t in ax.get_legend().texts]
    assert plots.FAILED_LABEL in legend and "this budget: thrashed" in legend
    ok_top = max(r.overhead for r in rows if r.status == "ok")
    assert ax.get_ylim()[1] > ok_top            # the finished runs stay below that row
    chosen = plots.plot_dtr_sweep(rows, 0.9, chosen_overhead=1.9).axes[0]
    point = [ln for ln in chosen.get_lines() if ln.get_gid() == "dtr:ok"]
    assert point[0].get_ydata()[0] == 1.9 < chosen.get_ylim()[1]
    assert "this budget: compute x1.90" in [t.get_text() for t in chosen.get_legend().texts]
    clean = plots.plot_dtr_sweep(rows[:2]).axes[0]
    assert plots.FAILED_LABEL not in [t.get_text() for t in clean.get_legend().texts]


def test_the_plots_of_one_view_can_share_one_unit(step, report) -> None:
    """`unit=` puts the timeline, the layout and the bars on one unit, so the minimum
    reads the same in each."""
    rows = techniques.compare_techniques(step, mg.MemoryOptions(inplace=True), slow=False)
    m = report.theoretical_minimum
    want = f"theoretical minimum {plots.fmt_in(m, 'MiB')}"
    figs = [plots.plot_timeline(report, step, unit="MiB", minimum=m),
            plots.plot_layout(report, unit="MiB", minimum=m),
            plots.plot_comparison(rows, unit="MiB", minimum=m)]
    for fig in figs:
        assert _line(fig, "minimum").get_label() == want
        assert _line(fig, "minimum").get_xydata()[0].max() * 2 ** 20 == pytest.approx(m)
    with pytest.raises(mg.MinigraphError, match="'MB'"):
        plots.plot_comparison(rows, unit="MB")
