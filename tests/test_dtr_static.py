"""Static baselines on DTR's cost model: sequence evaluation, Chen's sqrt(n), Checkmate."""

from __future__ import annotations

import pytest

from minigraph.dtr_research import checkmate, chen_at, chen_curve, chen_sqrt, evaluate_sequence
from minigraph.errors import GraphError
from minigraph.examples import linear_chain, mlp_training
from minigraph.runtime.dtr import program_from_graph, simulate


def chain(n):
    return program_from_graph(linear_chain(n), alignment=1, costs="unit")


def test_the_program_order_sequence_has_the_no_remat_peak_and_base_cost():
    p = chain(10)
    peak, cost = evaluate_sequence(p, list(range(len(p.ops))))
    assert (peak, cost) == (p.peak(), p.base_cost)


def test_a_sequence_that_reads_a_tensor_before_it_exists_is_refused():
    p = chain(4)
    with pytest.raises(GraphError, match="has not been computed"):
        evaluate_sequence(p, [1, 0] + list(range(2, len(p.ops))))
    with pytest.raises(GraphError, match="never runs"):
        evaluate_sequence(p, list(range(len(p.ops) - 1)))


def test_chen_sqrt_n_on_a_chain_costs_about_one_extra_forward():
    p = chain(64)
    r = chen_sqrt(p)
    assert r.peak < p.peak() / 2
    assert 1.0 < r.overhead <= 1.5 + 1e-9


def test_the_chen_curve_is_a_pareto_front_from_no_remat_down():
    p = chain(36)
    front = chen_curve(p)
    assert front[-1].peak == p.peak() and front[-1].overhead == 1.0
    peaks = [r.peak for r in front]
    costs = [r.cost for r in front]
    assert peaks == sorted(peaks) and costs == sorted(costs, reverse=True)
    assert chen_at(p, front[0].peak).cost == front[0].cost
    assert chen_at(p, front[0].peak - 1) is None


def test_checkmate_is_optimal_on_a_small_chain_and_no_worse_than_chen():
    p = chain(6)
    for budget in (p.peak(), 7 * 4):
        r = checkmate(p, budget, time_limit=20)
        assert r.optimal and r.peak <= budget
        best_chen = chen_at(p, budget)
        if best_chen is not None:
            assert r.cost <= best_chen.cost + 1e-9
    assert checkmate(p, p.peak(), time_limit=20).overhead == 1.0


def test_the_optimum_is_no_worse_than_dtr_or_chen():
    p = chain(8)
    for budget in (6 * 4, 9 * 4):
        r = checkmate(p, budget, time_limit=20)
        assert r.peak <= budget
        if r.optimal:
            assert r.cost <= simulate(p, budget, allocator="ideal").total_cost + 1e-9
            best_chen = chen_at(p, budget)
            assert best_chen is None or r.cost <= best_chen.cost + 1e-9


def test_checkmate_refuses_big_graphs_and_reports_infeasible_budgets():
    g = mlp_training(depth=2, width=8, batch=64)
    with pytest.raises(ValueError, match="too many"):
        checkmate(g, ratio=0.9, max_ops=10)
    from minigraph.errors import BudgetError
    with pytest.raises(BudgetError):
        checkmate(chain(4), 8, time_limit=5)
