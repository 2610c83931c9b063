"""The DTR runtime: the rules of the state machine, each one a test (see
minigraph/runtime/dtr/runtime.py for the rules themselves)."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph.errors import BudgetError, ThrashError
from minigraph.examples import linear_chain, mlp_training
from minigraph.feeds import random_feeds
from minigraph.runtime.dtr import (
    HEURISTICS,
    DTRExecutor,
    DTRRuntime,
    FirstFitArena,
    IdealArena,
    TensorView,
    budget_bounds,
    get_heuristic,
    program_from_graph,
    register_heuristic,
    simulate,
)


@pytest.fixture(scope="module")
def mlp():
    g = mlp_training(depth=4, width=16, batch=32)
    return g, random_feeds(g), mg.Executor(g).run(random_feeds(g))


def _events_stay_within(events, budget):
    live, used = {}, 0
    for kind, name, size in events:
        if kind == "alloc":
            assert name not in live, f"{name} allocated twice without a free"
            live[name] = size
            used += size
            assert used <= budget
        else:
            assert live.pop(name) == size
            used -= size
    return live


# --- the allocator ------------------------------------------------------------------------

def test_first_fit_takes_the_lowest_block_and_coalesces_on_free():
    a = FirstFitArena(100)
    x, y, z = a.alloc(30, "x"), a.alloc(30, "y"), a.alloc(30, "z")
    assert (x, y, z) == (0, 30, 60) and a.free_bytes == 10
    a.free(y)
    assert a.alloc(40, "w") is None            # 30 + 10 free, but not contiguous
    assert a.free_around(x) == (0, 30) and a.free_around(z) == (30, 10)
    a.free(x)                                  # merges with y's hole
    assert a.largest_free() == 60 and a.alloc(40, "w") == 0
    assert [b[2] for b in a.blocks()] == ["w", None, "z", None]


def test_compaction_slides_blocks_left_and_reports_the_moves():
    a = FirstFitArena(100)
    ids = [a.alloc(20, k) for k in "abcde"]
    a.free(ids[1])
    a.free(ids[3])
    moves = a.compact()
    assert moves == [("c", 40, 20, 20), ("e", 80, 40, 20)]
    assert a.largest_free() == 40 and a.alloc(40, "f") == 60


def test_ideal_arena_is_a_counter():
    a = IdealArena(10)
    h = a.alloc(6, "a")
    assert a.can_fit(4) and not a.can_fit(5)
    a.free(h)
    assert a.free_bytes == 10


# --- results ------------------------------------------------------------------------------

@pytest.mark.parametrize("heuristic", sorted(HEURISTICS))
@pytest.mark.parametrize("ratio", [1.0, 0.75])
def test_real_mode_gives_bitwise_the_plain_executors_outputs(mlp, heuristic, ratio):
    g, feeds, ref = mlp
    ex = DTRExecutor(g, ratio=ratio, heuristic=heuristic, check_remat=True)
    out = ex.run(feeds)
    for k in ref:
        assert np.array_equal(out[k], ref[k]), k
    tr = ex.last_trace
    assert tr.remat_mismatches == []
    assert tr.max_used <= tr.budget
    _events_stay_within(tr.events, tr.budget)


def test_simulated_and_real_mode_make_the_same_decisions(mlp):
    g, feeds, _ = mlp
    for h in ("dtr", "megengine", "coop", "lru"):
        ex = DTRExecutor(g, ratio=0.7, heuristic=h)
        ex.run(feeds)
        sim = ex.simulate()
        real = ex.last_trace
        assert sim.events == real.events and sim.evicted == real.evicted
        assert (sim.evictions, sim.rematerializations, sim.defrags) == \
            (real.evictions, real.rematerializations, real.defrags)


def test_every_rematerialised_tensor_equals_its_first_computation(mlp):
    g, feeds, _ = mlp
    b = budget_bounds(g)
    ex = DTRExecutor(g, b.safe, heuristic="lru", check_remat=True)
    ex.run(feeds)
    assert ex.last_trace.remat_checked > 0 and ex.last_trace.remat_mismatches == []


def test_events_balance_and_include_recomputations(mlp):
    g, _, _ = mlp
    tr = simulate(g, ratio=0.6, ratio_of="arena")
    assert tr.rematerializations > 0
    live = _events_stay_within(tr.events, tr.budget)
    assert live == {}                       # everything planned is freed by the end
    allocs = [n for k, n, _ in tr.events if k == "alloc"]
    assert len(allocs) > len(set(allocs))   # recomputed tensors are allocated again


# --- guards -------------------------------------------------------------------------------

def test_a_budget_below_the_largest_op_footprint_is_refused_at_once(mlp):
    g, feeds, _ = mlp
    b = budget_bounds(g)
    with pytest.raises(BudgetError) as e:
        DTRExecutor(g, b.lower - 1)
    assert e.value.minimum == b.lower
    with pytest.raises(BudgetError) as e:
        simulate(g, b.lower - 1)
    assert e.value.minimum == b.lower
    assert simulate(g, b.lower).budget == b.lower      # the bound itself is accepted


def test_the_minimum_is_the_largest_op_footprint():
    g = linear_chain(10)
    b = budget_bounds(g, alignment=1, costs="unit")
    assert b.lower == 3 * 4           # a backward op: g_i, x_{i-1} in, g_{i-1} out
    assert b.peak == 11 * 4 - 4 + 4   # x_1..x_10 live at the turn, plus g_9


def test_thrashing_stops_with_a_thrash_error():
    g = linear_chain(100)
    with pytest.raises(ThrashError, match="exceeds"):
        simulate(g, 12, heuristic="lru", costs="unit", alignment=1, thrash_limit=2.0)


def test_a_10000_op_chain_is_rematerialised_without_recursion():
    # x_10000 = -(-(...x0)): every x_i dies at once, but x_10000 is read again at the end,
    # after a big op has pushed it out; getting it back replays all 10,000 ops.
    with mg.name_scope():
        xs = [mg.input("x0", (1,))]
        for _ in range(10_000):
            xs.append(mg.neg(xs[-1]))
        w = mg.exp(mg.input("big", (256,)))
        z = mg.mul(xs[-1], mg.sum(w))
        g = mg.Graph([z])
    b = budget_bounds(g, alignment=4)
    tr = simulate(g, b.lower, alignment=4, timeline=False)
    # the one live eviction is x_10000; the rest are dead links of the chain, kept while
    # it is replayed and evicted again as the replay moves on
    assert tr.evicted[0] == xs[-1].name
    assert set(tr.evicted[1:]) <= {x.name for x in xs[:-1]}
    assert tr.rematerializations == 10_000
    feeds = {"x0": np.ones(1, "float32"), "big": np.zeros(256, "float32")}
    out = DTRExecutor(g, b.lower, alignment=4, device="cpu").run(feeds)   # 4: NumPy only
    assert out[z.name][0] == 256.0


# --- stateful ops, in place, copy-on-write ---------------------------------------------------

def test_stateful_updates_are_never_replayed_and_params_never_evicted(mlp):
    g, feeds, ref = mlp
    ex = DTRExecutor(g, ratio=0.6, ratio_of="arena", heuristic="lru")
    out = ex.run(feeds)
    tr = ex.last_trace
    updates = {n.name for n in g.nodes if n.op == "sgd_update"}
    params = set(g.params)
    assert not params & set(tr.evicted)
    assert not any(name in updates for _, name, _ in tr.events)   # outputs are external
    sim = ex.simulate()
    assert sim.rematerializations == tr.rematerializations
    for p in g.params:
        assert np.array_equal(out[f"{p}_new"], ref[f"{p}_new"])


def test_old_parameter_values_are_copied_aside_when_a_recomputation_may_read_them():
    # dW0 is computed long before W1's update; evicting it means recomputing from W1.
    g = mlp_training(depth=3, width=16, batch=32)
    feeds = random_feeds(g)
    ref = mg.Executor(g).run(feeds)
    ex = DTRExecutor(g, budget_bounds(g).lower, heuristic="size")
    out = ex.run(feeds)
    for k in ref:
        assert np.array_equal(out[k], ref[k])
    assert ex.last_trace.external_copy_bytes > 0


def test_dtr_runs_in_place_capable_ops_out_of_place():
    x = mg.input("x", (64,))
    a = mg.exp(x)
    b = mg.relu(a)                    # in-place capable: relu(a) could overwrite a
    c = mg.add(b, a)                  # ... but a is read again (and may be recomputed)
    g = mg.Graph([mg.sum(c)])
    feeds = {"x": np.linspace(-2, 2, 64).astype("float32")}
    ref = mg.Executor(g).run(feeds)
    ex = DTRExecutor(g, ratio=1.0, alignment=8)
    assert np.array_equal(ex.run(feeds)[g.outputs[0]], ref[g.outputs[0]])
    allocs = [n for k, n, _ in ex.last_trace.events if k == "alloc"]
    assert a.name in allocs and b.name in allocs      # two buffers, never shared


def test_dropout_masks_are_the_same_when_recomputed():
    if not hasattr(mg, "dropout"):
        pytest.skip("mg.dropout does not exist yet")
    x = mg.input("x", (32, 16))
    W = mg.param("W", (16, 16))
    h = x
    for k in range(4):
        h = mg.dropout(mg.relu(h @ W), 0.3, name=f"drop{k}")
    g = mg.training_graph(mg.mean(h), [W], lr=0.1)
    feeds = random_feeds(g)
    for step in (0, 3):
        ref = mg.Executor(g).run(feeds, step=step)
        ex = DTRExecutor(g, ratio=0.9, heuristic="dtr", check_remat=True)
        out = ex.run(feeds, step=step)
        assert ex.last_trace.rematerializations > 0
        assert ex.last_trace.remat_mismatches == []
        for k in ref:
            assert np.array_equal(out[k], ref[k])


# --- fake delete and real free ------------------------------------------------------------------

def test_dead_tensors_are_fake_deleted_then_freed_when_nothing_needs_them():
    g = linear_chain(30)
    p = program_from_graph(g, alignment=1, costs="unit")
    rt = DTRRuntime(p, 4 * 8, "dtr")
    tr = rt.run()
    assert tr.fake_deletes > 0
    # at the end every arena tensor is freed for good: metadata released too
    states = {rt.state[k] for k, t in enumerate(p.tensors) if p.arena[k]}
    assert states == {3}              # FREED


# --- heuristics --------------------------------------------------------------------------------

def test_a_user_heuristic_is_a_plain_function_of_a_tensor_view():
    seen = []

    def biggest_oldest(t: TensorView, now: float) -> float:
        seen.append((t.name, t.size, t.cost, t.staleness, t.neighbour_cost, t.free_left,
                     t.address, t.recomputes, t.ancestor_cost, t.eqclass_cost))
        return -t.size * t.staleness

    g = mlp_training(depth=4, width=16, batch=32)
    tr = simulate(g, ratio=0.6, ratio_of="arena", heuristic=biggest_oldest)
    assert tr.heuristic == "biggest_oldest" and seen
    register_heuristic("biggest-oldest", biggest_oldest)
    try:
        again = simulate(g, ratio=0.6, ratio_of="arena", heuristic="biggest-oldest")
        assert again.evicted == tr.evicted
    finally:
        HEURISTICS.pop("biggest-oldest")


def test_megengine_parameters_are_settable():
    h = get_heuristic("megengine", a=2.0, c=0.5)
    assert h.params == {"a": 2.0, "c": 0.5}
    g = mlp_training(depth=4, width=16, batch=32)
    a = simulate(g, ratio=0.6, ratio_of="arena", heuristic="megengine")
    b = simulate(g, ratio=0.6, ratio_of="arena", heuristic="megengine", heuristic_args={"b": 0.0})
    assert a.budget == b.budget


def test_sampling_is_seeded():
    g = mlp_training(depth=8, width=16, batch=32)
    a = simulate(g, ratio=0.8, sample=True, seed=3)
    b = simulate(g, ratio=0.8, sample=True, seed=3)
    assert a.evicted == b.evicted


def test_coop_evicts_contiguous_runs_and_avoids_fragmentation_forced_evictions():
    g = mlp_training(depth=6, width=16, batch=64)
    dtr = simulate(g, ratio=0.9, heuristic="dtr")
    coop = simulate(g, ratio=0.9, heuristic="coop")
    assert coop.frag_forced_evictions <= dtr.frag_forced_evictions


def test_the_ideal_allocator_never_forces_an_eviction_by_fragmentation():
    g = mlp_training(depth=6, width=16, batch=64)
    tr = simulate(g, ratio=0.7, allocator="ideal")
    assert tr.frag_forced_evictions == 0 and tr.defrags == 0


def test_defrag_first_compacts_instead_of_evicting():
    g = mlp_training(depth=6, width=16, batch=64)
    tr = simulate(g, ratio=1.0, defrag="first")
    assert tr.frag_forced_evictions == 0 and tr.evictions == 0


# --- budget definitions ---------------------------------------------------------------------

@pytest.mark.parametrize("defrag", ["first", "last-resort", "never"])
def test_ratio_one_never_evicts_under_first_fit_with_either_definition(defrag):
    from minigraph.models import get_model
    for g in (mlp_training(depth=6, width=16, batch=64),
              get_model("lstm", T=6, hidden=16, batch=32, input=8).graph):
        b = budget_bounds(g)
        assert b.live <= b.peak and b.total == b.peak + b.external
        for of in ("total", "arena"):
            tr = simulate(g, ratio=1.0, ratio_of=of, defrag=defrag)
            assert tr.budget == b.peak
            assert (tr.evictions, tr.defrags, tr.rematerializations) == (0, 0, 0)


def test_a_ratio_of_the_total_peak_counts_the_external_bytes():
    g = mlp_training(depth=6, width=16, batch=64)
    b = budget_bounds(g)
    params = sum(g.tensors[p].nbytes for p in g.params)
    assert b.external >= params > 0
    tr = simulate(g, ratio=0.9)
    assert tr.budget == int(0.9 * b.total) - b.external
    assert abs(tr.total_ratio - 0.9) < 1e-3 and tr.ratio < 0.9
    assert simulate(g, ratio=0.9, ratio_of="arena").budget == int(0.9 * b.peak)
    with pytest.raises(BudgetError):
        simulate(g, ratio=b.external / b.total / 2)      # not even the weights fit


def test_copies_are_not_free():
    g = mlp_training(depth=2, width=16, batch=8)
    p = program_from_graph(g)
    assert all(op.cost > 0 for op in p.ops)


# --- the candidate-selection hook -------------------------------------------------------------

def test_choose_victim_is_the_public_selection_hook():
    g = mlp_training(depth=6, width=16, batch=64)
    seen = []

    class Biggest(DTRRuntime):
        def choose_victim(self, candidates, need):
            seen.append(len(candidates))
            free = [t for t in candidates if not t.pinned]
            return max(free, key=lambda t: t.size) if free else None

    p = program_from_graph(g)
    budget = budget_bounds(g).arena_budget(0.6, "arena")
    tr = Biggest(p, budget, "dtr").run()
    assert seen and tr.evictions > 0

    def biggest(candidates, need):
        free = [t for t in candidates if not t.pinned]
        return max(free, key=lambda t: t.size) if free else None

    assert DTRRuntime(p, budget, "dtr", select=biggest).run().evicted == tr.evicted


def test_cached_neighbourhood_costs_are_never_stale():
    """e* is cached per tensor and dropped when a tensor its search looked at changes
    state; the run must make exactly the decisions of one that recomputes e* afresh at
    every eviction (the paper scores lazily, over all candidates, at eviction time)."""
    from minigraph.runtime.dtr.neighbourhood import evicted_region, live_evicted_region

    class Fresh(DTRRuntime):
        def neighbour_cost(self, t):
            p = self.program
            return evicted_region(t, p.parents, p.children, self.evicted, self.cost_t)

        def live_neighbour_cost(self, t):
            p = self.program
            return live_evicted_region(t, p.parents, p.children, self.evicted, self.dead,
                                       self.cost_t)

    from minigraph.models import get_model
    p = program_from_graph(get_model("lstm", T=8, hidden=16, batch=64, input=8).graph)
    budget = p.bounds().arena_budget(0.6, "arena")
    for h in ("dtr", "dtr-live"):
        a = DTRRuntime(p, budget, h, timeline=False).run()
        b = Fresh(p, budget, h, timeline=False).run()
        assert a.evictions > 0
        assert a.evicted == b.evicted and a.extra_cost == b.extra_cost, h


def test_the_live_neighbourhood_skips_dead_descendants_nothing_live_needs():
    """a -> b -> c -> d, with b and c evicted and dead: the paper's e* of a charges b and
    c; dtr-live charges them only once d (live) is evicted too, since only then will
    anything recompute them. Evicted ancestors always count."""
    from minigraph.runtime.dtr.neighbourhood import evicted_region, live_evicted_region
    up = [[], [0], [1], [2]]
    down = [[1], [2], [3], []]
    cost = [1.0, 10.0, 100.0, 1000.0]
    evicted = [False, True, True, False]
    dead = [False, True, True, False]
    assert evicted_region(0, up, down, evicted, cost) == 110.0
    assert live_evicted_region(0, up, down, evicted, dead, cost) == 0.0
    evicted[3] = True
    assert live_evicted_region(0, up, down, evicted, dead, cost) == 1110.0
    assert live_evicted_region(3, up, down, evicted, dead, cost) == 110.0   # ancestors


@pytest.mark.parametrize("dead_first", [True, False])
def test_dead_first_offers_the_kept_dead_tensors_alone_before_the_live_ones(dead_first):
    """With `dead_first` (the default) a dead tensor kept after a rematerialisation is
    evicted before any live one, unless an evicted live tensor reads it (it would only be
    fetched back); without it (simrd's rule) dead and live compete on score."""
    from minigraph.runtime.dtr.eviction import wanted_back
    p = program_from_graph(mlp_training(depth=4, width=16, batch=32), alignment=1)
    budget = max(p.bounds().lower, int(0.6 * p.bounds().peak))
    offers, holder = [], {}
    score = get_heuristic("dtr").score

    def select(cands, need):
        rt = holder["rt"]
        free = [v for v in cands if not v.pinned]
        offers.append([(rt.dead[v.index], wanted_back(rt, v.index)) for v in free])
        return min(free, key=lambda v: score(v, rt.now), default=None)

    rt = holder["rt"] = DTRRuntime(p, budget, "dtr", dead_first=dead_first, select=select)
    tr = rt.run()
    assert tr.rematerializations > 0
    assert any(d for o in offers for d, _ in o)     # dead tensors were kept and offered
    only_dead = [o for o in offers if o and all(d for d, _ in o)]
    mixed = [o for o in offers if {d for d, _ in o} == {True, False}]
    if dead_first:
        assert only_dead
        # a dead tensor competes with live ones only when a live evicted tensor reads it
        assert all(w for o in mixed for d, w in o if d)
    else:
        assert mixed


def test_dead_first_keeps_what_an_evicted_live_tensor_reads():
    """DenseNet's concatenations are read again by every later layer's recomputation:
    evicting them first whenever they were dead made h_DTR thrash here at 0.6 of the
    peak (and the DTR authors' trace of it at 0.4); keeping the ones an evicted live
    tensor reads, it finishes."""
    g = mg.models.get_model("densenet", image=16, batch=4, growth=6, blocks=(6, 12),
                            init_channels=8).graph
    p = program_from_graph(g)
    tr = simulate(p, ratio=0.6, heuristic="dtr", thrash_limit=1.0)
    assert tr.overhead < 2.0


# --- options: one record for every entry point ------------------------------------------------

def test_every_entry_point_takes_the_same_options_and_refuses_unknown_ones():
    from minigraph.dtr_research import replay_trace, write_trace
    from minigraph.runtime.dtr import DTROptionError, DTROptions
    g = mlp_training(depth=4, width=16, batch=32)
    opts = DTROptions(heuristic="lru", defrag="last-resort", dead_first=False)
    a = simulate(g, ratio=0.7, options=opts)
    b = simulate(g, ratio=0.7, heuristic="lru", defrag="last-resort", dead_first=False)
    c = DTRExecutor(g, ratio=0.7, options=opts).simulate()
    assert a.evicted == b.evicted == c.evicted and a.extra_cost == c.extra_cost
    for bad in (lambda: simulate(g, ratio=0.7, heuristc="lru"),
                lambda: DTRExecutor(g, ratio=0.7, keep_dead=False),
                lambda: DTRRuntime(program_from_graph(g), 10**6, peak_bytes=1),
                lambda: replay_trace(write_trace(g), ratio=0.7, recompute_ratio=1)):
        with pytest.raises(DTROptionError, match="the options are heuristic, heuristic_args"):
            bad()
    with pytest.raises(DTROptionError, match="defrag must be one of"):
        DTROptions(defrag=True)


def test_the_no_evict_peak_is_the_runtimes_own_high_water_mark_without_eviction():
    """`Bounds.peak` is computed by a plain walk over the program; a runtime given an arena
    too large to ever evict reaches exactly that address, and ratio 1.0 fits."""
    from minigraph.dtr_research import parse_trace, write_trace
    from minigraph.models import get_model
    graphs = [mlp_training(depth=6, width=16, batch=64), linear_chain(12),
              get_model("lstm", T=6, hidden=16, batch=32, input=8).graph]
    programs = [program_from_graph(g) for g in graphs]
    programs += [parse_trace(write_trace(g), alignment=64) for g in graphs]
    for p in programs:
        b = p.bounds()
        rt = DTRRuntime(p, 4 * b.safe + 10 * b.peak, "lru", defrag="never", timeline=False)
        tr = rt.run()
        assert (tr.evictions, tr.defrags) == (0, 0)
        assert rt.arena.high_water == b.peak >= b.live
        assert DTRRuntime(p, b.peak, "dtr").run().evictions == 0


def test_the_executor_takes_a_plan_a_report_or_nothing():
    g = mlp_training(depth=2, width=8, batch=4)
    report = mg.plan_memory(g)
    assert mg.Executor(g, report).plan is report.plan
    assert mg.Executor(g, report.plan).plan is report.plan
    with pytest.raises(TypeError, match="not dict"):
        mg.Executor(g, {"plan": report.plan})
