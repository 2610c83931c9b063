"""The memory widget's logic, without a browser: controls -> plan -> headline -> pictures.

What the widget shows must be what `mg.plan_memory` returns for the same options.
"""

from __future__ import annotations

import base64
import html
import re

import pytest

pytest.importorskip("matplotlib")

import minigraph as mg  # noqa: E402
from minigraph.viz import plots  # noqa: E402
from minigraph.viz.widget import (  # noqa: E402
    CUSTOM,
    MemoryExplorer,
    WidgetState,
    headline,
    memory_widget,
)

BYTES = r"([\d.]+ (?:B|KiB|MiB|GiB))"
HEADLINE = re.compile(rf"^peak {BYTES} -> {BYTES}, saved ([\d.]+)% "
                      rf"\(theoretical minimum {BYTES}\)")
UNITS = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}


def nbytes(text: str) -> float:
    """'9.12 MiB' -> bytes."""
    value, unit = text.split()
    return float(value) * UNITS[unit]


def mlp_step(batch: int = 32) -> mg.Graph:
    with mg.name_scope():
        x = mg.input("x", (batch, 128))
        y = mg.input("y", (batch, 10))
        W1 = mg.param("W1", (128, 256))
        W2 = mg.param("W2", (256, 10))
        h = mg.sigmoid(mg.relu(x @ W1))
        loss = ((h @ W2 - y) ** 2).mean()
        return mg.training_graph(loss, [W1, W2], lr=0.1)


@pytest.fixture(scope="module")
def step() -> mg.Graph:
    return mlp_step()


def test_headline_reads_the_report(step) -> None:
    rep = mg.plan_memory(step, inplace=True, planner="refcount")
    text = headline(rep)
    m = HEADLINE.match(text)
    assert m, text
    assert nbytes(m.group(1)) == pytest.approx(rep.no_reuse_bytes, rel=5e-3)
    assert nbytes(m.group(2)) == pytest.approx(rep.arena_bytes, rel=5e-3)
    assert float(m.group(3)) == pytest.approx(rep.saved_percent, abs=0.05)
    assert nbytes(m.group(4)) == pytest.approx(rep.theoretical_minimum, rel=5e-3)


def test_explorer_plans_exactly_what_plan_memory_plans(step) -> None:
    ex = MemoryExplorer(step)
    for state in (WidgetState(), WidgetState(inplace=False, planner="none"),
                  WidgetState(planner="ge", order="program", alignment=64),
                  WidgetState(planner="refcount", colors=2)):
        result = ex.compute(state)
        ref = mg.plan_memory(step, state.options())
        assert result.report.plan.offsets == ref.plan.offsets
        assert result.report.arena_bytes == ref.arena_bytes
        assert result.report.theoretical_minimum == ref.theoretical_minimum
        assert result.headline == headline(ref)
        figs = MemoryExplorer.figures(result)
        assert set(figs) >= {"timeline", "layout", "comparison"}
        # The layout's rectangles are the reference plan's offsets.
        rects = plots.layout_rects(ref)
        drawn = sum(len(c.get_paths()) for c in figs["layout"].axes[0].collections)
        assert drawn == len(rects)
        arena_line = [ln for ln in figs["layout"].axes[0].get_lines()
                      if ln.get_gid() == "arena"][0]
        _, div = plots.byte_unit(max(ref.arena_bytes, ref.theoretical_minimum))
        assert arena_line.get_ydata()[0] * div == pytest.approx(ref.arena_bytes)
        # Every bar is plan_memory's arena for that bar's options.
        for row in result.rows:
            assert row.bytes == mg.plan_memory(step, row.options).arena_bytes


def test_toggling_inplace_changes_the_plan_and_the_headline(step) -> None:
    w = memory_widget(step, planner="refcount", inplace=True)
    before, arena = w.headline, w.result.report.arena_bytes
    assert HEADLINE.match(before)
    w.controls["inplace"].value = False          # what a click does
    assert w.result.state.inplace is False
    assert w.result.report.arena_bytes != arena
    assert w.headline != before
    assert w.headline_html.value == f"<b>{html.escape(w.headline)}</b>"
    assert w.result.report.arena_bytes == \
        mg.plan_memory(step, w.state.options()).arena_bytes


def test_planner_dropdown_lists_every_planner_and_order(step) -> None:
    w = memory_widget(step)
    assert set(w.controls["planner"].options) == set(mg.memory.PLANNERS)
    assert set(w.controls["order"].options) == set(mg.memory.ORDERS)
    assert w.controls["model"].value == CUSTOM
    assert w.controls["batch"].disabled, "a graph passed in cannot change its batch"


def test_set_moves_controls_and_replans_once(step) -> None:
    w = memory_widget(step)
    w.set(planner="none", inplace=False)
    assert "saved 0.0%" in w.headline
    w.set(planner="ge", inplace=True)
    assert w.result.report.options.planner == "ge"
    with pytest.raises(TypeError, match="unknown control"):
        w.set(colour=3)


def test_images_are_redrawn_pngs(step) -> None:
    w = memory_widget(step)
    first = bytes(w.images["layout"].value)
    assert first.startswith(b"\x89PNG")
    w.set(planner="none", inplace=False)
    assert bytes(w.images["layout"].value) != first
    assert w.images["dtr"].layout.display == "none"     # DTR off: no sweep picture


def test_repr_mimebundle_has_the_widget_and_a_static_png(step) -> None:
    w = memory_widget(step)
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert w.headline in bundle["text/plain"]


def test_slow_planners_report_progress(step) -> None:
    ex = MemoryExplorer(step)
    seen = []
    ex.compute(WidgetState(slow=True, time_limit=2.0),
               progress=lambda i, n, label: seen.append((i, n, label)))
    labels = " ".join(label for _, _, label in seen)
    assert "ILP" in labels or "ilp" in labels
    assert seen[-1][0] == seen[-1][1], "the bar ends full"


def test_a_failing_state_shows_its_error_instead_of_raising(step) -> None:
    w = memory_widget(step)
    w.set(alignment=64)
    good = w.headline
    w.explorer._reports.clear()
    w.explorer.graph = lambda state: (_ for _ in ()).throw(mg.GraphError("broken graph"))
    w.set(alignment=512)
    assert "broken graph" in w.message.value
    assert w.headline == good


def test_dtr_adds_a_bar_and_a_sweep(step) -> None:
    ex = MemoryExplorer(step)
    result = ex.compute(WidgetState(dtr=True, dtr_budget=1.0))
    assert result.sweep
    if result.dtr is not None:
        assert result.rows[-1].technique == "dtr"
        assert "DTR at 100% budget" in result.headline
    else:
        assert result.messages
    assert "dtr" in MemoryExplorer.figures(result)


def test_explorer_builds_zoo_models_by_name() -> None:
    try:
        from minigraph.models import MODELS, get_model
        get_model("mlp", batch=2)
    except Exception as e:      # the zoo needs ops that may not be installed
        pytest.skip(f"model zoo unavailable: {e}")
    ex = MemoryExplorer("mlp", batch=2)
    assert ex.initial.model == "mlp"
    assert set(MODELS) <= set(ex.choices()["model"])
    r2 = ex.compute(ex.initial)
    r4 = ex.compute(ex.initial.replace(batch=4))
    assert r4.report.no_reuse_bytes > r2.report.no_reuse_bytes
    with pytest.raises(ValueError, match="unknown model"):
        MemoryExplorer("no-such-model")
