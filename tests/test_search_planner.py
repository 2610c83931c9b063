"""The "search" planner: MiniMalloc-style branch and bound over canonical plans."""

from __future__ import annotations

import pytest
from fake_clock import ticking, within
from graphgen import bytes_equal

import minigraph as mg
from minigraph import examples
from minigraph.errors import PlanError
from minigraph.feeds import random_feeds
from minigraph.memory.buffers import Buffer, arena_size, theoretical_minimum, validate_offsets
from minigraph.memory.instances import ge_worked_example, hard_instance, random_buffers
from minigraph.memory.planners import PLANNERS, get_planner, plan_buffers
from minigraph.memory.planners.engine.search import (
    ABORTED,
    FOUND,
    INFEASIBLE,
    PORTFOLIO,
    RESTART_BASES,
    feasible,
    plan_search,
    restarts,
)
from minigraph.memory.planners.engine.search_rules import exact_fill, waits_for_twin
from minigraph.memory.planners.engine.search_state import Problem, State

# 13 buffers whose theoretical minimum (21 B) has no plan: the optimum is 22 B (the ILP
# agrees). Found by sampling small random problems.
GAP_13 = [(0, 6, 12, 3), (1, 3, 9, 3), (2, 0, 4, 3), (3, 4, 4, 2), (4, 3, 3, 6),
          (5, 0, 1, 6), (6, 1, 6, 2), (7, 1, 5, 1), (8, 9, 9, 3), (9, 4, 5, 1),
          (10, 5, 10, 4), (11, 0, 6, 6), (12, 4, 11, 3)]


def run(buffers, alignment: int = 1, **kw):
    aligned, placed = plan_buffers(buffers, "search", alignment, **kw)
    validate_offsets(aligned, placed.offsets, alignment=alignment)
    return arena_size(aligned, placed.offsets), placed


def test_search_is_registered():
    get_planner("search")
    assert "search" in PLANNERS


@pytest.mark.parametrize("seed", range(4))
def test_plans_of_random_buffers_validate_and_never_lose_to_greedy_size_or_bestfit(seed):
    bufs = random_buffers(150, seed=seed)
    size, placed = run(bufs, 512, node_limit=400, time_limit=None)
    for other in ("greedy-size", "bestfit"):
        aligned, p = plan_buffers(bufs, other, 512)
        assert size <= arena_size(aligned, p.offsets)
    assert size >= theoretical_minimum(plan_buffers(bufs, "none", 512)[0])
    assert placed.note.startswith("search: ")


def test_with_no_nodes_it_returns_the_better_heuristic_and_says_why():
    bufs = hard_instance(80, 1 << 16, 160, seed=3)
    size, placed = run(bufs, node_limit=0, time_limit=None)
    starts = []
    for other in ("greedy-size", "bestfit"):
        aligned, p = plan_buffers(bufs, other, 1)
        starts.append(arena_size(aligned, p.offsets))
    assert size == min(starts) > theoretical_minimum(bufs)
    assert "node limit reached" in placed.note


def test_the_ge_worked_example_is_solved_optimally():
    size, placed = run(ge_worked_example())
    assert size == 4608 == theoretical_minimum(ge_worked_example())
    assert "optimal (meets the theoretical minimum)" in placed.note


@pytest.mark.parametrize("n,capacity,steps", [(10, 64, 8), (20, 1000, 20), (40, 4096, 40),
                                              (60, 1 << 16, 120)])
def test_small_guillotine_tilings_are_solved_exactly(n, capacity, steps):
    for seed in range(5):
        bufs = hard_instance(n, capacity, steps, seed)
        size, placed = run(bufs, time_limit=None, node_limit=200_000)
        assert size == capacity, (n, seed, placed.note)
        assert "optimal" in placed.note


def test_guillotine_tilings_of_200_buffers_reach_the_optimum_within_a_node_budget():
    for seed in range(3):
        bufs = hard_instance(200, 1 << 20, 400, seed)
        size, placed = run(bufs, time_limit=None, node_limit=200_000)
        assert size == 1 << 20, placed.note


