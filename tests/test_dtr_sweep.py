"""Budget sweeps, their table and their plot; the speed of simulated mode."""

from __future__ import annotations

import time

import pytest

from minigraph.dtr_research import chen_sqrt
from minigraph.examples import mlp_training
from minigraph.experiments.dtr import format_rows, sweep
from minigraph.runtime.dtr import program_from_graph
from minigraph.viz.plots import plot_sweep


def test_a_sweep_has_one_row_per_heuristic_and_ratio_and_reports_progress():
    g = mlp_training(depth=6, width=16, batch=64)
    seen = []
    rows = sweep(g, [1.0, 0.7], ["dtr", "lru", "coop"],
                 progress=lambda done, total, row: seen.append((done, total)))
    assert len(rows) == 6 and seen[-1] == (6, 6)
    assert {r.heuristic for r in rows} == {"dtr", "lru", "coop"}
    full = [r for r in rows if r.ratio == 1.0]
    assert all(r.status == "ok" for r in full)
    table = format_rows(rows)
    assert table.count("\n") == 7 and "| dtr |" in table


def test_a_real_mode_sweep_measures_time():
    g = mlp_training(depth=4, width=16, batch=32)
    rows = sweep(g, [0.8], ["dtr"], mode="real")
    assert rows[0].status == "ok" and rows[0].measured_overhead is not None


def test_plot_sweep_draws_heuristics_and_static_points():
    plt = pytest.importorskip("matplotlib.pyplot")
    g = mlp_training(depth=6, width=16, batch=64)
    rows = sweep(g, [1.0, 0.8, 0.6], ["dtr", "lru"])
    ax = plot_sweep(rows, static=[chen_sqrt(g)])
    labels = ax.get_legend_handles_labels()[1]
    assert "dtr" in labels and "sqrt(n)" in labels
    plt.close("all")


def test_one_budget_of_a_3000_op_graph_simulates_in_under_5_seconds():
    g = mlp_training(depth=375, width=16, batch=256)
    p = program_from_graph(g)
    assert len(p.ops) >= 3000
    t0 = time.perf_counter()
    rows = sweep(p, [0.5], ["dtr"])
    assert rows[0].status == "ok"
    assert time.perf_counter() - t0 < 5.0
