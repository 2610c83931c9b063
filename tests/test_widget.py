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
from minigraph.models import MODELS  # noqa: E402
from minigraph.viz import plots  # noqa: E402
from minigraph.viz import widget as widget_module  # noqa: E402
from minigraph.viz.widget import (  # noqa: E402
    CUSTOM,
    DTR_BELOW,
    DTR_OK,
    DTR_THRASHED,
    INPLACE,
    MemoryExplorer,
    WidgetState,
    headline,
    memory_widget,
    techniques_on,
    view_minimum,
)

BYTES = r"([\d.]+ (?:B|KiB|MiB|GiB))"
HEADLINE = re.compile(rf"^(?:on: [^.]+\. )?arena: peak {BYTES} -> {BYTES}, saved ([\d.]+)% "
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
        assert result.minimum == view_minimum(ref, result.rows) <= ref.theoretical_minimum
        assert result.headline == (f"on: {techniques_on(result.state)}. "
                                   + headline(ref, minimum=result.minimum, unit=result.unit))
        figs = MemoryExplorer.figures(result)
        assert set(figs) >= {"timeline", "layout", "comparison"}
        # The layout's rectangles are the reference plan's offsets.
        rects = plots.layout_rects(ref)
        drawn = sum(len(c.get_paths()) for c in figs["layout"].axes[0].collections)
        assert drawn == len(rects)
        arena_line = [ln for ln in figs["layout"].axes[0].get_lines()
                      if ln.get_gid() == "arena"][0]
        div = plots.UNIT_DIV[result.unit]
        assert arena_line.get_ydata()[0] * div == pytest.approx(ref.arena_bytes)
        # Every bar is plan_memory's arena for that bar's options.
        for row in result.rows:
            assert row.bytes == mg.plan_memory(step, row.options).arena_bytes


def test_toggling_inplace_changes_the_plan_and_the_headline(step) -> None:
    w = memory_widget(step, planner="refcount", inplace=True)
    before, arena = w.headline, w.result.report.arena_bytes
    assert HEADLINE.match(before)
    assert before.startswith("on: refcount, in-place (last reader), order program. ")
    w.controls["inplace"].value = False          # what a click does
    assert w.result.state.inplace is False
    assert w.result.report.arena_bytes != arena
    assert w.headline != before
    assert w.headline.startswith("on: refcount, order program. "), w.headline
    assert f"<b>{html.escape(w.headline)}</b>" in w.headline_html.value
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
    assert result.dtr.status == DTR_OK and result.dtr.overhead == pytest.approx(1.0)
    assert result.rows[-1].technique == "dtr"
    assert "DTR at 100% budget" in result.headline
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



# --- issue 16: DTR's default budget, failed runs, units, one minimum, layout, busy bar ----

def _zoo_or_skip() -> None:
    try:
        from minigraph.models import get_model
        get_model("mlp", batch=2)
    except Exception as e:      # the zoo needs ops that may not be installed
        pytest.skip(f"model zoo unavailable: {e}")


@pytest.fixture(scope="module")
def zoo() -> MemoryExplorer:
    _zoo_or_skip()
    return MemoryExplorer("mlp")


@pytest.mark.parametrize("model", list(MODELS))
def test_dtr_default_budget_is_feasible_and_the_smallest_that_finishes(zoo, model) -> None:
    """The slider starts at the smallest budget that could work; its default finishes."""
    state = WidgetState(model=model, dtr=True)
    result = zoo.compute(state)
    run, b = result.dtr, zoo.dtr_bounds(state)
    assert run.status == DTR_OK, run.describe()
    assert result.state.dtr_budget == run.ratio == zoo.dtr_default(state)
    assert "thrashed" not in result.headline and "below smallest" not in result.headline
    assert f"compute x{run.overhead:.2f}" in result.headline
    low = zoo.dtr_low(state)
    assert b.arena_budget(low) >= b.lower > b.arena_budget(round(low - 0.01, 2))
    assert low <= run.ratio
    # The default is the slider's start, or no budget of the sweep below it finishes.
    if run.ratio > low:
        assert not zoo.dtr_run(state, low).ok
        assert all(r.status != "ok" for r in result.sweep if r.ratio < run.ratio - 0.01)


def test_widget_slider_follows_the_model_shown(zoo) -> None:
    w = memory_widget("mlp", dtr=True)
    w.explorer = zoo
    slider = w.controls["dtr_budget"]
    for model in ("resnet", "cnn"):
        w.set(model=model)
        state = w.result.state
        assert slider.min == zoo.dtr_low(state)
        assert slider.value == w.result.dtr.ratio == zoo.dtr_default(state)
        assert w.result.dtr.ok
    w.set(dtr_budget=0.9)
    assert w.result.dtr.ratio == 0.9 and slider.value == 0.9
    w.set(dtr_budget=None)                       # back to the model's default
    assert slider.value == zoo.dtr_default(w.result.state)
    for bad in (0, -0.5, 1.5, float("nan"), "half"):
        with pytest.raises(mg.BudgetError, match="budget"):
            w.set(dtr_budget=bad)


def _failing_ratio(ex: MemoryExplorer, state: WidgetState, status: str) -> float:
    low = ex.dtr_low(state)
    for k in range(40):
        ratio = round(low + 0.01 * k, 2)
        if ex.dtr_run(state, ratio).status == status:
            return ratio
    pytest.fail(f"no {status} run on {state.model} between {low:.0%} and {low + 0.4:.0%}")


@pytest.mark.parametrize("model,status", [("resnet", DTR_THRASHED), ("mlp", DTR_BELOW)])
def test_a_failed_dtr_run_is_drawn_as_such_never_with_a_saving(zoo, model, status) -> None:
    state = WidgetState(model=model, dtr=True)
    ratio = (_failing_ratio(zoo, state, status) if status == DTR_THRASHED else
             round(zoo.dtr_low(state) - 0.2, 2))
    result = zoo.compute(state.replace(dtr_budget=ratio))
    assert result.dtr.status == status
    budget = plots.fmt_in(result.dtr.budget, result.unit)
    assert f"{result.dtr.label}: {budget} working memory, {status}" in result.headline
    assert any(status in m for m in result.messages)
    figs = MemoryExplorer.figures(result)
    ax = figs["comparison"].axes[0]
    bar = [p for p in ax.patches if p.get_gid() == f"dtr:{status}"]
    assert len(bar) == 1 and bar[0].get_hatch() == "xx"
    text = [t.get_text() for t in ax.texts if (t.get_gid() or "").endswith(f"dtr:{status}")]
    assert len(text) == 1 and status in text[0] and "%" not in text[0], text
    assert not any(t.get_gid() == "saving:dtr" for t in ax.texts)
    sweep_ax = figs["dtr"].axes[0]
    assert [ln for ln in sweep_ax.get_lines() if ln.get_gid() == f"dtr:{status}"]
    assert f"this budget: {status}" in [t.get_text() for t in sweep_ax.get_legend().texts]


def test_a_finished_dtr_run_has_its_bar_and_its_point(zoo) -> None:
    result = zoo.compute(WidgetState(model="resnet", dtr=True))
    figs = MemoryExplorer.figures(result)
    texts = [t.get_text() for t in figs["comparison"].axes[0].texts
             if t.get_gid() == "saving:dtr"]
    assert len(texts) == 1 and f"compute x{result.dtr.overhead:.2f}" in texts[0]
    point = [ln for ln in figs["dtr"].axes[0].get_lines() if ln.get_gid() == "dtr:ok"]
    assert point[0].get_ydata()[0] == pytest.approx(result.dtr.overhead)


AMOUNT = re.compile(r"(\d[\d,.]*(?:e[+-]?\d+)?)\s*([KMG]i?B|B)\b")


@pytest.mark.parametrize("model", list(MODELS))
def test_headline_units_are_powers_of_two_on_every_zoo_model(zoo, model) -> None:
    result = zoo.compute(WidgetState(model=model))
    text = result.headline
    assert HEADLINE.match(text), text
    assert "e+" not in text and not re.search(r"\b[KMG]B\b", text), text
    amounts = AMOUNT.findall(text)
    # one unit, the one byte_unit picks for the largest number (the peak without reuse)
    assert {u for _, u in amounts} == {result.unit}, amounts
    assert result.unit == plots.byte_unit(result.report.no_reuse_bytes)[0]
    assert float(amounts[0][0]) < (16384 if result.unit == "B" else 1024) or \
        result.unit == "GiB", text


def _minimum_labels(fig) -> list[str]:
    return [ln.get_label() for ax in fig.axes for ln in ax.get_lines()
            if ln.get_gid() == "minimum"]


def _label_bytes(label: str) -> tuple[float, float]:
    """'theoretical minimum 0.69 MiB' -> (bytes, the rounding of the printed number)."""
    value, unit = AMOUNT.findall(label)[-1]
    decimals = len(value.split(".")[1]) if "." in value else 0
    return float(value) * UNITS[unit], 0.5 * 10 ** -decimals * UNITS[unit]


@pytest.mark.parametrize("changes", [{}, {"inplace": False}, {"colors": 2},
                                     {"inplace": False, "alignment": 1}])
def test_one_theoretical_minimum_per_view(zoo, changes) -> None:
    """The headline and every picture give the same minimum, and no static bar is below."""
    result = zoo.compute(WidgetState(model="resnet", **changes))
    m = result.minimum
    assert m == min(r.theoretical_minimum for r in result.rows)
    assert all(r.bytes >= m for r in result.rows if r.family != "dynamic")
    assert f"theoretical minimum {plots.fmt_in(m, result.unit)})" in result.headline
    figs = MemoryExplorer.figures(result)
    for name in ("timeline", "layout", "comparison"):
        labels = _minimum_labels(figs[name])
        assert len(labels) == 1, (name, labels)
        value, rounding = _label_bytes(labels[0])
        assert abs(value - m) <= rounding + 1, (name, labels[0], m)
    summary = MemoryExplorer.summary_figure(result)
    for label in _minimum_labels(summary):
        value, rounding = _label_bytes(label)
        assert abs(value - m) <= rounding + 1, (label, m)


def test_long_labels_do_not_squeeze_the_bars(zoo) -> None:
    """Every row (slow planners, DTR failing) leaves the bars most of the figure."""
    state = WidgetState(model="mlp", slow=True, time_limit=1.0, dtr=True, dtr_budget=0.3)
    result = zoo.compute(state)
    assert result.dtr.status == DTR_BELOW
    fig = MemoryExplorer.figures(result)["comparison"]
    widget_module.figure_bytes(fig)              # lays the figure out
    assert fig.axes[0].get_position().width >= 0.6


def test_headline_wraps_and_the_export_title_is_wrapped(zoo) -> None:
    w = memory_widget("mlp", dtr=True, dtr_budget=0.3)
    assert "white-space: normal" in w.headline_html.value
    assert len(w.headline) > 120
    title = MemoryExplorer.summary_figure(w.result)._suptitle.get_text()
    assert title.replace("\n", " ") == w.headline
    assert max(len(line) for line in title.splitlines()) <= 120


def test_every_change_shows_the_busy_bar(zoo) -> None:
    """Switching the model (seconds on a large one) shows the bar, then hides it."""
    w = memory_widget("mlp")
    w.explorer = zoo
    seen: list[str] = []
    w.progress_box.layout.observe(lambda ch: seen.append(ch["new"]), names="visibility")
    classes: list[tuple] = []
    w.observe(lambda ch: classes.append(tuple(ch["new"])), names="_dom_classes")
    w.controls["model"].value = "cnn"            # what a click does
    assert w.result.state.model == "cnn"
    assert seen == ["visible", "hidden"]
    assert any("mg-busy" in c for c in classes) and "mg-busy" not in w._dom_classes
    assert "cnn, batch 8" in w.caption.value


def test_notebook_cells_drive_colours_and_dtr(step) -> None:
    w = memory_widget(step)
    w.set(colors=2)
    assert w.result.report.options.colors == 2 and w.controls["colors"].value == 2
    first = bytes(w.images["layout"].value)
    w.set(color_by="block")
    assert w.result.state.color_by == "block"
    assert bytes(w.images["layout"].value) != first
    w.set(dtr=True)
    assert w.result.dtr.ok and w.images["dtr"].layout.display is None
    assert w.result.dtr.ratio == w.explorer.dtr_default(w.result.state)
    w.set(dtr_budget=1.0)
    assert w.result.dtr.ratio == 1.0 and "DTR at 100% budget" in w.headline
    w.set(dtr=False)
    assert w.result.dtr is None and w.images["dtr"].layout.display == "none"


MINIMUM_TEXT = re.compile(r"theoretical minimum (\d[\d,.]*\s*(?:B|KiB|MiB|GiB))")


def _printed_minimums(result, figs) -> set[str]:
    """Every "theoretical minimum X" the view prints: headline, legend labels, axis
    labels and texts of every figure."""
    texts = [result.headline]
    for fig in figs:
        for ax in fig.axes:
            texts += [ln.get_label() for ln in ax.get_lines()]
            texts += [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
            texts += [t.get_text() for t in ax.texts]
            legend = ax.get_legend()
            texts += [t.get_text() for t in legend.texts] if legend is not None else []
    return {m for t in texts for m in MINIMUM_TEXT.findall(t)}


@pytest.mark.parametrize("model,changes", [("resnet", {}), ("transformer", {"dtr": True}),
                                           ("mlp", {"inplace": False})])
def test_one_view_prints_its_minimum_as_one_string(zoo, model, changes) -> None:
    """Headline, timeline, layout, bars and the export: the same "X unit" every time
    (it used to be "0.689 MiB" in the bars and "706.00 KiB" in the headline)."""
    result = zoo.compute(WidgetState(model=model, **changes))
    figs = list(MemoryExplorer.figures(result).values())
    printed = _printed_minimums(result, [*figs, MemoryExplorer.summary_figure(result)])
    assert printed == {plots.fmt_in(result.minimum, result.unit)}, printed
    # the axes are in that unit too
    for fig in figs[:3]:
        labels = fig.axes[0].get_xlabel() + fig.axes[0].get_ylabel()
        assert f"({result.unit})" in labels, labels


def test_inplace_control_offers_off_last_reader_and_strict(step) -> None:
    w = memory_widget(step, planner="refcount")
    ctl = w.controls["inplace"]
    assert [label for label, _ in INPLACE] == ["off", "last reader", "strict"]
    assert list(ctl.options) == list(INPLACE)
    assert ctl.value is True and ctl.label == "last reader"
    w.set(inplace="strict")
    assert ctl.label == "strict" and w.result.report.options.inplace == "strict"
    assert w.result.report.plan.offsets == \
        mg.plan_memory(step, mg.MemoryOptions(inplace="strict", planner="refcount")
                       ).plan.offsets
    assert "in-place (strict)" in w.caption.value
    ctl.value = False                            # what choosing "off" does
    assert w.result.state.inplace is False and not w.result.report.plan.inplace
    w.set(inplace="last-reader")                 # MemoryOptions' name for True
    assert ctl.value is True and w.result.report.options.inplace is True
    with pytest.raises(mg.PlanError, match="inplace"):
        w.set(inplace="sometimes")


def test_the_in_place_only_bar_follows_the_chosen_rule(step) -> None:
    ex = MemoryExplorer(step)
    for rule in (True, "strict"):
        rows = ex.compute(WidgetState(inplace=rule)).rows
        only = next(r for r in rows if r.technique == "none+inplace")
        assert only.options.inplace == rule


# The swap toggle (issue 48 point 6) ------------------------------------------------------

def test_swap_toggle_plans_with_plan_swap_and_the_headline_reads_its_report(step) -> None:
    from minigraph.memory.swap_plan import lowest_swap_plan, plan_swap
    w = memory_widget(step, planner="bestfit")
    before = w.headline
    assert w.controls["swap_budget"].disabled and w.result.swap is None
    w.set(swap=True)
    rep, st = w.result.swap, w.result.state
    assert rep is not None and not w.controls["swap_budget"].disabled
    ref = plan_swap(step, rep.budget, st.options(), machine="pcie4")
    assert rep.plan.offsets == ref.plan.offsets
    assert rep.plan.back_offsets == ref.plan.back_offsets and rep.swaps
    # The slider starts at the lowest budget swapping reaches, on its grid.
    low = lowest_swap_plan(step, st.options()).budget
    minimum = w.result.report.theoretical_minimum
    assert low <= rep.budget < low + 0.005 * minimum + 1
    assert rep.budget < minimum, "swap goes below the minimum without swap"
    assert w.controls["swap_budget"].value == pytest.approx(st.swap_budget)
    text = w.headline
    assert text.startswith(before.split(". ")[0] + ", swap (pcie4). ")
    unit = w.result.unit
    for part in (f"swap on (pcie4, bestfit, budget {plots.fmt_in(rep.budget, unit)}",
                 f"device peak (arena) {plots.fmt_in(rep.arena_bytes, unit)}",
                 f"host peak {plots.fmt_in(rep.host_bytes, unit)}",
                 f"moved {plots.fmt_in(rep.moved, unit)} each way",
                 f"step {ref.timing.seconds * 1e6:.1f} us against "
                 f"{ref.timing.baseline * 1e6:.1f} us without swapping",
                 f"{len(rep.hidden())} of {len(rep.swaps)} transfers hidden"):
        assert part in text, (part, text)
    assert html.escape(text) in w.headline_html.value
    w.set(swap=False)
    assert w.result.swap is None and w.headline == before
    assert w.controls["swap_budget"].disabled


def test_swap_composes_with_the_planner_and_the_link(step) -> None:
    w = memory_widget(step, planner="bestfit", swap=True, swap_budget=0.97)
    assert w.result.swap.budget == round(0.97 * w.result.report.theoretical_minimum)
    for planner in ("greedy-size", "bestfit"):
        w.set(planner=planner)
        rep = w.result.swap
        assert rep.options.planner == planner and rep.arena_bytes <= rep.budget
        assert w.controls["swap_budget"].value == 0.97, "another planner keeps the budget"
        assert f"swap on (pcie4, {planner}," in w.headline
    slow = w.result.swap.timing.seconds
    w.set(link="nvlink-c2c")
    assert "swap on (nvlink-c2c," in w.headline and "swap (nvlink-c2c)" in w.headline
    assert w.result.swap.timing.seconds <= slow
    with pytest.raises(mg.ArgumentError, match="link=.pcie9. is not offered"):
        w.set(link="pcie9")


def test_a_swap_budget_below_what_swapping_reaches_is_its_one_line_message(step) -> None:
    w = memory_widget(step, planner="bestfit", swap=True)
    good = w.result.swap
    w.set(swap_budget=0.05)
    assert w.result.swap is None
    msg = w.message.value
    assert "swap: " in msg and "below what swapping reaches" in msg and "Traceback" not in msg
    assert "\n" not in w.result.messages[0]
    assert "swap on" not in w.headline and HEADLINE.match(w.headline)
    w.set(colors=2)                              # plan_swap refuses colours: its line
    assert "colors=2 is not supported" in w.message.value and w.result.swap is None
    w.set(colors=1, swap_budget=good.budget / w.result.report.theoretical_minimum)
    assert w.result.swap is not None and w.message.value == ""
    with pytest.raises(mg.ArgumentError, match="swap_budget must be a fraction"):
        w.set(swap_budget=2.5)


def test_swap_pictures_show_the_split_intervals_and_the_transfers(step) -> None:
    ex = MemoryExplorer(step)
    result = ex.compute(WidgetState(planner="bestfit", swap=True))
    rep = result.swap
    # The timeline counts a swapped tensor in its front and back only.
    tl = plots.timeline(rep, step)
    assert max(tl.planned_live) == rep.theoretical_minimum <= rep.arena_bytes
    assert max(plots.timeline(result.report).planned_live) > rep.arena_bytes
    # The layout draws both halves where the plan put them.
    rects = {r.name: r for r in plots.layout_rects(rep)}
    for s in rep.swaps:
        front, back = rects[s.tensor], rects[s.back_id]
        assert (front.swap, front.end, front.offset) == ("front", s.until,
                                                         rep.plan.offsets[s.tensor])
        assert (back.swap, back.start, back.offset) == ("back", s.back,
                                                        rep.plan.back_offsets[s.tensor])
    figs = MemoryExplorer.figures(result)
    ax = figs["timeline"].axes[0]
    gids = {c.get_gid() for c in ax.collections} | {ln.get_gid() for ln in ax.get_lines()}
    assert {"offload", "prefetch", "host"} <= gids
    assert "swapped" in {c.get_gid() for c in figs["layout"].axes[0].collections}
    assert "swapped (front and back each)" in figs["layout"].axes[0].get_title()


# DTR's evict control (issue 48 points 4 and 6) ------------------------------------------

def test_dtr_evict_drop_is_the_default_and_draws_what_it_drew(step) -> None:
    ex = MemoryExplorer("resnet")
    plain = ex.compute(WidgetState(model="resnet", dtr=True, dtr_budget=0.6))
    assert plain.state.dtr_evict == "drop" and plain.dtr.evict == "drop"
    assert plain.dtr.label == "DTR at 60% budget" and "swapped" not in plain.headline
    fig = MemoryExplorer.figures(plain)["dtr"]
    assert len(fig.axes) == 1 and fig.axes[0].get_title().startswith("DTR: compute")
    assert "DTR (evict" not in techniques_on(plain.state)


def test_dtr_evict_cheaper_counts_swapped_apart_from_dropped_with_the_host_peak() -> None:
    from minigraph.runtime.dtr import simulate
    from minigraph.viz.dtr_budget import seconds_program
    ex = MemoryExplorer("resnet")
    st = WidgetState(model="resnet", dtr=True, dtr_budget=0.6, dtr_evict="cheaper")
    result = ex.compute(st)
    run = result.dtr
    assert run.ok and run.evict == "cheaper" and run.swapped > 0 and run.dropped > 0
    # The run is DTR's own: op seconds on the link's machine, a second of copying costs 1.
    graph = ex.graph(st)
    order = mg.plan_memory(graph, st.options()).plan.schedule
    ref = simulate(seconds_program(graph, order, st.alignment, "pcie4"), budget=run.budget,
                   heuristic="dtr", evict="cheaper", machine="pcie4", cost_rate=1.0)
    assert (run.swapped, run.dropped) == (len(ref.swapped), len(ref.evicted) - len(ref.swapped))
    assert run.host_peak == ref.host_peak > 0 and run.overhead == ref.overhead
    assert run.trace.footprint.host == run.host_peak
    words = f"{run.swapped} evictions swapped (host peak "
    assert words in result.headline and f"{run.dropped} dropped" in result.headline
    assert words in result.rows[-1].note and result.rows[-1].label.startswith("DTR (cheaper)")
    assert "DTR (evict cheaper, pcie4)" in result.headline
    assert "copy out to host memory and back" in result.caption
    # A faster link: the cheaper of the two swaps at least as much here.
    fast = ex.compute(st.replace(link="nvlink-c2c")).dtr
    assert fast.ok and fast.swapped >= run.swapped and fast.overhead <= run.overhead


def test_the_evict_dropdown_drives_dtr_and_enables_the_link(step) -> None:
    w = memory_widget("resnet", dtr=True, dtr_budget=0.6)
    assert w.controls["dtr_evict"].value == "drop" and w.controls["link"].disabled
    before = w.headline
    w.set(dtr_evict="swap")
    assert not w.controls["link"].disabled and w.result.dtr.evict == "swap"
    assert w.result.dtr.swapped > 0 and w.result.dtr.dropped == 0
    assert w.images["dtr"].layout.display is None
    w.set(dtr_evict="drop")
    assert w.headline == before and w.controls["link"].disabled
    w.set(dtr=False)
    assert w.controls["dtr_evict"].disabled
    with pytest.raises(mg.ArgumentError, match="dtr_evict=.recompute. is not offered"):
        w.set(dtr_evict="recompute")


def test_the_widget_starts_from_the_one_set_of_defaults_and_says_what_it_switches_on():
    from minigraph.memory.api import MemoryOptions
    from minigraph.viz.explorer import MemoryExplorer, WidgetState
    state, default = WidgetState(), MemoryOptions()
    assert (state.order, state.colors, state.alignment) == (
        default.order, default.colors, default.alignment)
    view = MemoryExplorer("mlp").compute(WidgetState(model="mlp"))
    assert ("Switched on here: inplace True (the default is False), planner refcount "
            "(the default is none).") in view.caption
