"""The plots: each returns a Figure whose elements are the plan's own numbers."""

from __future__ import annotations

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
    unit, div = plots.byte_unit(max(plots.timeline(report, step).total + [1]))
    base = plots.timeline(report, step).base
    arena = _line(fig, "arena").get_ydata()
    assert arena[0] * div == pytest.approx(base[0] + report.arena_bytes)
    minimum = _line(fig, "minimum").get_ydata()
    assert minimum[0] * div == pytest.approx(base[0] + report.theoretical_minimum)
    _line(fig, "no-reuse")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "activations" in labels and "gradients" in labels
    fig.savefig(__import__("io").BytesIO(), format="png")


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


def test_dtr_row_and_sweep(step) -> None:
    row = techniques.dtr_row(step, 1.0, mg.MemoryOptions())
    assert row.family == "dynamic" and row.bytes > 0 and "compute x" in row.note
    rows = techniques.dtr_sweep(step, [1.0])
    fig = plots.plot_dtr_sweep(rows, 1.0)
    assert isinstance(fig, Figure)