def test_an_exhausted_search_proves_the_minimum_has_no_plan():
    bufs = [Buffer(*t) for t in GAP_13]
    assert theoretical_minimum(bufs) == 21
    size, placed = run(bufs, time_limit=None, node_limit=200_000)
    assert size == 22
    assert "optimal (no plan below 22 B exists)" in placed.note
    # The proof does not depend on the order of the choices.
    problem = Problem(bufs)
    for strategy in PORTFOLIO:
        assert feasible(problem, 21, strategy, 10**6)[0] == INFEASIBLE
        status, offsets, _ = feasible(problem, 22, strategy, 10**6)
        assert status == FOUND
        validate_offsets(bufs, {b.id: o for b, o in zip(bufs, offsets)}, arena_bytes=22)


def test_below_the_theoretical_minimum_nothing_is_searched():
    problem = Problem(hard_instance(30, 4096, 30, seed=1))
    assert feasible(problem, 4095, PORTFOLIO[0], 10**6) == (INFEASIBLE, None, 0)


def test_independent_time_ranges_are_solved_apart():
    left = hard_instance(60, 1 << 16, 60, seed=4)
    right = [Buffer(f"r{b.id}", b.start + 60, b.end + 60, b.size)
             for b in hard_instance(60, 1 << 16, 60, seed=5)]
    size, placed = run(left + right, time_limit=None, node_limit=100_000)
    assert size == 1 << 16 and "optimal" in placed.note


def test_node_limit_makes_the_result_a_function_of_the_input():
    bufs = hard_instance(300, 1 << 20, 600, seed=0)
    a = run(bufs, node_limit=1500, time_limit=None)[1]
    b = run(bufs, node_limit=1500, time_limit=None)[1]
    assert a.offsets == b.offsets
    assert a.note.split(";")[0] == b.note.split(";")[0]


def test_time_limit_is_respected_and_reported():
    bufs = hard_instance(400, 1 << 20, 800, seed=0)      # no tiling found within a second
    with ticking() as clock:
        size, placed = run(bufs, time_limit=0.3)
    assert within(clock, 0.3), (clock.t, placed.note)
    if "optimal" not in placed.note:
        assert "time limit reached" in placed.note


def test_the_search_keeps_its_own_stack_for_deep_problems():
    # 1500 buffers stacked over one or two steps: 1500 placements deep, past Python's
    # default recursion limit of 1000.
    bufs = [Buffer(i, 0, i % 2, 1 + i % 5) for i in range(1500)]
    problem = Problem(bufs)
    status, offsets, nodes = feasible(problem, problem.lower_bound, PORTFOLIO[0], 10**5)
    assert status == FOUND and nodes == 1500
    validate_offsets(bufs, {b.id: o for b, o in zip(bufs, offsets)},
                     arena_bytes=problem.lower_bound)


def test_a_small_node_budget_is_not_a_proof():
    problem = Problem(hard_instance(400, 1 << 20, 800, seed=0))
    status, offsets, nodes = feasible(problem, problem.lower_bound, PORTFOLIO[0], 50)
    assert status == ABORTED and offsets is None and nodes == 50


def test_colours_are_planned_apart_and_zero_byte_buffers_get_offsets():
    bufs = [Buffer("a", 0, 3, 100, 0), Buffer("b", 1, 2, 50, 1), Buffer("c", 2, 5, 70, 0),
            Buffer("z", 1, 1, 0, 1)]
    size, placed = run(bufs, 4, node_limit=1000, time_limit=None)
    assert set(placed.offsets) == {"a", "b", "c", "z"}
    assert size == 100 + 72 + 52


def test_negative_node_limit_is_refused():
    with pytest.raises(PlanError):
        plan_buffers(ge_worked_example(), "search", 1, node_limit=-1)


@pytest.mark.parametrize("order", ["program", "best"])
def test_the_transformer_is_planned_within_one_percent_of_its_minimum(order):
    models = pytest.importorskip("minigraph.models")
    from minigraph.memory import liveness, schedule
    g = models.get_model("transformer").graph
    bufs = liveness(g, schedule(g, order), 512).buffers()
    size, placed = run(bufs, 512, time_limit=None, node_limit=20_000)
    assert size <= 1.01 * theoretical_minimum(bufs), placed.note


def test_the_proof_visits_the_same_nodes_as_before_the_rewrite():
    # Node counts of every strategy on GAP_13 (a proof at 21 B, a plan at 22 B), recorded
    # before search.py was split into named rules: same order of visits, same cuts.
    problem = Problem([Buffer(*t) for t in GAP_13])
    assert [feasible(problem, 21, s, 10**6)[2] for s in PORTFOLIO] == \
        [846, 695, 645, 846, 695, 695, 645, 695, 695, 652]
    assert [feasible(problem, 22, s, 10**6)[2] for s in PORTFOLIO] == \
        [14, 17, 13, 14, 17, 17, 13, 17, 17, 17]


def test_plan_search_takes_keyword_options_and_measures_its_arena():
    bufs = hard_instance(40, 4096, 40, seed=2)
    placed = plan_search(bufs, node_limit=10_000, time_limit=None)
    assert placed.arena_bytes == arena_size(bufs, placed.offsets) == 4096
    with pytest.raises(TypeError):
        plan_search(bufs, 1.0)          # options are keyword-only


def test_exact_fill_is_a_subset_sum_over_the_buffers_that_fit_below():
    # One section: sizes 3, 5 and 2 (buffer 2 is the one that would sit on top).
    problem = Problem([Buffer(0, 0, 0, 3), Buffer(1, 0, 0, 5), Buffer(2, 0, 0, 2)])
    st = State(problem, 10, PORTFOLIO[0])
    assert exact_fill(st, 0, 8, 2, 10)          # 3 + 5
    assert not exact_fill(st, 0, 4, 2, 10)      # no subset of {3, 5} sums to 4
    assert not exact_fill(st, 0, 8, 2, 4)       # 5 does not fit below offset 4
    assert exact_fill(st, 0, 3, 2, 4)


def test_identical_buffers_are_placed_in_index_order():
    problem = Problem([Buffer("a", 0, 2, 4), Buffer("b", 0, 2, 4), Buffer("c", 1, 2, 4)])
    st = State(problem, 12, PORTFOLIO[0])
    assert waits_for_twin(st, 1) and not waits_for_twin(st, 0)
    st.place(0)
    assert not waits_for_twin(st, 1)


def test_a_start_that_meets_the_minimum_is_returned_without_building_the_search():
    # 3000 buffers all alive together: the search's tables would hold 4.5 million pairs.
    bufs = [Buffer(i, i, 6000 - i, 4) for i in range(3000)]
    placed = plan_search(bufs, time_limit=None)
    assert placed.arena_bytes == theoretical_minimum(bufs)
    assert "optimal (meets the theoretical minimum); 0 nodes" in placed.note


@pytest.mark.parametrize("bad", [-1, 2.5, True, "10"])
def test_a_node_limit_is_a_count(bad):
    with pytest.raises(PlanError, match="node_limit") as err:
        plan_search(random_buffers(10, seed=0), node_limit=bad)
    assert repr(bad) in str(err.value)


def test_table_entries_counts_the_tables_without_building_them():
    # By hand: [0,2], [1,3], [4,4]. One pair alive together (two overlap-list entries);
    # sections cut at 0, 1, 3, 4, 5: the first buffer lives in 2, the second in 2, the
    # third in 1 -> 2 + 5 = 7 entries.
    from minigraph.memory.planners.engine.search import table_entries
    bufs = [Buffer(0, 0, 2, 8), Buffer(1, 1, 3, 8), Buffer(2, 4, 4, 8)]
    assert table_entries(bufs) == 7
    bufs = random_buffers(300, seed=5)
    p = Problem(bufs)
    assert table_entries(bufs) == sum(map(len, p.overlaps)) + sum(map(len, p.members))


def test_a_problem_too_big_for_the_time_left_repairs_the_start_plan_and_says_so():
    from minigraph.memory.planners.engine import search
    bufs = hard_instance(1200, 1 << 20, 2400, seed=0)
    rate = search.TABLE_ENTRIES_PER_SECOND
    search.TABLE_ENTRIES_PER_SECOND = 1        # as if the tables were built very slowly
    try:
        with ticking(1e-3) as clock:     # each read 1 ms later: ~3,000 repair moves
            placed = plan_search(bufs, time_limit=3.0)
    finally:
        search.TABLE_ENTRIES_PER_SECOND = rate
    assert within(clock, 3.0), (clock.t, placed.note)
    assert "plan repaired" in placed.note and "the search's tables would hold" in placed.note
    assert "within" in placed.note and "of max-live" in placed.note
    validate_offsets(bufs, placed.offsets)
    bestfit = plan_buffers(bufs, "bestfit", 1)[1].arena_bytes
    assert placed.arena_bytes <= bestfit


def test_at_scale_a_start_at_the_minimum_is_returned_at_once():
    from minigraph.memory.instances import realistic_buffers
    bufs = realistic_buffers(6000, seed=1)
    for name, budget in (("search", {"time_limit": None, "node_limit": 1000}),
                         ("anneal", {"iterations": 100})):
        aligned, placed = plan_buffers(bufs, name, 1, **budget)
        assert placed.arena_bytes == theoretical_minimum(bufs), placed.note
        assert "optimal" in placed.note, placed.note
        assert "0 moves" in placed.note or "0 nodes" in placed.note


def test_plan_search_proves_the_optimum_above_the_theoretical_minimum():
    # By hand (see GAP_13 above): 21 B are alive at the busiest step, no plan fits in 21 B,
    # one fits in 22 B. The planner must find 22 B and say that it is proved optimal.
    bufs = [Buffer(*t) for t in GAP_13]
    size, placed = run(bufs, node_limit=100_000, time_limit=None)
    assert theoretical_minimum(bufs) == 21 and size == 22
    assert "optimal (no plan below 22 B exists)" in placed.note, placed.note


def test_a_restart_breaks_ties_at_random_and_keeps_the_static_order():
    bufs = hard_instance(60, 4096, 60, seed=1)
    problem = Problem(bufs)
    plain, again = problem.ranks("T"), problem.ranks("T", 0)
    shuffled = problem.ranks("T", 7)
    assert plain == again and shuffled == problem.ranks("T", 7)
    assert shuffled != plain and sorted(shuffled) == sorted(plain) == list(range(60))
    # the static key still decides: only buffers that tie on T trade places
    peak = [max(problem.live[problem.lo[i]:problem.hi[i]]) for i in range(60)]
    by = sorted(range(60), key=shuffled.__getitem__)
    assert all(peak[a] >= peak[b] for a, b in zip(by, by[1:]))
    assert restarts(1, 4) == [RESTART_BASES[s % len(RESTART_BASES)]._replace(seed=s)
                              for s in range(1, 5)]


@pytest.mark.parametrize("name", ["branchy", "mlp2", "cnn_block"])
def test_arena_runs_of_search_plans_equal_the_unplanned_run(name):
    g = {"branchy": lambda: examples.branchy(4, 3), "mlp2": lambda: examples.two_layer_mlp()[0],
         "cnn_block": examples.cnn_block}[name]()
    feeds = random_feeds(g)
    for inplace in (False, True):
        report = mg.plan_memory(g, mg.MemoryOptions(
            inplace=inplace, planner="search", planner_args={"node_limit": 5000,
                                                             "time_limit": None}))
        plan = report.plan.validate()
        assert bytes_equal(mg.Executor(g).run(feeds), mg.Executor(g, plan).run(feeds))


def test_a_random_restart_finds_a_plan_that_every_fixed_strategy_misses():
    # A 120-buffer tiling: within 120 nodes (one per buffer) no strategy of PORTFOLIO
    # finds the plan at the minimum, the first random restart does (heavy tails).
    bufs = hard_instance(120, 4096, 120, seed=1)
    problem = Problem(bufs)
    assert all(feasible(problem, 4096, s, 120)[0] == ABORTED for s in PORTFOLIO)
    status, offsets, _ = feasible(problem, 4096, restarts(1, 1)[0], 120)
    assert status == FOUND
    validate_offsets(bufs, {b.id: o for b, o in zip(bufs, offsets)}, arena_bytes=4096)
